"""Pre-norm vs post-norm (/residual): deep residual stacks at initialization and in training.

A stack of L residual blocks, each `x + F(Norm(x))` (pre-norm), `Norm(x + F(x))`
(post-norm), `x + Norm(F(Norm(x)))` (Peri-LN), `Norm(α·x + F(x))` (DeepNorm) or
`x + F(x)` (no normalization). The page's sections, in order:

- `placement`: the four update rules, two a row (module `placement`);
- `init`: at initialization, over a few seeds, the activation scale after every
  block and the gradient reaching every block's input, through the whole network
  and through the identity (skip) paths alone (module `depth`);
- `warmup`: at initialization, the gradient norm of every block's parameters for stacks
  of 6, 12 and 24 blocks: large near the output in post-norm whatever the depth,
  shrinking with depth in pre-norm (why post-norm needs warm-up; module `warmup`);
- `training`: a short full-batch Adam run showing which placements diverge as depth
  or learning rate grows (module `training`);
- `pretrained`: the stream entering every norm of two real checkpoints, pre-norm
  SmolLM2 beside post-norm MiniLM (module `pretrained_depth`).

Pure torch, seeded, CPU. `model` holds the stack and the task all sections share.
"""

from __future__ import annotations

from normviz.knobs import merge
from normviz.residual import depth, placement, pretrained_depth, training, warmup
from normviz.residual.depth import MAX_SEEDS, InitProfile, init_profile, stack_statistics
from normviz.residual.model import (
    BLOCKS,
    MAX_DEPTH,
    MAX_WIDTH,
    NORMS,
    OUT_DIM,
    PLACEMENT_LABELS,
    PLACEMENT_TABLE,
    PLACEMENTS,
    FeatureMLP,
    Placement,
    ResidualConfigError,
    ResidualStack,
    Setup,
    StackConfig,
    Sublayer,
    TokenMLP,
    build_stack,
    choice_label,
    deepnorm_alpha,
    deepnorm_beta,
    make_task,
    task_loss,
)
from normviz.residual.placement import DEEPNORM_FORMULA, PERI_FORMULA, POST_FORMULA, PRE_FORMULA
from normviz.residual.training import (
    DIVERGE_FACTOR,
    MAX_STEPS,
    STALL_FRACTION,
    TrainRun,
    train_all,
    train_stack,
)
from normviz.residual.warmup import OutputGradients, block_gradients, output_gradients
from normviz.sections import Section

SECTIONS: tuple[Section, ...] = (
    placement.SECTION,
    depth.SECTION,
    warmup.SECTION,
    training.SECTION,
    pretrained_depth.SECTION,
)
KNOBS = merge(*(s.knobs for s in SECTIONS))  # the page's URL parameters


def example_setup() -> Setup:
    """A small batch: every section runs in seconds, even at its knobs' maxima."""
    return Setup(samples=2, tokens=2)


__all__ = [
    "BLOCKS",
    "DEEPNORM_FORMULA",
    "DIVERGE_FACTOR",
    "KNOBS",
    "MAX_DEPTH",
    "MAX_SEEDS",
    "MAX_STEPS",
    "MAX_WIDTH",
    "NORMS",
    "OUT_DIM",
    "PERI_FORMULA",
    "PLACEMENTS",
    "PLACEMENT_LABELS",
    "PLACEMENT_TABLE",
    "POST_FORMULA",
    "PRE_FORMULA",
    "SECTIONS",
    "STALL_FRACTION",
    "FeatureMLP",
    "InitProfile",
    "OutputGradients",
    "Placement",
    "ResidualConfigError",
    "ResidualStack",
    "Setup",
    "StackConfig",
    "Sublayer",
    "TokenMLP",
    "TrainRun",
    "block_gradients",
    "build_stack",
    "choice_label",
    "deepnorm_alpha",
    "deepnorm_beta",
    "example_setup",
    "init_profile",
    "make_task",
    "output_gradients",
    "stack_statistics",
    "task_loss",
    "train_all",
    "train_stack",
]
