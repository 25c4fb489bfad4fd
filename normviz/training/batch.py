"""Batch size (Wu & He 2018, Figure 1): BatchNorm's error grows as its statistics' batch
shrinks; GroupNorm's does not.

In the paper each GPU normalizes over its own b images while the gradient averages
over all GPUs. Here the same: every run takes SGD steps on batches of 32 (equal
samples seen, equal steps), and BatchNorm computes its statistics over chunks of b
of them ("ghost batches", as on a GPU holding b images). GroupNorm and LayerNorm
pool within each sample, so their runs are the same for every b: each is trained
once and drawn flat.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from normviz.figures.spec import Spec
from normviz.knobs import Knob, Value
from normviz.sections import Progress, Section
from normviz.training import common
from normviz.training.common import SEEDS, Setup
from normviz.training.models import NORM_LABELS, Net
from normviz.training.train import Grid, train
from normviz.training.wide import Variant

NET = Net("mlp", width=64, depth=2, groups=4)
SIZES: tuple[int, ...] = (2, 4, 8, 16, 32)  # images BatchNorm's statistics see
BATCH = 32  # images per SGD step, for every run
LR = 0.1
NORMS: tuple[str, ...] = ("batch", "group", "layer")
# Wu & He (2018), Table 2 (drawn in their Figure 1): ResNet-50 ImageNet validation error (%)
# by images per GPU.
PAPER_BN: dict[int, float] = {32: 23.6, 16: 23.7, 8: 24.8, 4: 27.3, 2: 34.7}
PAPER_GN: dict[int, float] = {32: 24.1, 16: 24.2, 8: 24.0, 4: 24.2, 2: 24.1}
CLAIM = (
    "*Wu & He (2018): BatchNorm's error rises sharply as the batch its statistics see "
    f"shrinks ({PAPER_BN[32]} % at 32 images per GPU, {PAPER_BN[2]} % at 2); GroupNorm's "
    f"stays between {min(PAPER_GN.values())} and {max(PAPER_GN.values())} %.*"
)

INTRO = (
    f"Every run takes SGD steps on batches of {BATCH} digits (learning rate {LR:g}, the same "
    "samples and steps for every run); BatchNorm computes its statistics over chunks of b "
    "of them, as a GPU holding b images does in the paper, while the gradient averages "
    "over the whole batch. GroupNorm and LayerNorm pool within each sample, so b never "
    "reaches them. Left: the paper's ImageNet numbers, the shape to compare; right: ours."
)

KNOBS = (Knob("bs_epochs", 3, choices=(1, 2, 3, 4, 6), label="Epochs"), SEEDS)


@dataclass(frozen=True)
class BatchResult:
    sizes: tuple[int, ...]
    err: np.ndarray  # (norms, sizes, seeds) validation error (fraction), eval mode
    pools: str


def run(setup: Setup, knobs: Mapping[str, Value], progress: Progress) -> BatchResult:
    seeds = setup.seeds(knobs["runs"])
    variants = [Variant("batch", LR, s, b if b < BATCH else 0) for b in SIZES for s in seeds]
    variants += [Variant(n, LR, s) for n in NORMS[1:] for s in seeds]
    grid = Grid(NET, tuple(variants), batch=BATCH, samples=setup.samples(knobs["bs_epochs"]))
    err = 1.0 - train(grid, progress)[0].val_acc
    k, n = len(SIZES), len(seeds)
    bn = err[: k * n].reshape(k, n)
    flat = err[k * n :].reshape(len(NORMS) - 1, 1, n).repeat(k, axis=1)
    return BatchResult(SIZES, np.concatenate([bn[None], flat]), common.pools(NORMS, NET))


def figure(res: BatchResult, presenter: bool) -> go.Figure:
    fig = Spec.grid(
        1,
        2,
        ("Wu & He 2018: ImageNet, ResNet-50", "here: digits, MLP"),
        horizontal_spacing=0.12,
    )
    xs = list(res.sizes)
    paper = np.array([[PAPER_BN[b]] for b in xs])
    common.add_line(fig, xs, paper, "BatchNorm", common.colour("batch"), row=1, col=1)
    gn_paper = np.array([[PAPER_GN[b]] for b in xs])
    common.add_line(fig, xs, gn_paper, "GroupNorm", common.colour("group"), "dash", 1, 1)
    for i, n in enumerate(NORMS):
        common.add_line(
            fig, xs, 100 * res.err[i], common.label(n), common.colour(n), row=1, col=2, legend=i > 1
        )  # BatchNorm and GroupNorm are in the legend already (same colours, left)
    fig.update_xaxes(
        type="log", tickvals=xs, ticktext=[str(b) for b in xs], title="images per statistic batch"
    )
    fig.update_yaxes(title="validation error (%)", row=1, col=1)
    return common.finish(fig, "Validation error by the batch BatchNorm's statistics see", presenter)


def table(res: BatchResult) -> pd.DataFrame:
    rows = {
        "Wu & He BatchNorm (%)": [PAPER_BN[b] for b in res.sizes],
        "Wu & He GroupNorm (%)": [PAPER_GN[b] for b in res.sizes],
    }
    for i, n in enumerate(NORMS):
        m, s = common.mean_sd(100 * res.err[i])
        rows[f"{NORM_LABELS[n]} (%)"] = m.tolist()
        rows[f"{NORM_LABELS[n]} ± sd"] = s.tolist()
    return pd.DataFrame(rows, index=pd.Index(res.sizes, name="batch b"))


def notes(res: BatchResult) -> Sequence[str]:
    bn = res.err[0].mean(-1)
    gn = res.err[1].mean(-1)
    small, big = 0, len(res.sizes) - 1
    holds = bn[small] > gn[small] and bn[small] > bn[big]
    if holds:
        why = (
            f"at b = {res.sizes[small]} BatchNorm's error is {common.pct(bn[small])} against "
            f"{common.pct(bn[big])} at b = {res.sizes[big]}, and above GroupNorm's "
            f"{common.pct(gn[small])}"
        )
    elif bn[small] <= gn[small]:
        why = (
            f"at b = {res.sizes[small]} BatchNorm's error ({common.pct(bn[small])}) is not above "
            f"GroupNorm's ({common.pct(gn[small])})"
        )
    else:
        why = (
            f"BatchNorm's error at b = {res.sizes[small]} ({common.pct(bn[small])}) is not "
            "above its "
            f"error at b = {res.sizes[big]} ({common.pct(bn[big])})"
        )
    return [
        f"Where the statistics come from: {res.pools}.",
        common.verdict(bool(holds), CLAIM, why),
    ]


SECTION = Section("batch", "Batch size", INTRO, run, KNOBS, figure, table, notes)
