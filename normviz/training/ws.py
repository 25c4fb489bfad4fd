"""Weight Standardization at micro-batches (Qiao et al. 2019): GroupNorm whose convs
standardize their filters, against plain GroupNorm and BatchNorm, at batch 1 and 2.

The lab's CNN (two 3×3 convs) trains with Adam at each batch size on the same number
of samples (a batch of 1 takes 32× the steps of a batch of 32), three ways: GroupNorm,
GroupNorm with Weight Standardization (`normviz.weightstd`: each filter's weights to mean
0, variance 1 before every conv), and BatchNorm. Each run is scored in evaluation mode
(BatchNorm with its running statistics); BatchNorm is also scored in training mode.
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
from normviz.training.lr import NETS
from normviz.training.models import NORM_LABELS
from normviz.training.variants import BatchSizeRuns, train_at_batch_sizes

NET = NETS["cnn"]  # the lab's CNN: 3×3 convs of 4 and 8 channels, GroupNorm G = 2
ARMS: tuple[tuple[str, bool], ...] = (("group", False), ("group", True), ("batch", False))
SIZES: tuple[int, ...] = (1, 2, 32)  # two micro-batches and a reference batch
MICRO = 2  # the first MICRO sizes are the micro-batches the claim is about
LR = 0.01  # Adam
MARGIN = 0.01  # "matches": a mean accuracy at most 1 point below BatchNorm's
CLAIM = (
    "*Qiao et al. (2019): GroupNorm with Weight Standardization, trained on micro-batches "
    "(1–2 images per GPU), matches or beats BatchNorm.*"
)

INTRO = (
    "Weight Standardization (WS) normalizes a conv's *weights*, not its activations: before "
    "every forward pass each output channel's filter (its C_in × 3 × 3 weights) is shifted "
    "and scaled to mean 0 and variance 1, and the gradient flows through that "
    "standardization. It needs no batch, so it pairs with GroupNorm. Here the lab's CNN "
    f"trains with Adam (learning rate {LR:g}) at batches of {SIZES[0]}, {SIZES[1]} and "
    f"{SIZES[-1]}, each run seeing the same number of samples. Solid: evaluation mode "
    "(BatchNorm with its running statistics); dotted: BatchNorm in training mode, each "
    "validation batch of the training size normalized by its own statistics."
)

# half an epoch by default: batch 1 takes 719 steps per seed (4.4 CPU-s for the 9 runs here,
# about twice the tiny-batch experiment); more epochs cost in proportion
KNOBS = (Knob("ws_epochs", 0.5, choices=(0.5, 1.0, 2.0), label="Epochs"), SEEDS)


def arm_label(i: int) -> str:
    norm, ws = ARMS[i]
    return NORM_LABELS[norm] + (" + WS" if ws else "")


@dataclass(frozen=True)
class WSResult:
    runs: BatchSizeRuns  # norms and ws in ARMS order

    def mean(self, i: int) -> np.ndarray:
        """Arm i's evaluation accuracy by batch size, mean over seeds."""
        return self.runs.eval_acc[i].mean(-1)


def run(setup: Setup, knobs: Mapping[str, Value], progress: Progress) -> WSResult:
    norms, ws = zip(*ARMS, strict=True)
    runs = train_at_batch_sizes(
        NET,
        norms,
        SIZES,
        setup.seeds(knobs["runs"]),
        setup.samples(knobs["ws_epochs"]),
        LR,
        "adam",
        progress,
        ws=ws,
    )
    return WSResult(runs)


def figure(res: WSResult, presenter: bool) -> go.Figure:
    fig = Spec()
    r = res.runs
    for i, (norm, ws) in enumerate(ARMS):
        common.add_line(
            fig,
            r.batch_sizes,
            100 * r.eval_acc[i],
            arm_label(i),
            common.colour(norm),
            "dash" if ws else "solid",
            symbol_="star" if ws else common.symbol(norm),
        )
    bn = ARMS.index(("batch", False))
    common.add_line(
        fig,
        r.batch_sizes,
        100 * r.train_acc[bn],
        "BatchNorm, training mode",
        common.colour("batch"),
        "dot",
        symbol_="square-open",
    )
    common.batch_axes(fig, r.batch_sizes)
    return common.finish(fig, "GroupNorm + WS against BatchNorm<br>at micro-batches", presenter)


