"""Faster convergence (Ioffe & Szegedy 2015): steps to a target accuracy, with and without
normalization.

The same MLP (three hidden layers of 64) without a norm, with BatchNorm and with
LayerNorm trains with SGD (momentum 0.9) at one learning rate, every run on the same
samples; the validation accuracy is measured at evenly spaced checkpoints
(evaluation mode: BatchNorm with its running statistics). A run's "steps to target"
is the first checkpoint at which it reaches the target accuracy.
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
from normviz.sources import cite
from normviz.training import common
from normviz.training.common import SEEDS, Setup
from normviz.training.models import NORM_LABELS, Net
from normviz.training.train import Grid, train
from normviz.training.wide import Variant

NET = Net("mlp", width=64, depth=3)
NORMS: tuple[str, ...] = ("none", "batch", "layer")
BATCH = 32
CHECKPOINTS = 41  # validation measurements along training, the first before any step
CLAIM = (
    f"*{cite('ioffe2015')}: with BatchNorm a network reaches the same accuracy in fewer "
    "training steps (14 times fewer for their ImageNet classifier).*"
)

INTRO = (
    "*Faster convergence* is a claim about steps: how many updates a network needs to "
    "reach a given accuracy. Three copies of one MLP (three hidden layers of 64), without a "
    "norm, with BatchNorm and with LayerNorm, train with SGD (momentum 0.9) at the same "
    f"learning rate on the same batches of {BATCH} digits; the validation accuracy is measured "
    f"at {CHECKPOINTS} evenly spaced checkpoints (evaluation mode, BatchNorm with its running "
    "statistics). A run's *steps to target* is the first checkpoint at which it reaches the "
    "target; every seed is one run."
)

KNOBS = (
    Knob("cv_target", 0.9, choices=(0.8, 0.9, 0.95), label="Target accuracy"),
    Knob("cv_lr", 0.05, choices=(0.02, 0.05, 0.1), label="Learning rate"),
    Knob("cv_epochs", 3, choices=(1, 2, 3, 4, 6), label="Epochs"),
    SEEDS,
)


@dataclass(frozen=True, eq=False)
class ConvergeResult:
    steps: tuple[int, ...]  # the checkpoints (0: before training)
    acc: np.ndarray  # (norms, checkpoints, seeds) validation accuracy
    target: float
    lr: float
    pools: str

    @property
    def total(self) -> int:
        return self.steps[-1]

    def reached(self, i: int) -> np.ndarray:
        """(seeds,) the first checkpoint step at which norm i reaches the target; NaN: never."""
        hit = self.acc[i] >= self.target  # (checkpoints, seeds)
        first = np.asarray(self.steps, dtype=float)[hit.argmax(0)]
        return np.where(hit.any(0), first, np.nan)


def run(setup: Setup, knobs: Mapping[str, Value], progress: Progress) -> ConvergeResult:
    lr = float(knobs["cv_lr"])  # type: ignore[arg-type]
    seeds = setup.seeds(knobs["runs"])
    variants = tuple(Variant(n, lr, s) for n in NORMS for s in seeds)
    grid = Grid(
        NET, variants, batch=BATCH, samples=setup.samples(knobs["cv_epochs"]), evals=CHECKPOINTS
    )
    out = train(grid, progress)[0]
    shape = (len(out.curve_steps), len(NORMS), len(seeds))
    acc = out.curve_acc.reshape(shape).transpose(1, 0, 2)
    return ConvergeResult(
        out.curve_steps,
        acc,
        float(knobs["cv_target"]),
        lr,
        common.pools(NORMS, NET),  # type: ignore[arg-type]
    )


def figure(res: ConvergeResult, presenter: bool) -> go.Figure:
    fig = Spec()
    for i, n in enumerate(NORMS):
        common.add_line(
            fig,
            res.steps,
            100 * res.acc[i],
            common.label(n),
            common.colour(n),
            symbol_=common.symbol(n),
        )
    fig.add_hline(100 * res.target, line={"dash": "dot", "color": "#444"})
    fig.add_hline_note(100 * res.target, "target", position="bottom right")
    fig.update_xaxes(title=f"SGD step (learning rate {res.lr:g}, batch {BATCH})")
    fig.update_yaxes(title="validation accuracy (%)", range=[0, 100])
    return common.finish(fig, "Validation accuracy along training", presenter)


def _steps_text(r: np.ndarray, total: int) -> str:
    """ "22–54 steps" over the seeds that reached the target, and how many did not."""
    ok = r[~np.isnan(r)]
    if not ok.size:
        return f"not reached within {total} steps"
    lo, hi = int(ok.min()), int(ok.max())
    span = f"{lo} steps" if lo == hi else f"{lo}–{hi} steps"
    miss = len(r) - ok.size
    if not miss:
        return span
    return f"{span} in {ok.size} of {len(r)} seeds; the other {miss} not within {total}"


def table(res: ConvergeResult) -> pd.DataFrame:
    rows = []
    for i, n in enumerate(NORMS):
        r = res.reached(i)
        ok = r[~np.isnan(r)]
        rows.append(
            {
                "normalization": NORM_LABELS[n],
                f"steps to {common.pct(res.target)}": _steps_text(r, res.total),
                "mean steps (seeds that reached it)": float(ok.mean()) if ok.size else np.nan,
                "seeds that reached it": f"{ok.size} of {len(r)}",
                "final accuracy (%)": float(100 * res.acc[i, -1].mean()),
            }
        )
    return pd.DataFrame(rows)


def compare(res: ConvergeResult, a: str, b: str) -> tuple[int, int]:
    """(seeds where norm a reached the target in fewer steps than b, seeds where it took
    more); a run that never reaches it counts as slower than one that does."""
    ra, rb = (np.nan_to_num(res.reached(NORMS.index(k)), nan=np.inf) for k in (a, b))
    both_missed = np.isinf(ra) & np.isinf(rb)
    return int(((ra < rb) & ~both_missed).sum()), int(((ra > rb) & ~both_missed).sum())


def notes(res: ConvergeResult) -> Sequence[str]:
    target = common.pct(res.target)
    every = res.total / max(1, len(res.steps) - 1)
    out = [
        f"Where the statistics come from: {res.pools}.",
        f"Steps to {target} validation accuracy (measured about every {every:.2g} steps):",
    ]
    out += [
        f"- {NORM_LABELS[n]}: {_steps_text(res.reached(i), res.total)}."
        for i, n in enumerate(NORMS)
    ]
    seeds = res.acc.shape[-1]
    faster, slower = compare(res, "batch", "none")
    bn, none = (res.reached(NORMS.index(k)) for k in ("batch", "none"))
    if faster == seeds:
        why = f"in every seed BatchNorm reaches {target} first"
        if not np.isnan(none).any():
            why += f", in {np.mean(none) / np.mean(bn):.2g}× fewer steps on average"
        else:
            miss = int(np.isnan(none).sum())
            who = "no seed does" if miss == seeds else f"{miss} of {seeds} seeds do not"
            why += f"; without a norm {who} within {res.total} steps"
        out.append(common.verdict(True, CLAIM, why))
    elif faster == 0:
        why = f"in no seed does BatchNorm reach {target} before the network without a norm"
        if np.isnan(bn).all():
            why = f"BatchNorm does not reach {target} within {res.total} steps"
        out.append(common.verdict(False, CLAIM, why))
    else:
        rest = [(slower, "later"), (seeds - faster - slower, "at the same checkpoint")]
        also = "".join(f", {words} in {k}" for k, words in rest if k)
        out.append(
            f"{CLAIM} **Mixed here**: BatchNorm reaches {target} first in {faster} of {seeds} "
            f"seeds{also}."
        )
    return out


SECTION = Section("converge", "Convergence speed", INTRO, run, KNOBS, figure, table, notes)
