"""LayerNorm at tiny batches (Ba et al. 2016): its statistics come from one sample, so its
accuracy should barely move between batch 4 and batch 128, where BatchNorm's does.

Both networks (three hidden layers of 64) train with Adam at each batch size on the
same number of samples (a batch of 4 takes 32× the steps of a batch of 128), and are
scored in evaluation mode; BatchNorm is also scored in training mode, with the
statistics of each validation batch of the training size.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd
import plotly.graph_objects as go

from normviz.figures.spec import Spec
from normviz.knobs import Knob, Value
from normviz.sections import Progress, Section
from normviz.training import common
from normviz.training.common import SEEDS, Setup
from normviz.training.models import NORM_LABELS, Net
from normviz.training.variants import BatchSizeRuns, train_at_batch_sizes

NET = Net("mlp", width=64, depth=3)
NORMS: tuple[str, ...] = ("batch", "layer")
LARGE = 128
LR = 0.01  # Adam
CLAIM = (
    "*Ba et al. (2016): LayerNorm does not depend on the batch, so it works at tiny batches "
    "where BatchNorm suffers.*"
)

INTRO = (
    f"BatchNorm and LayerNorm trained with Adam (learning rate {LR:g}) at a tiny batch and at "
    f"{LARGE}, each run seeing the same number of samples. Solid: evaluation mode (BatchNorm "
    "with its running statistics); dashed: BatchNorm in training mode, normalizing each "
    "validation batch of the training size by its own statistics."
)

KNOBS = (
    Knob("tiny_batch", 4, choices=(2, 4, 8), label="Tiny batch"),
    Knob("tiny_epochs", 2, choices=(1, 2, 3), label="Epochs"),
    SEEDS,
)


@dataclass(frozen=True)
class TinyResult:
    runs: BatchSizeRuns
    pools: str

    def change(self, i: int) -> float:
        """How far norm i's mean evaluation accuracy moves from the tiny to the large batch."""
        m = self.runs.eval_acc[i].mean(-1)
        return float(abs(m[-1] - m[0]))


def run(setup: Setup, knobs: Mapping[str, Value], progress: Progress) -> TinyResult:
    sizes = (int(knobs["tiny_batch"]), LARGE)  # type: ignore[call-overload]
    samples = setup.samples(knobs["tiny_epochs"])
    runs = train_at_batch_sizes(
        NET, NORMS, sizes, setup.seeds(knobs["runs"]), samples, LR, "adam", progress
    )
    return TinyResult(runs, common.pools(NORMS, NET))


def figure(res: TinyResult, presenter: bool) -> go.Figure:
    fig = Spec()
    r = res.runs
    for i, n in enumerate(r.norms):
        common.add_line(
            fig,
            r.batch_sizes,
            100 * r.eval_acc[i],
            common.label(n),
            common.colour(n),
            symbol_=common.symbol(n),
        )
    bn = r.norms.index("batch")
    common.add_line(
        fig,
        r.batch_sizes,
        100 * r.train_acc[bn],
        "BatchNorm, training mode",
        common.colour("batch"),
        "dash",
        symbol_=common.symbol("batch"),
    )
    common.batch_axes(fig, r.batch_sizes)
    return common.finish(fig, "Tiny batch against a batch of 128", presenter)


def table(res: TinyResult) -> pd.DataFrame:
    r = res.runs
    rows = []
    for i, n in enumerate(r.norms):
        for j, b in enumerate(r.batch_sizes):
            m, s = common.mean_sd(100 * r.eval_acc[i, j])
            rows.append(
                {
                    "normalization": NORM_LABELS[n],
                    "batch": b,
                    "accuracy (%)": float(m),
                    "± sd": float(s),
                    "training mode (%)": float(100 * r.train_acc[i, j].mean()),
                }
            )
    return pd.DataFrame(rows)


def notes(res: TinyResult) -> Sequence[str]:
    r = res.runs
    bn, ln = r.norms.index("batch"), r.norms.index("layer")
    d_bn, d_ln = res.change(bn), res.change(ln)
    small, big = r.batch_sizes
    why = (
        f"between batch {small} and {big} LayerNorm's accuracy moves by {100 * d_ln:.1f} points, "
        f"BatchNorm's by {100 * d_bn:.1f} (in training mode BatchNorm scores "
        f"{common.pct(r.train_acc[bn, 0].mean())} at batch {small})"
    )
    return [
        f"Where the statistics come from: {res.pools}.",
        common.verdict(d_ln < d_bn, CLAIM, why),
    ]


SECTION = Section("tiny", "LayerNorm at tiny batches", INTRO, run, KNOBS, figure, table, notes)
