"""What every experiment of the training lab shares: the setup, the seeds knob, the
verdict sentence and the figure helpers (mean over seeds with its spread)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from normviz import style
from normviz.figures.spec import Spec, trace
from normviz.knobs import Knob
from normviz.training.data import digits
from normviz.training.models import NORM_LABELS, Net, pooled

SEEDS = Knob("runs", 3, lo=1, hi=3, label="Seeds (runs per setting)")
NO_NORM = "#7F7F7F"  # "no normalization" in every figure


@dataclass(frozen=True)
class Setup:
    """The lab's shared settings: the first seed (the sidebar's) and a size factor."""

    seed: int = 0  # runs use seeds seed, seed + 1, ...
    scale: float = 1.0  # multiplies the samples each run sees (tests: smaller)

    def seeds(self, n: object) -> tuple[int, ...]:
        return tuple(range(self.seed, self.seed + int(n)))  # type: ignore[call-overload]

    def samples(self, epochs: object) -> int:
        """Training samples for `epochs` passes over the training set, scaled."""
        return max(64, round(float(epochs) * digits().n_train * self.scale))  # type: ignore[arg-type]


def colour(norm: str) -> str:
    return NO_NORM if norm == "none" else style.METHOD_COLOURS[norm]


def symbol(norm: str) -> str:
    return style.METHOD_SYMBOLS[norm]


def label(norm: str, ghost: int = 0) -> str:
    return NORM_LABELS[norm] + (f" (stats of {ghost})" if ghost else "")


def pools(norms: Sequence[str], net: Net) -> str:
    """ "BatchNorm pools B; LayerNorm pools C": the axes each layer's statistics pool."""
    parts = [f"{NORM_LABELS[n]} pools {pooled(n, net)}" for n in norms if n != "none"]
    return "; ".join(parts)


def verdict(holds: bool | None, claim: str, because: str) -> str:
    """The one sentence that judges a paper's claim from the numbers (None: mixed)."""
    head = {True: "**Holds here**", False: "**Does not hold here**", None: "**Mixed here**"}[holds]
    return f"{claim} {head}: {because}."


def mean_sd(a: np.ndarray, axis: int = -1) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation over seeds (the last axis by default)."""
    a = np.asarray(a, dtype=float)
    return a.mean(axis), (a.std(axis) if a.shape[axis] > 1 else np.zeros(a.mean(axis).shape))


def pct(v: float) -> str:
    return f"{100 * v:.1f} %"


def add_line(
    fig: Spec,
    x: Sequence[float],
    runs: np.ndarray,
    name: str,
    colour_: str,
    dash: str = "solid",
    row: int | None = None,
    col: int | None = None,
    legend: bool = True,
    symbol_: str = "circle",
) -> None:
    """Mean over seeds (runs: (len(x), seeds)) with the spread as error bars."""
    m, s = mean_sd(runs)
    fig.add_trace(
        trace(
            "scatter",
            x=list(x),
            y=m.tolist(),
            error_y={"type": "data", "array": s.tolist(), "visible": bool(s.any())},
            mode="lines+markers",
            name=name,
            legendgroup=name,
            showlegend=legend,
            line={"color": colour_, "dash": dash, "width": 3},
            marker={"size": 9, "symbol": symbol_},
        ),
        row=row,
        col=col,
    )


def batch_axes(fig: Spec, batch_sizes: Sequence[int]) -> None:
    """The micro-batch experiments' axes: batch sizes on a log scale, labelled at each
    size tried (equal samples seen at every size), accuracy in percent."""
    fig.update_xaxes(
        type="log", tickvals=list(batch_sizes), title="batch size (equal samples seen)"
    )
    fig.update_yaxes(title="validation accuracy (%)")


def finish(fig: Spec, title: str, presenter: bool, height: int = 440) -> go.Figure:
    # the legend under the x-axis title; the top margin holds every line of the title
    fig.update_layout(title=title, legend=style.LEGEND_BELOW)
    style.apply(fig, presenter, height=round(height * (1.25 if presenter else 1)))
    return (style.top_room(fig, presenter) if "<br>" in title else fig).figure()
