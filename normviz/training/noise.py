"""Regularizing noise: BatchNorm's batch statistics add noise to training, and smaller
statistics batches add more; does that shrink the gap between training and validation?

Every run takes SGD steps on batches of 64 for long enough to fit the training set.
BatchNorm's statistics come from the whole batch or from chunks ("ghost batches",
Hoffer et al. 2017) of 4, 8 or 16: the smaller the chunk, the noisier each sample's
normalization. The gap is training minus validation accuracy, both in evaluation mode.
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
from normviz.training.models import Net
from normviz.training.train import Grid, train
from normviz.training.wide import Variant

NET = Net("mlp", width=64, depth=2)
BATCH = 64
LR = 0.1
GHOSTS: tuple[int, ...] = (4, 8, 16)  # BatchNorm's statistics batches below the full one
CLAIM = (
    "*Ioffe & Szegedy (2015): BatchNorm acts as a regularizer (its batch statistics make each "
    "sample's output depend on the others).*"
)
CLAIM_GHOST = (
    "*Hoffer et al. (2017): statistics from smaller (ghost) batches add more noise and "
    "regularize more.*"
)

INTRO = (
    f"Every run takes SGD steps on batches of {BATCH} until it fits the training set. The bars "
    "show the *gap*: training accuracy minus validation accuracy (both with running "
    "statistics), for the network without normalization and for BatchNorm with statistics "
    f"from the whole batch or from ghost batches of {', '.join(map(str, GHOSTS))}. A "
    "regularizer shrinks the gap."
)

KNOBS = (Knob("no_epochs", 8, choices=(2, 4, 8, 12), label="Epochs"), SEEDS)


@dataclass(frozen=True)
class NoiseResult:
    names: tuple[str, ...]  # "no norm", "BatchNorm (stats of 64)", ...
    colours: tuple[str, ...]
    ghosts: tuple[int, ...]  # per variant: the statistics batch (0: no norm)
    train_acc: np.ndarray  # (variants, seeds)
    val_acc: np.ndarray
    pools: str

    @property
    def gap(self) -> np.ndarray:
        return self.train_acc - self.val_acc


def run(setup: Setup, knobs: Mapping[str, Value], progress: Progress) -> NoiseResult:
    seeds = setup.seeds(knobs["runs"])
    kinds = [("none", 0), ("batch", 0), *(("batch", g) for g in sorted(GHOSTS, reverse=True))]
    variants = tuple(Variant(n, LR, s, g) for n, g in kinds for s in seeds)
    out = train(
        Grid(NET, variants, batch=BATCH, samples=setup.samples(knobs["no_epochs"])), progress
    )[0]
    shape = (len(kinds), len(seeds))
    return NoiseResult(
        tuple(common.label(n) if n == "none" else common.label(n, g or BATCH) for n, g in kinds),
        tuple(common.colour(n) for n, _ in kinds),
        tuple(0 if n == "none" else g or BATCH for n, g in kinds),
        out.train_acc.reshape(shape),
        out.val_acc.reshape(shape),
        common.pools(("batch",), NET),
    )


def figure(res: NoiseResult, presenter: bool) -> go.Figure:
    m, s = common.mean_sd(100 * res.gap)
    fig = Spec().add_trace(
        trace(
            "bar",
            x=list(res.names),
            y=m.tolist(),
            error_y={"type": "data", "array": s.tolist()},
            marker={"color": list(res.colours)},
            text=[f"{v:.1f}" for v in m],
            textposition="outside",
        )
    )
    fig.update_yaxes(title="train − validation accuracy (points)", rangemode="tozero")
    return common.finish(
        fig, "The generalization gap, with and without BatchNorm's noise", presenter
    )


def table(res: NoiseResult) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "run": list(res.names),
            "train accuracy (%)": 100 * res.train_acc.mean(-1),
            "validation accuracy (%)": 100 * res.val_acc.mean(-1),
            "gap (points)": 100 * res.gap.mean(-1),
            "gap ± sd": common.mean_sd(100 * res.gap)[1],
        }
    )


def notes(res: NoiseResult) -> Sequence[str]:
    gap = 100 * res.gap.mean(-1)
    none, full = gap[0], gap[1]
    sizes = np.array(res.ghosts[1:], dtype=float)
    # smaller statistics batch, smaller gap: the gap rises with the batch (rank correlation)
    rho = float(np.corrcoef(np.argsort(np.argsort(sizes)), np.argsort(np.argsort(gap[1:])))[0, 1])
    why = f"BatchNorm's gap is {full:.1f} points against {none:.1f} without normalization"
    if res.train_acc[0].mean() < 0.99:
        why += " (which has not yet fit its training set)"
    trend = "shrinks" if rho > 0 else "does not shrink"
    by_size = ", ".join(f"{g:.1f} at {b}" for g, b in zip(gap[1:], res.ghosts[1:], strict=True))
    ghost_why = f"the gap {trend} with the statistics batch ({by_size}; points at batch)"
    return [
        f"Where the statistics come from: {res.pools}.",
        common.verdict(bool(full < none), CLAIM, why),
        common.verdict(rho > 0, CLAIM_GHOST, ghost_why),
    ]


SECTION = Section("noise", "Regularizing noise", INTRO, run, KNOBS, figure, table, notes)
