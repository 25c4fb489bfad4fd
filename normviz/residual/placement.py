"""Where the norm sits: the placements written out, and why the choice matters."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from normviz import sources
from normviz.knobs import Value
from normviz.residual.depth import KNOBS as INIT_KNOBS
from normviz.residual.model import (
    BLOCK_NOUNS,
    DEEPNORM_VARIANT,
    PLACEMENT_LABELS,
    Setup,
    deepnorm_alpha,
    deepnorm_beta,
    deepnorm_layers,
)
from normviz.sections import Progress, Section

INTRO = (
    "A residual block adds a learned correction F to its input: the **skip path** "
    "carries x unchanged, the **branch** computes F(x). The norm can go at the start of "
    "the branch (**pre-norm**, GPT-2 and most large models), after the sum "
    "(**post-norm**, the original transformer), around the branch on both sides "
    f"(**Peri-LN**, the sandwich of Gemma 2 and 3, analysed by {sources.cite('kim2025')}), "
    "or after a sum whose skip path is up-weighted (**DeepNorm**, "
    f"{sources.cite('wang2022')})."
)
PRE_FORMULA = r"x_{l+1} = x_l + F_l\big(\mathrm{Norm}(x_l)\big)"
POST_FORMULA = r"x_{l+1} = \mathrm{Norm}\big(x_l + F_l(x_l)\big)"
PERI_FORMULA = (
    r"x_{l+1} = x_l + \mathrm{Norm}_{\mathrm{out}}\big(F_l(\mathrm{Norm}_{\mathrm{in}}(x_l))\big)"
)
DEEPNORM_FORMULA = r"x_{l+1} = \mathrm{Norm}\big(\alpha\,x_l + F_l(x_l)\big)"
WHY_TITLE = "Why does the placement matter?"
WHY = (
    "Two questions are easy to mix up here.\n\n"
    "**How do gradients travel toward the input?** Backpropagation multiplies the gradient "
    "by each layer's Jacobian on the way down. In pre-norm the skip path is a plain sum, "
    "so its Jacobian is the identity: the skip path alone delivers the output's gradient "
    "to every block intact, however deep the stack. In post-norm the sum is normalized, "
    "and a norm's Jacobian divides by the standard deviation of its input (larger than 1 "
    "once F adds to x), so along the skip path alone the gradient shrinks a little at "
    "every block. The branches carry gradient too, so the full gradient can end up "
    "smaller or larger (*At initialization* measures both).\n\n"
    "**Why do deep post-norm transformers need learning-rate warm-up?** "
    f"{sources.cite('xiong2020')} find the answer elsewhere, near the *output*: at "
    "initialization their gradients are large in post-norm and do not shrink with depth, "
    "while in pre-norm they shrink as the stack gets deeper (*Why post-norm needs "
    "warm-up* measures it). Large gradients there mean large first updates at a large "
    "learning rate; warm-up keeps the first steps small. Pre-norm trains with less fuss, "
    "at the price of a stream whose scale grows with depth."
)


INIT_DEPTH = int(next(k.default for k in INIT_KNOBS if k.name == "depth"))  # type: ignore[call-overload]


def deepnorm_words(depth: int, block: str) -> str:
    """ "at L = 24 MLP blocks: N = 12, α = 2.21, β = 0.319"."""
    n = deepnorm_layers(depth, block)
    return (
        f"at L = {depth} {BLOCK_NOUNS[block]} blocks: N = {n:g}, α = {deepnorm_alpha(n):.3g}, "
        f"β = {deepnorm_beta(n):.3g}"
    )


@dataclass(frozen=True)
class Card:
    """One placement: its name, its update rule (LaTeX) and what follows from it."""

    title: str
    formula: str
    caption: str


CARDS: tuple[Card, ...] = (
    Card(
        PLACEMENT_LABELS["pre"].capitalize(),
        PRE_FORMULA,
        "The skip path never meets a norm: the stream grows block by block, and a "
        "final norm before the output tames it.",
    ),
    Card(
        PLACEMENT_LABELS["post"].capitalize(),
        POST_FORMULA,
        "Every block renormalizes the stream, so activations stay bounded, but every "
        "path back to the input, the skip path included, passes through L norms.",
    ),
    Card(
        PLACEMENT_LABELS["peri"],
        PERI_FORMULA,
        "Pre-norm plus a second norm on the branch's output: the skip path stays a plain "
        "sum, and every block adds a correction of a size the norm sets. The stream is "
        "still unnormalized, so a final norm comes before the output.",
    ),
    Card(
        PLACEMENT_LABELS["deepnorm"],
        DEEPNORM_FORMULA,
        "Post-norm with the skip path times α = (2N)^(1/4) and the branches' initial weights "
        f"times β = (8N)^(−1/4), the paper's {DEEPNORM_VARIANT} constants; its N counts "
        "layers of two sublayers, so N = L for mixer blocks, L/2 for MLP blocks "
        f"({deepnorm_words(INIT_DEPTH, 'mlp')}).",
    ),
)


@dataclass(frozen=True)
class Placements:
    """The placements the page compares (shown two a row)."""

    cards: tuple[Card, ...]


def run(setup: Setup, knobs: Mapping[str, Value], progress: Progress) -> Placements:
    """The formulas (nothing to compute: the other sections measure what they imply)."""
    return Placements(CARDS)


SECTION = Section("placement", "Where the norm sits", INTRO, run)
