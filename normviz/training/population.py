"""Population statistics (Wu & Johnson 2021): BatchNorm evaluates with statistics of the
training data; how they are estimated matters, and on shifted data they are stale.

Left: along training, the validation accuracy with the running (EMA) statistics
against "precise" ones: the plain average of every training batch's statistics under
the current weights (torch.optim.swa_utils.update_bn). Right: a shifted validation
set (lower contrast, brighter, noisy or blurred digits), scored with the training
statistics, then with statistics re-estimated on the shifted images themselves (no
labels needed). Networks without batch statistics have nothing to re-estimate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from normviz.figures.spec import Spec, trace
from normviz.knobs import Knob, Value
from normviz.sections import Progress, Section
from normviz.training import common
from normviz.training.common import SEEDS, Setup
from normviz.training.data import SHIFTS, digits, shifted
from normviz.training.models import NORM_LABELS, Net
from normviz.training.probes import precise_accuracy
from normviz.training.train import Grid, evaluate, train
from normviz.training.wide import Variant

NET = Net("mlp", width=64, depth=2)
NORMS: tuple[str, ...] = ("none", "batch", "layer")
BATCH = 32
LR = 0.2
CHECKPOINTS = 7
CLAIM_EMA = (
    "*Wu & Johnson (2021): the running (EMA) statistics can misestimate the population; "
    "precise statistics, averaged over many batches under fixed weights, evaluate better.*"
)
CLAIM_SHIFT = (
    "*Statistics re-estimated on shifted data recover accuracy the training statistics lose "
    "(Li et al. 2016, AdaBN; Wu & Johnson 2021, §5).*"
)

INTRO = (
    f"The networks train with SGD at learning rate {LR:g} on batches of {BATCH}. Left: BatchNorm's "
    "validation accuracy along training, evaluated with its running statistics (an exponential "
    "moving average with the chosen momentum) and with precise ones (the average of every "
    "training batch's statistics under the current weights). Right: the final networks on a "
    "shifted validation set, before and after re-estimating BatchNorm's statistics on it."
)

KNOBS = (
    Knob("pop_momentum", 0.1, choices=(0.01, 0.1, 0.5), label="BatchNorm momentum"),
    Knob("pop_shift", "contrast", choices=tuple(SHIFTS), label="Shift"),
    Knob("pop_strength", 0.5, choices=(0.25, 0.5, 0.75, 1.0), label="Shift strength"),
    SEEDS,
)


@dataclass(frozen=True)
class PopulationResult:
    steps: tuple[int, ...]
    ema: np.ndarray  # (checkpoints, seeds) BatchNorm's validation accuracy, running stats
    precise: np.ndarray  # (checkpoints, seeds) with precise statistics
    clean: np.ndarray  # (norms, seeds) final accuracy on the clean validation set
    shifted: np.ndarray  # (norms, seeds) on the shifted set, training statistics
    adapted: np.ndarray  # (norms, seeds) on the shifted set, statistics re-estimated on it
    momentum: float
    shift: str
    strength: float
    pools: str


def run(setup: Setup, knobs: Mapping[str, Value], progress: Progress) -> PopulationResult:
    data = digits()
    seeds = setup.seeds(knobs["runs"])
    momentum = float(knobs["pop_momentum"])  # type: ignore[arg-type]
    kind, strength = str(knobs["pop_shift"]), float(knobs["pop_strength"])  # type: ignore[arg-type]
    variants = tuple(Variant(n, LR, s) for n in NORMS for s in seeds)
    grid = Grid(NET, variants, BATCH, setup.samples(2), momentum, evals=CHECKPOINTS)
    precise = []

    def hook(wide, step, x, y) -> None:
        precise.append(precise_accuracy(wide, data.x_train, data.x_val, data.y_val, BATCH))

    out, wide, pos = train(grid, progress, hook=hook)
    back = np.argsort(pos)
    x_shift = shifted(data.x_val, kind, strength, seeds[0])
    shape = (len(NORMS), len(seeds))
    before = evaluate(wide, x_shift, data.y_val)[0][back].reshape(shape)
    after = precise_accuracy(wide, x_shift, x_shift, data.y_val, BATCH)[back].reshape(shape)
    bn = NORMS.index("batch")
    curve = lambda a: np.asarray(a)[:, back].reshape(-1, *shape)[:, bn]  # noqa: E731
    return PopulationResult(
        out.curve_steps,
        curve(out.curve_acc),
        curve(precise),
        out.val_acc.reshape(shape),
        before,
        after,
        momentum,
        kind,
        strength,
        common.pools(NORMS, NET),
    )


def figure(res: PopulationResult, presenter: bool) -> go.Figure:
    fig = Spec.grid(
        1, 2, ("BatchNorm along training", f"shifted digits: {res.shift} {res.strength:g}")
    )
    common.add_line(
        fig,
        res.steps,
        100 * res.ema,
        f"running stats (momentum {res.momentum:g})",
        common.colour("batch"),
        "dash",
        1,
        1,
    )
    common.add_line(
        fig, res.steps, 100 * res.precise, "precise stats", common.colour("batch"), row=1, col=1
    )
    names = [NORM_LABELS[n] for n in NORMS]
    for what, arr, op in (
        ("clean", res.clean, 0.35),
        ("shifted", res.shifted, 0.65),
        ("shifted, re-estimated", res.adapted, 1.0),
    ):
        m, s = common.mean_sd(100 * arr)
        fig.add_trace(
            trace(
                "bar",
                x=names,
                y=m.tolist(),
                error_y={"type": "data", "array": s.tolist()},
                name=what,
                opacity=op,
                marker={"color": [common.colour(n) for n in NORMS]},
                showlegend=False,
                text=[what] * len(names),
                textposition="inside",
                textangle=-90,
            ),
            row=1,
            col=2,
        )
    fig.update_layout(barmode="group")
    fig.update_xaxes(title="training step", row=1, col=1)
    fig.update_yaxes(title="validation accuracy (%)", row=1, col=1)
    fig.update_yaxes(range=[0, 100], row=1, col=2)
    return common.finish(fig, "Which statistics BatchNorm evaluates with", presenter)


def table(res: PopulationResult) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "normalization": [NORM_LABELS[n] for n in NORMS],
            "clean (%)": 100 * res.clean.mean(-1),
            "shifted (%)": 100 * res.shifted.mean(-1),
            "shifted, re-estimated (%)": 100 * res.adapted.mean(-1),
        }
    )


def notes(res: PopulationResult) -> Sequence[str]:
    gain = (res.precise - res.ema).mean(-1)  # per checkpoint
    late = gain[len(gain) // 2 :]
    best = int(np.argmax(np.abs(gain)))
    ema_why = (
        f"over the second half of training precise statistics change BatchNorm's validation "
        f"accuracy by {100 * late.mean():+.1f} points on average (largest change "
        f"{100 * gain[best]:+.1f} points, at step {res.steps[best]}) with momentum {res.momentum:g}"
    )
    bn = NORMS.index("batch")
    clean, before, after = (a[bn].mean() for a in (res.clean, res.shifted, res.adapted))
    lost = clean - before
    holds = lost > 0 and after > before
    shift_why = (
        f"on the {res.shift} shift BatchNorm drops from {common.pct(clean)} to "
        f"{common.pct(before)} and "
        f"re-estimating its statistics on the shifted images brings it to {common.pct(after)}"
    )
    if lost > 0:
        shift_why += f" ({100 * (after - before) / lost:.0f} % of the loss recovered)"
    return [
        f"Where the statistics come from: {res.pools}.",
        common.verdict(bool(late.mean() > 0), CLAIM_EMA, ema_why),
        common.verdict(bool(holds), CLAIM_SHIFT, shift_why),
    ]


SECTION = Section("population", "Population statistics", INTRO, run, KNOBS, figure, table, notes)
