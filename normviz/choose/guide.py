"""Decision guide: the source texts' decision flow as a function, and as a flowchart.

Architecture first (transformer, RNN, CNN, style transfer, detection or
segmentation), then, for convolutional networks, the batch size per device
(16 or more: BatchNorm, fewer: GroupNorm), then what inference demands.
Labels, best uses and pitfalls come from the method registry. The section reads
top to bottom: intro, knobs, run (the recommendation), the advice and reasons
(computed from it), and the flowchart with its path highlighted.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from normviz import style
from normviz.errors import NormConfigError
from normviz.knobs import Knob, Value
from normviz.methods import METHODS
from normviz.sections import Extra, Progress, Section
from normviz.sources import cite

ARCHITECTURES: dict[str, str] = {
    "transformer": "Transformer",
    "rnn": "RNN / LSTM",
    "cnn": "CNN (classification, general vision)",
    "detection": "CNN for detection or segmentation (large images)",
    "style": "Style transfer",
}
CONSTRAINTS: dict[str, str] = {
    "online": "inference sees one sample at a time (online, streaming)",
    "same": "training and inference must compute exactly the same function",
    "shift": "the data at inference may drift away from the training data",
    "distributed": "training is spread over several devices",
    "cost": "every operation per token counts (a large language model)",
}
BATCH_THRESHOLD = 16  # per device: at or above it batch statistics are reliable enough
MAX_BATCH = 65_536


class GuideError(NormConfigError):
    """An answer the guide cannot use; the message lists the valid choices."""


@dataclass(frozen=True)
class Situation:
    """What the user told the guide."""

    architecture: str  # key of ARCHITECTURES
    batch_per_device: int  # samples per device per step (micro-batch under accumulation)
    constraints: frozenset[str] = frozenset()  # keys of CONSTRAINTS

    def check(self) -> None:
        """Raise GuideError for an unknown architecture or constraint, or a bad batch size."""
        if self.architecture not in ARCHITECTURES:
            raise GuideError(
                f"unknown architecture {self.architecture!r}: choose one of "
                f"{', '.join(ARCHITECTURES)}"
            )
        b = self.batch_per_device
        if isinstance(b, bool) or not isinstance(b, int) or not 1 <= b <= MAX_BATCH:
            raise GuideError(f"batch size per device must be a whole number from 1 to {MAX_BATCH}")
        unknown = sorted(set(self.constraints) - set(CONSTRAINTS))
        if unknown:
            raise GuideError(
                f"unknown constraint {unknown[0]!r}: choose from {', '.join(CONSTRAINTS)}"
            )


@dataclass(frozen=True)
class Recommendation:
    """The guide's answer: a method, why, what to watch, and the path through the flowchart."""

    method: str  # METHODS key
    reasons: tuple[str, ...]
    pitfalls: tuple[str, ...]
    alternative: str | None  # a METHODS key worth considering instead, or None
    alternative_reason: str  # reads after the alternative's name: "RMSNorm, <reason>"
    path: tuple[str, ...]  # flowchart node ids from the root to the leaf

    @property
    def label(self) -> str:
        return METHODS[self.method].label

    @property
    def alt_label(self) -> str:
        return METHODS[self.alternative].label if self.alternative else ""


