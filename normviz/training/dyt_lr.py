"""Dynamic Tanh across learning rates (Zhu et al. 2025): does DyT, with no
statistics at all, stand in for LayerNorm?

One pre-norm residual MLP (`resmlp.py`: 4 blocks of width 128) per norm (none, LayerNorm,
RMSNorm, DyT: the registry's "training-residual" list), learning rate and seed, all trained
at once with Adam on the same samples. DyT "matches" LayerNorm at a learning rate when its
mean validation accuracy over the seeds is at most `MATCH` below LayerNorm's. The verdict
looks at the learning rates where at least one of the two trains (mean accuracy at least
`TRAINS_AT`): it holds when DyT matches at every one of them, fails when it matches at
none (or neither trains anywhere), and is mixed otherwise. Each DyT layer's one learned
scalar α is shown after training.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from normviz import style
from normviz.dyt import ALPHA0
from normviz.figures.spec import Spec
from normviz.knobs import Knob, Value
from normviz.sections import Progress, Section
from normviz.training import common
from normviz.training.common import SEEDS, Setup
from normviz.training.models import NORM_LABELS, RES_NORMS, Net, pooled
from normviz.training.train import Grid, train
from normviz.training.wide import Variant

NET = Net("resmlp", width=128, depth=4)
LRS: tuple[float, ...] = (0.0001, 0.001, 0.01, 0.1)  # Adam
MATCH = 0.01  # DyT "matches" LayerNorm within one point of mean validation accuracy
FLAT = 0.05  # |α| below this: tanh(α·x) is nearly linear over inputs of order 1
TRAINS_AT = 0.5  # a learning rate is compared where LayerNorm or DyT reaches this mean
# where each α sits: after each block's norm, and the last norm before the head
LAYERS: tuple[str, ...] = (*(f"block {i + 1}" for i in range(NET.depth)), "last")
CLAIM = (
    "*Zhu et al. (2025): DyT, γ·tanh(α·x) + β with no statistics, replaces LayerNorm and "
    "matches it (ImageNet top-1, ViT-B 82.3 → 82.5 %); later work finds it regime-dependent.*"
)

INTRO = (
    "Each curve is one normalization in a pre-norm residual MLP (four blocks of width 128, "
    "each h + W₂·ReLU(W₁·Norm(h)), a last norm before the head): validation accuracy after "
    "training with Adam, against the learning rate. DyT computes no statistic: every value "
    f"goes through γ·tanh(α·x) + β on its own, with one learned scalar α per layer (starting "
    f"at {ALPHA0:g}); the right panel shows where each layer's α ends. Every point is several "
    "seeds (bars: their spread); the whole grid trains as one batched computation."
)

KNOBS = (
    Knob("dy_epochs", 2, choices=(1, 2, 5, 10), label="Epochs"),
    SEEDS,
)


@dataclass(frozen=True)
class DytResult:
    norms: tuple[str, ...]
    lrs: tuple[float, ...]
    acc: np.ndarray  # (norms, lrs, seeds) validation accuracy
    diverged: np.ndarray  # (norms, lrs, seeds)
    alpha: np.ndarray  # (lrs, seeds, layers) DyT's learned α after training
    epochs: int

    def mean(self, norm: str) -> np.ndarray:
        """(lrs,) mean validation accuracy over the seeds."""
        return self.acc[self.norms.index(norm)].mean(-1)

    def gap(self) -> np.ndarray:
        """(lrs,) DyT's mean accuracy minus LayerNorm's, in points to one decimal (as shown)."""
        return np.round(100 * (self.mean("dyt") - self.mean("layer")), 1) + 0.0

    def matches(self) -> np.ndarray:
        """(lrs,) True where DyT is at most MATCH below LayerNorm (the gap as shown)."""
        return self.gap() >= -100 * MATCH

    def compared(self) -> np.ndarray:
        """(lrs,) True where LayerNorm or DyT trains (mean accuracy ≥ TRAINS_AT)."""
        return np.maximum(self.mean("layer"), self.mean("dyt")) >= TRAINS_AT

    def best(self, norm: str) -> tuple[float, float]:
        """(accuracy, learning rate) at the norm's best learning rate."""
        m = self.mean(norm)
        return float(m.max()), self.lrs[int(m.argmax())]


def run(setup: Setup, knobs: Mapping[str, Value], progress: Progress) -> DytResult:
    seeds = setup.seeds(knobs["runs"])
    variants = tuple(Variant(n, lr, s) for n in RES_NORMS for lr in LRS for s in seeds)
    samples = setup.samples(knobs["dy_epochs"])
    grid = Grid(NET, variants, batch=32, samples=samples, optimizer="adam")
    out, wide, pos = train(grid, progress)
    shape = (len(RES_NORMS), len(LRS), len(seeds))
    alphas = wide.alphas()[np.argsort(pos)].reshape(*shape, -1)  # back in the grid's order
    return DytResult(
        RES_NORMS,
        LRS,
        out.val_acc.reshape(shape),
        out.diverged.reshape(shape),
        alphas[RES_NORMS.index("dyt")],
        int(knobs["dy_epochs"]),  # type: ignore[call-overload]
    )