def table(res: WSResult) -> pd.DataFrame:
    """One row per line of the figure and batch size (narrow: it fits a phone)."""
    r = res.runs
    bn = ARMS.index(("batch", False))
    lines = [(arm_label(i), r.eval_acc[i]) for i in range(len(ARMS))]
    lines.append(("BatchNorm, training mode", r.train_acc[bn]))
    rows = []
    for name, acc in lines:
        m, s = common.mean_sd(100 * acc)
        for j, b in enumerate(r.batch_sizes):
            rows.append(
                {
                    "normalization": name,
                    "batch": b,
                    "steps": r.steps(b),
                    "accuracy (%)": round(float(m[j]), 2),
                    "± sd": round(float(s[j]), 2),
                }
            )
    return pd.DataFrame(rows)


def measured() -> str:
    """What BatchNorm's statistics pool at batch 1 in this CNN, from its layers."""
    sizes = [f"{h * w} after conv {k}" for k, (h, w) in enumerate(_spatial(), 1)]
    return (
        "At batch 1 BatchNorm still has statistics to compute: each channel's mean and "
        "variance pool the H × W positions of the one image ("
        + ", ".join(sizes)
        + "); evaluation uses running averages of those one-image statistics. Weight "
        "Standardization pools each filter's C_in × 3 × 3 weights ("
        + ", ".join(f"{layer.c_in * 9} in conv {k}" for k, layer in enumerate(NET.layers(), 1))
        + ")."
    )


def _spatial() -> list[tuple[int, int]]:
    return [(layer.spatial[0], layer.spatial[1]) for layer in NET.layers()]


def _points(d: float) -> str:
    return f"{round(100 * d, 1) + 0.0:+.1f} points"  # + 0.0: no "-0.0"


def verdict(res: WSResult) -> str:
    """The claim judged at each micro-batch: GroupNorm + WS's mean evaluation accuracy at
    least BatchNorm's minus MARGIN at the same batch size."""
    r = res.runs
    gn_ws, bn = ARMS.index(("group", True)), ARMS.index(("batch", False))
    parts, ok = [], []
    for j in range(MICRO):
        a, b = r.eval_acc[gn_ws, j], r.eval_acc[bn, j]
        ok.append(bool(a.mean() >= b.mean() - MARGIN))
        n, k = a.size, int((a >= b).sum())
        seeds = f"as high or higher in {k} of {n} seeds" if n > 1 else None
        parts.append(
            f"at batch {r.batch_sizes[j]} GroupNorm + WS scores {common.pct(a.mean())} against "
            f"BatchNorm's {common.pct(b.mean())}" + (f" ({seeds})" if seeds else "")
        )
    big = len(r.batch_sizes) - 1
    because = (
        "; ".join(parts) + f" (a match: at most {100 * MARGIN:g} point below); BatchNorm at "
        f"batch {r.batch_sizes[big]} scores {common.pct(res.mean(bn)[big])}"
    )
    return common.verdict(all(ok) if all(ok) or not any(ok) else None, CLAIM, because)


def spread(res: WSResult) -> str:
    """Whether each micro-batch's gap (GroupNorm + WS − BatchNorm) exceeds the seeds' spread."""
    r = res.runs
    gn_ws, bn = ARMS.index(("group", True)), ARMS.index(("batch", False))
    parts = []
    for j in range(MICRO):
        a, b = 100 * r.eval_acc[gn_ws, j], 100 * r.eval_acc[bn, j]
        gap, sd = a.mean() - b.mean(), max(a.std(), b.std())
        where = "within" if abs(gap) <= sd else "beyond"
        parts.append(
            f"at batch {r.batch_sizes[j]} the gap ({round(gap, 1) + 0.0:+.1f} points) is {where} "
            f"the seeds' spread (sd up to {sd:.1f})"
        )
    return "Against the noise: " + "; ".join(parts) + "."


def notes(res: WSResult) -> Sequence[str]:
    r = res.runs
    gn, gn_ws = ARMS.index(("group", False)), ARMS.index(("group", True))
    moved = res.mean(gn_ws) - res.mean(gn)
    effect = ", ".join(
        f"{_points(d)} at batch {b}" for d, b in zip(moved, r.batch_sizes, strict=True)
    )
    return [
        f"Where the statistics come from: {common.pools(('group', 'batch'), NET)}.",
        measured(),
        f"Weight Standardization changes GroupNorm's accuracy by {effect} (mean over seeds).",
        *([spread(res)] if r.eval_acc.shape[-1] > 1 else []),
        verdict(res),
    ]


SECTION = Section("ws", "Weight Standardization", INTRO, run, KNOBS, figure, table, notes)