def recommend(s: Situation) -> Recommendation:
    """Walk the decision flow for a situation.

    Raises:
        GuideError: an unknown architecture or constraint, or a batch size out of range.
    """
    s.check()
    c = s.constraints
    reasons: list[str] = []
    pitfalls: list[str] = []
    alt: str | None = None
    alt_reason = ""
    arch = s.architecture
    path: list[str] = ["root", arch]
    if arch in ("transformer", "rnn"):
        if arch == "transformer":
            reasons.append(
                "Attention mixes tokens inside one sample, so statistics taken per token fit; "
                "batch statistics would tie a prediction to the rest of the batch."
            )
            reasons.append(
                "Generation produces one token at a time, often for a single sequence, so "
                "there is no batch to take statistics from; long contexts leave room for "
                "only a few sequences per device; and statistics pooled over the batch and "
                "the positions would let other sequences, and later tokens of the same "
                "one, leak into each position's output."
            )
        else:
            reasons.append(
                "Sequence lengths vary and the same layer runs at every time step, so "
                "batch statistics would change from step to step; per-sample statistics do not."
            )
        reasons.append("It computes the same thing in training and inference, at any batch size.")
        method = "layer"
        if arch == "transformer" and "cost" in c:
            method, alt = "rms", "layer"
            reasons.append(
                "RMSNorm skips the mean and the shift, which saves work per token; large "
                "language models commonly use it."
            )
            alt_reason = "if centring the features matters for your data."
        elif arch == "transformer":
            alt = "rms"
            alt_reason = "a cheaper, uncentred variant that many large models use."
        if arch == "transformer":
            pitfalls.append(
                "Place it before each sublayer (pre-norm, x + F(Norm(x))) in deep stacks, and "
                f"add a final norm before the output ({cite('xiong2020')}): see the pre-norm "
                "vs post-norm page."
            )
        else:
            pitfalls.append(
                "In a recurrent layer, normalize the summed inputs of each time step with "
                f"that step's own statistics ({cite('ba2016')}); torch's nn.LSTM and nn.GRU "
                "have no built-in normalization, so that takes a custom cell (or a LayerNorm "
                "between stacked layers)."
            )
    elif arch == "style":
        method = "instance"
        reasons.append(
            "Style lives in each image's per-channel mean and contrast; normalizing every "
            "channel of every image on its own removes it, whatever the batch "
            f"({cite('ulyanov2016')})."
        )
    else:  # cnn, detection: the batch-size question
        path.append(QUESTION)
        big = s.batch_per_device >= BATCH_THRESHOLD
        if arch == "detection":
            reasons.append(
                "Large inputs for detection or segmentation usually leave room for only 1 or "
                f"2 images per device. Mask R-CNN as first published ({cite('he2017')}) kept "
                "BatchNorm frozen at its ImageNet statistics; training it with GroupNorm "
                f"instead, and scoring better, was an experiment of {cite('wu2018')}."
            )
        if big and "same" not in c:
            method = "batch"
            reasons.append(
                f"{s.batch_per_device} samples per device (≥ {BATCH_THRESHOLD}) give stable "
                "per-channel batch statistics, and BatchNorm's noise even regularizes a little."
            )
            reasons.append(
                "At large batches BatchNorm still edges out GroupNorm: with 32 images per GPU, "
                f"{cite('wu2018')} report 23.6 % (BatchNorm) against 24.1 % (GroupNorm) top-1 "
                "error for ResNet-50 on ImageNet."
            )
            alt = "group"
            alt_reason = "if batches shrink or inference must match training."
        else:
            method = "group"
            if big:
                reasons.append(
                    "You need training and inference to compute the same function, which "
                    "rules out BatchNorm's batch statistics in training."
                )
            else:
                reasons.append(
                    f"With {s.batch_per_device} sample(s) per device (< {BATCH_THRESHOLD}), "
                    "batch statistics are too noisy; GroupNorm never looks across samples."
                )
                reasons.append(
                    "GroupNorm's accuracy holds as the batch shrinks while BatchNorm's falls: "
                    f"at 2 images per GPU {cite('wu2018')} report GroupNorm's ImageNet error "
                    "10.6 points below BatchNorm's."
                )
            reasons.append("It keeps some channel structure (groups), unlike LayerNorm.")
            alt = "batch" if not big else None
            alt_reason = f"once each device sees ≥ {BATCH_THRESHOLD} samples." if alt else ""
    path.append(method)
    m = METHODS[method]
    pitfalls.insert(0, f"{m.label}: {m.pitfall}.")
    if method == "batch":
        pitfalls.append(
            "Call model.eval() before inference, and save the running mean and variance "
            "with the model (they are buffers in its state_dict)."
        )
        if "online" in c:
            pitfalls.append(
                "One sample at a time is fine in eval mode (running statistics), but never "
                "run a single sample through it in training mode."
            )
        if "shift" in c:
            pitfalls.append(
                "Drifting data makes the running statistics stale: re-estimate them on recent "
                "data (done at test time it markedly improves accuracy on corrupted images: "
                f"{cite('schneider2020')}), or use GroupNorm."
            )
        if "distributed" in c:
            pitfalls.append(
                "Each device computes its own batch statistics; use SyncBatchNorm if the "
                "per-device batch is small (it pools them across devices, at the price of "
                "communication in every layer)."
            )
        pitfalls.append(
            "A convolution or linear layer right before BatchNorm needs no bias (bias=False): "
            "the mean subtraction removes it."
        )
    else:
        if "shift" in c or "online" in c:
            reasons.append(
                f"{m.label} takes its statistics from the current sample, so single-sample "
                "inference and drifting data need no special care."
            )
        if "distributed" in c:
            reasons.append(
                f"{m.label} never pools across samples, so data-parallel training needs no "
                "synchronized statistics: every device computes the same function."
            )
    pitfalls.append(DECAY_ADVICE)
    return Recommendation(method, tuple(reasons), tuple(pitfalls), alt, alt_reason, tuple(path))