def figure(res: DytResult, presenter: bool) -> go.Figure:
    fig = Spec.grid(1, 2, ("validation accuracy (%)", "DyT's α per layer"))
    for i, n in enumerate(res.norms):
        common.add_line(
            fig,
            res.lrs,
            100 * res.acc[i],
            common.label(n),
            common.colour(n),
            row=1,
            col=1,
            symbol_=common.symbol(n),
        )
    for j, name in enumerate(LAYERS):
        common.add_line(
            fig,
            res.lrs,
            res.alpha[:, :, j],
            f"α, {name}",
            common.colour("dyt"),  # DyT's colour; the layers differ in dash and marker
            dash=("solid", "dot", "dash", "dashdot", "longdash")[j],
            row=1,
            col=2,
            symbol_=("circle", "square", "diamond", "triangle-up", "x")[j],
        )
    fig.add_hline(ALPHA0, row=1, col=2, line={"dash": "dash", "color": "#444"})
    fig.update_xaxes(style.log_axis(res.lrs), title="learning rate")
    fig.update_yaxes(range=[0, 100], row=1, col=1)
    title = f"Pre-norm residual MLP, Adam, {res.epochs} epoch{'s' * (res.epochs != 1)}:<br>"
    return common.finish(fig, title + "accuracy and DyT's α by learning rate", presenter, 480)


def table(res: DytResult) -> pd.DataFrame:
    rows = []
    for i, n in enumerate(res.norms):
        acc, at = res.best(n)
        row: dict[str, object] = {"normalization": NORM_LABELS[n], "pools": pooled(n, NET)}
        row |= {
            f"lr {lr:g} (%)": float(100 * a) for lr, a in zip(res.lrs, res.mean(n), strict=True)
        }
        row |= {"best (%)": float(100 * acc), "at lr": f"{at:g}"}
        rows.append(row | {"runs diverged": int(res.diverged[i].sum())})
    return pd.DataFrame(rows)


def _points(res: DytResult, where: np.ndarray) -> str:
    """ "0.001 (-3.4), 0.01 (+0.2)": the learning rates and DyT's gap to LayerNorm, in points."""
    gap = res.gap()
    return ", ".join(f"{res.lrs[j]:g} ({gap[j]:+.1f})" for j in np.flatnonzero(where))


def _flat(res: DytResult) -> str:
    """Where a layer's mean α ended near 0: there tanh(α·x) ≈ α·x, a scaling, not a squash."""
    alpha = res.alpha.mean(1)  # (lrs, layers)
    near = [
        f"{', '.join(LAYERS[k] for k in np.flatnonzero(np.abs(a) < FLAT))} at lr {lr:g}"
        for lr, a in zip(res.lrs, alpha, strict=True)
        if (np.abs(a) < FLAT).any()
    ]
    if not near:
        return ""
    return (
        f" Within {FLAT:g} of 0: {'; '.join(near)}; there tanh(α·x) ≈ α·x for inputs of "
        "order 1, so the layer scales its input instead of squashing it."
    )


def _lrs(res: DytResult, where: np.ndarray) -> str:
    return ", ".join(f"{res.lrs[j]:g}" for j in np.flatnonzero(where))


def notes(res: DytResult) -> Sequence[str]:
    ln, dy = res.best("layer"), res.best("dyt")
    alpha = res.alpha.mean(1)  # (lrs, layers)
    spans = "; ".join(
        f"at {lr:g}, {alpha[j].min() + 0.0:.2f} to {alpha[j].max() + 0.0:.2f}"
        for j, lr in enumerate(res.lrs)
    )
    out = [
        f"Where the statistics come from: {common.pools(res.norms, NET)}: DyT's only "
        "adaptation to the input's scale is α.",
        f"DyT's α after training (from {ALPHA0:g}; mean over seeds, across the five layers): "
        f"{spans}.{_flat(res)}",
        f"At each one's best learning rate: LayerNorm {common.pct(ln[0])} (lr {ln[1]:g}), "
        f"DyT {common.pct(dy[0])} (lr {dy[1]:g}).",
    ]
    return [*out, verdict(res)]


def verdict(res: DytResult) -> str:
    """Holds, does not hold, or mixed: DyT against LayerNorm where one trains."""
    on = res.compared()
    ok, behind = res.matches() & on, ~res.matches() & on
    if not on.any():
        return common.verdict(False, CLAIM, "neither LayerNorm nor DyT trains at any learning rate")
    skipped = f"; neither trains at {_lrs(res, ~on)}" if (~on).any() else ""
    gaps = f"DyT minus LayerNorm, in points: {_points(res, on)}{skipped}"
    within = f"within {100 * MATCH:g} point"
    if not behind.any():
        why = f"DyT is {within} of LayerNorm or above it wherever one trains ({gaps})"
        return common.verdict(True, CLAIM, why)
    if not ok.any():
        why = f"DyT falls more than {100 * MATCH:g} point behind LayerNorm wherever one trains"
        why += f" ({gaps})"
        return common.verdict(False, CLAIM, why)
    why = (
        f"DyT matches or beats LayerNorm ({within}) at learning rate {_points(res, ok)} and "
        f"falls behind at {_points(res, behind)} (DyT minus LayerNorm, in points{skipped})"
    )
    return common.verdict(None, CLAIM, why)


SECTION = Section("dyt", "DyT across learning rates", INTRO, run, KNOBS, figure, table, notes)
