"""Exercise 6: choose. Scenario questions after the source texts' questions and answers
(BatchNorm vs LayerNorm, when to prefer which, training vs evaluation), in our words.

Each question names the page that shows why. Where the registry or the decision
guide can answer a question, the tests check that they agree with it.
"""

from __future__ import annotations

from dataclasses import dataclass

from normviz.methods import METHODS
from normviz.practice.common import STATISTICS, Exercise, pick, rng_for
from normviz.practice.show import section
from normviz.sources import cite

SLUG = "choose"
LABEL = "Choose"
INTRO = "A situation from practice: pick the answer you would defend, then read why."


@dataclass(frozen=True)
class Question:
    key: str
    prompt: str
    options: tuple[tuple[str, str], ...]  # (key, label); keys of METHODS where they name one
    answer: str
    why: str
    link: tuple[str, str]


def _methods(*keys: str) -> tuple[tuple[str, str], ...]:
    return tuple((k, METHODS[k].label) for k in keys)


# The practice list's methods with statistics: the questions are about what a statistic
# pools, and DyT (a drop-in for LayerNorm in transformers, its authors claim) would make
# the transformer question's answer two.
ALL = _methods(*STATISTICS)
QUESTIONS: tuple[Question, ...] = (
    Question(
        "detection",
        "You train an object detector on large images; only 2 images fit on each GPU. "
        "Which normalization do you put in its convolutional backbone?",
        ALL,
        "group",
        "Two samples give BatchNorm very noisy statistics. GroupNorm pools channel groups "
        "within each image, so the batch size no longer matters. Mask R-CNN as first "
        f"published ({cite('he2017')}) froze BatchNorm instead; {cite('wu2018')} trained it "
        "with GroupNorm and scored better.",
        ("choose", "Which normalization?"),
    ),
    Question(
        "transformer",
        "A transformer processes sentences of varying length, and at inference it generates "
        "one token at a time for one user. Which normalization fits?",
        ALL,
        "layer",
        "LayerNorm normalizes each token over its own features: no other sample and no "
        "other position takes part, so training and generation compute the same thing.",
        ("choose", "Which normalization?"),
    ),
    Question(
        "llm",
        "A large language model must save every operation it can per token, and centring "
        "the features buys it little. Which layer do most such models use?",
        ALL,
        "rms",
        "RMSNorm skips the mean: it divides each token by its root mean square, one "
        "reduction instead of two.",
        ("distributions", "Distributions"),
    ),
    Question(
        "style",
        "A style-transfer network should remove each image's own contrast, per channel, "
        "before it paints a new style. Which normalization?",
        ALL,
        "instance",
        "InstanceNorm gives every image and channel its own mean and variance over the "
        "positions, erasing exactly that per-image contrast.",
        ("axes", "the Axis Explorer"),
    ),
    Question(
        "cnn",
        "A ResNet classifier trains with 256 images per GPU. Which normalization is the "
        "usual choice?",
        ALL,
        "batch",
        "With large batches BatchNorm's statistics are reliable, and its noise even "
        "regularizes a little; at inference it uses the running statistics.",
        ("choose", "Which normalization?"),
    ),
    Question(
        "eval",
        "Your BatchNorm model scores well in training but its predictions for single images "
        "change with what else is in the batch. What did you most likely forget?",
        (
            ("eval", "to call model.eval() before inference"),
            ("eps", "to raise ε"),
            ("affine", "to turn off γ and β"),
            ("lr", "to lower the learning rate"),
        ),
        "eval",
        "In training mode BatchNorm normalizes with the batch's own statistics, so an "
        "image's output depends on its batch mates; model.eval() switches to the stored "
        "running statistics.",
        ("batchnorm", "the BatchNorm lab"),
    ),
    Question(
        "depends",
        "Which of these layers makes one sample's output depend on the other samples in its batch?",
        ALL,
        "batch",
        "Only BatchNorm pools over the batch axis; every other layer computes each "
        "sample's statistics from that sample alone.",
        ("axes", "the Axis Explorer"),
    ),
    Question(
        "checkpoint",
        "You save a BatchNorm model's γ and β but not its buffers. What goes wrong when you "
        "reload it for inference?",
        (
            ("running", "the running mean and variance are back at 0 and 1"),
            ("nothing", "nothing: γ and β are all it learned"),
            ("eps", "ε is lost"),
            ("train", "the model cannot be trained any more"),
        ),
        "running",
        "The running statistics are buffers, not parameters: without them evaluation "
        "normalizes with the initial mean 0 and variance 1.",
        ("batchnorm", "the BatchNorm lab"),
    ),
    Question(
        "gamma",
        "Why do normalization layers learn γ and β after standardizing?",
        (
            ("scale", "so the network can choose the scale and offset it needs"),
            ("speed", "to make the layer faster"),
            ("eps", "to avoid dividing by zero"),
            ("batch", "to make the output independent of the batch"),
        ),
        "scale",
        "Standardizing forces mean 0 and variance 1; γ and β let training undo or adjust "
        "that where a different scale helps (γ = √(σ² + ε), β = μ recovers the input "
        "exactly; γ = σ leaves a small shrink from ε).",
        ("distributions", "Distributions"),
    ),
    Question(
        "prenorm",
        "In a very deep transformer, where does the normalization usually sit so that "
        "training stays stable?",
        (
            ("pre", "before each sublayer, inside the residual branch (pre-norm)"),
            ("post", "after each residual addition (post-norm)"),
            ("none", "nowhere: residual connections suffice"),
        ),
        "pre",
        "Pre-norm leaves the residual path an identity, so gradients reach early layers "
        "directly; post-norm renormalizes that path at every block.",
        ("residual", "Pre-norm vs post-norm"),
    ),
)
KEYS = tuple(q.key for q in QUESTIONS)


def make(seed: int) -> Exercise:
    q = next(q for q in QUESTIONS if q.key == pick(KEYS, SLUG, seed))
    options = list(q.options)
    rng_for(SLUG, seed).shuffle(options)
    return Exercise(
        kind=SLUG,
        seed=seed,
        prompt=q.prompt,
        form="choice",
        truth=(q.answer,),
        explanation=(q.why,),
        link=q.link,
        options=tuple(options),
    )


SECTION = section(SLUG, LABEL, INTRO, make)