DECAY_ADVICE = (
    "Weight decay on γ and β is a recipe choice, not a law: transformer recipes usually "
    "exempt them (and the biases), while classic ResNet/ImageNet recipes decay every "
    "parameter. Decaying them can change calibration and training stability, so say which "
    "you do."
)


# ---- the flowchart, as Graphviz DOT (st.graphviz_chart draws it) -------------------

QUESTION = "batch?"  # node id of the batch-size question; leaves are METHODS keys
_NODES: dict[str, str] = {
    "root": "What architecture?",
    "transformer": "Transformer",
    "rnn": "RNN / LSTM",
    "cnn": "CNN",
    "detection": "Detection /\\nsegmentation",
    "style": "Style transfer",
    QUESTION: f"Batch per device\\n≥ {BATCH_THRESHOLD}?",
}
_LEAVES: tuple[str, ...] = ("layer", "rms", "batch", "group", "instance")
_EDGES: tuple[tuple[str, str, str], ...] = (
    ("root", "transformer", ""),
    ("root", "rnn", ""),
    ("root", "cnn", ""),
    ("root", "detection", ""),
    ("root", "style", ""),
    ("transformer", "layer", ""),
    ("transformer", "rms", "cost per token"),
    ("rnn", "layer", ""),
    ("cnn", QUESTION, ""),
    ("detection", QUESTION, ""),
    (QUESTION, "batch", "yes"),
    (QUESTION, "group", "no, or train must\\nmatch inference"),
    ("style", "instance", ""),
)


def flowchart_dot(rec: Recommendation | None = None) -> str:
    """The decision flowchart; the path of `rec` (if given) is drawn in the highlight colour."""
    path = list(rec.path) if rec else []
    hot_edges = set(itertools.pairwise(path))
    font = f'fontname="{style.FONT_FAMILY.split(",")[0]}"'
    lines = [
        "digraph G {",
        "  rankdir=LR;",
        f'  node [shape=box, style="rounded,filled", fillcolor="white", {font}, fontsize=14];',
        f"  edge [{font}, fontsize=12];",
    ]
    for nid, text in _NODES.items():
        hot = nid in path
        lines.append(
            f'  "{nid}" [label="{text}", color="{style.SELECTED if hot else style.BEFORE}", '
            f"penwidth={3 if hot else 1}];"
        )
    for key in _LEAVES:
        hot = key in path
        lines.append(
            f'  "{key}" [label="{METHODS[key].label}", fillcolor="{style.METHOD_COLOURS[key]}", '
            f'fontcolor="{style.ink(style.METHOD_COLOURS[key])}", '
            f'color="{style.SELECTED if hot else "white"}", '
            f"penwidth={5 if hot else 1}];"
        )
    for a, b, label in _EDGES:
        hot = (a, b) in hot_edges
        attrs = [f'color="{style.SELECTED if hot else style.EDGE}"', f"penwidth={3 if hot else 1}"]
        if label:
            attrs.append(f'label="{label}"')
        lines.append(f'  "{a}" -> "{b}" [{", ".join(attrs)}];')
    lines.append("}")
    return "\n".join(lines)


