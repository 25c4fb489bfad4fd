"""Smoothness (Santurkar et al. 2018): along the gradient, BatchNorm's loss changes more
predictably.

At checkpoints along training, each network steps from its current weights along
its own gradient, by η = ½, 1, 2 and 4 times its learning rate, on the batch of that
step. Two numbers per checkpoint: the range of the loss values met ("loss
landscape") and the largest change of the gradient, ‖∇L(w − η∇L) − ∇L(w)‖
("gradient predictiveness"; small: the gradient stays a good guide). The verdict
averages the second half of training: at the start every network is still at its
random initialization.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch

from normviz import style
from normviz.figures.spec import Spec
from normviz.knobs import Knob, Value
from normviz.sections import Progress, Section
from normviz.sources import cite
from normviz.training import common
from normviz.training.common import SEEDS, Setup
from normviz.training.models import NORM_LABELS, Net
from normviz.training.probes import landscape
from normviz.training.train import Grid, train
from normviz.training.wide import Variant, Wide

NET = Net("mlp", width=64, depth=3)
NORMS: tuple[str, ...] = ("none", "batch")
STEPS_ETA: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0)  # step sizes, in learning rates
CHECKPOINTS = 9
CLAIM = (
    "*Santurkar et al. (2018): BatchNorm makes the loss landscape smoother: along the "
    "gradient the loss varies less and the gradient stays more predictive.*"
)

INTRO = (
    f"Why does normalization help? {cite('ioffe2015')} argued that it removes **internal "
    "covariate shift**: each layer's inputs drifting in scale and centre while the layers "
    f"before it learn. {cite('santurkar2018')} put that to the test: BatchNorm kept its "
    "benefit even when they injected noise after it that brought the drift back, and its "
    "layers did not reliably shrink the drift. Their account is a smoother loss landscape: "
    "the loss and its gradient change less along a step, so larger steps are safe. "
    "This experiment measures that smoothness on real digits.\n\n"
    "Both networks (three hidden layers of 64, with and without BatchNorm) train with SGD at "
    "the same learning rate. At each checkpoint every network steps along its own gradient "
    "by ½, 1, 2 and 4 learning rates; left: the range of the loss values it meets, right: how "
    "far the gradient moves (‖∇L(w − η∇L) − ∇L(w)‖). Lower is smoother. BatchNorm uses the "
    "statistics of the probed batch and its running statistics stay untouched."
)

KNOBS = (
    Knob("sm_lr", 0.1, choices=(0.05, 0.1, 0.2), label="Learning rate"),
    Knob("sm_epochs", 2, choices=(1, 2, 3, 4), label="Epochs"),
    SEEDS,
)


@dataclass(frozen=True)
class SmoothResult:
    steps: tuple[int, ...]
    loss_range: np.ndarray  # (norms, checkpoints, seeds)
    grad_change: np.ndarray
    lr: float
    pools: str

    def late(self, a: np.ndarray) -> np.ndarray:
        """(norms,) mean over the second half of training and over seeds."""
        half = [i for i, t in enumerate(self.steps) if t >= self.steps[-1] / 2]
        return a[:, half].mean(axis=(1, 2))


def run(setup: Setup, knobs: Mapping[str, Value], progress: Progress) -> SmoothResult:
    lr = float(knobs["sm_lr"])  # type: ignore[arg-type]
    seeds = setup.seeds(knobs["runs"])
    variants = tuple(Variant(n, lr, s) for n in NORMS for s in seeds)
    grid = Grid(
        NET, variants, batch=32, samples=setup.samples(knobs["sm_epochs"]), evals=CHECKPOINTS
    )
    ranges, changes = [], []

    def probe(wide: Wide, step: int, x: torch.Tensor, y: torch.Tensor) -> None:
        lrs = torch.tensor([v.lr for v in wide.variants])
        losses, grads = landscape(wide, x, y, torch.tensor(STEPS_ETA).unsqueeze(1) * lrs)
        ranges.append(losses.max(0) - losses.min(0))
        changes.append(grads.max(0))

    out, _, pos = train(grid, progress, hook=probe)
    back = np.argsort(pos)
    shape = (len(out.curve_steps), len(NORMS), len(seeds))
    as_grid = lambda a: np.array(a)[:, back].reshape(shape).transpose(1, 0, 2)  # noqa: E731
    return SmoothResult(
        out.curve_steps, as_grid(ranges), as_grid(changes), lr, common.pools(NORMS, NET)
    )


def figure(res: SmoothResult, presenter: bool) -> go.Figure:
    fig = Spec.grid(1, 2, ("loss range along the gradient", "gradient change"))
    for i, n in enumerate(NORMS):
        common.add_line(
            fig,
            res.steps,
            res.loss_range[i],
            common.label(n),
            common.colour(n),
            row=1,
            col=1,
            symbol_=common.symbol(n),
        )
        common.add_line(
            fig,
            res.steps,
            res.grad_change[i],
            common.label(n),
            common.colour(n),
            row=1,
            col=2,
            legend=False,
            symbol_=common.symbol(n),
        )
    fig.update_xaxes(title="training step")
    fig.update_yaxes(style.log_axis(res.loss_range), row=1, col=1)
    fig.update_yaxes(style.log_axis(res.grad_change), row=1, col=2)
    return common.finish(fig, f"Along the gradient, learning rate {res.lr:g}", presenter)


def table(res: SmoothResult) -> pd.DataFrame:
    lr_, gc = res.late(res.loss_range), res.late(res.grad_change)
    return pd.DataFrame(
        {
            "normalization": [NORM_LABELS[n] for n in NORMS],
            "loss range, 2nd half": lr_,
            "gradient change, 2nd half": gc,
        }
    )


def notes(res: SmoothResult) -> Sequence[str]:
    (r0, r1), (g0, g1) = res.late(res.loss_range), res.late(res.grad_change)
    holds = r1 < r0
    why = (
        f"over the second half of training the loss along the gradient spans {r1:.3g} with "
        f"BatchNorm and {r0:.3g} without ({r0 / max(r1, 1e-12):.1f}×); the gradient moves by "
        f"{g1:.3g} against {g0:.3g}"
    )
    return [
        f"Where the statistics come from: {res.pools}.",
        common.verdict(bool(holds), CLAIM, why),
    ]


SECTION = Section("smooth", "Smoothness", INTRO, run, KNOBS, figure, table, notes)