# ---- the section -----------------------------------------------------------------------

INTRO = (
    "Answer three questions: the architecture, how many samples each device sees per "
    "step, and what inference needs. The guide follows the source texts' flowchart and "
    "says why, and what to watch."
)
KNOBS = (
    Knob("arch", "transformer", choices=tuple(ARCHITECTURES), label="Architecture"),
    Knob(
        "per_device", 32, lo=1, hi=MAX_BATCH, label="Samples per device per step", widget="number"
    ),
    Knob("constraints", (), choices=tuple(CONSTRAINTS), multi=True, label="Constraints"),
)
HELP = {
    "per_device": "With gradient accumulation or several GPUs, count the micro-batch one "
    "device normalizes over, not the global batch.",
}


def run(setup: object, knobs: Mapping[str, Value], progress: Progress) -> Recommendation:
    """The recommendation for the knobs' situation."""
    constraints = knobs["constraints"]
    assert isinstance(constraints, tuple)
    return recommend(
        Situation(str(knobs["arch"]), int(knobs["per_device"]), frozenset(constraints))
    )


def notes(rec: Recommendation) -> Sequence[str]:
    """Why, and what to watch."""
    return (
        "**Why**\n" + "\n".join(f"- {r}" for r in rec.reasons),
        "**Watch out for**\n" + "\n".join(f"- {p}" for p in rec.pitfalls),
    )


def extras(rec: Recommendation) -> Sequence[Extra]:
    """The answer first; after the reasons, the alternative and the flowchart."""
    out = [Extra("callout", f"**Use {rec.label}**: {METHODS[rec.method].summary}.", top=True)]
    if rec.alternative:
        out.append(
            Extra("caption", f"Also worth a look: {rec.alt_label}, {rec.alternative_reason}")
        )
    if "transformer" in rec.path:
        out.append(Extra("caption", dyt_note()))
    out.append(Extra("graphviz", flowchart_dot(rec)))
    return out


# ImageNet-1K top-1 (%), LayerNorm → DyT, as the DyT authors report them (their README's table)
DYT_IMAGENET: tuple[tuple[str, float, float], ...] = (
    ("ViT-B", 82.3, 82.5),
    ("ViT-L", 83.1, 83.6),
    ("ConvNeXt-B", 83.7, 83.7),
)


def dyt_note() -> str:
    """DyT, the norm-free option for transformers: the authors' claim and its caveat."""
    runs = ", ".join(f"{name} {ln:.1f} → {dyt:.1f}" for name, ln, dyt in DYT_IMAGENET)
    gains = [dyt - ln for _, ln, dyt in DYT_IMAGENET]
    verdict = "matches or beats" if min(gains) >= 0 else "trails in places"
    return (
        f"Or no statistics at all: {METHODS['dyt'].label} ({cite('zhu2025')}) replaces each "
        f"norm with γ·tanh(α·x) + β. The authors report ImageNet-1K top-1 with LayerNorm → "
        f"DyT of {runs} (%): it {verdict} LayerNorm there, by at most "
        f"{max(gains):.1f} points. Later work finds the effect regime-dependent "
        f"({cite('verma2026')}: on GPT-2-style models it lowered validation loss with very "
        "little training data and raised it with more), so measure it on your own setting."
    )


GUIDE = Section(
    slug="guide",
    label="Decision guide",
    intro=INTRO,
    run=run,
    knobs=KNOBS,
    notes=notes,
    extras=extras,
)
