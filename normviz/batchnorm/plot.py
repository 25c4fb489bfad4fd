"""What the lab's sections share to draw: colours, rounded series, step traces, spreads, tables.

Steps are drawn with x0/dx instead of an x array and values are rounded to a
few significant digits, so even 2000 steps stay far below the 1 MB budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from normviz import style
from normviz.figures.spec import Spec, trace

BATCH = style.BEFORE  # batch statistics: grey dots
RUNNING = style.PALETTE[0]  # running statistics: blue line
TWIN = style.PALETTE[1]  # the other convention: orange, dotted
TRUTH = style.SELECTED  # the training set's value: black, dashed


def rounded(a: np.ndarray | Sequence[float], digits: int = 5) -> list[float | None]:
    """Rounded values for the JSON payload (NaN becomes a gap)."""
    arr = np.asarray(a, dtype=float)
    out = np.round(arr, digits).tolist()
    return [None if v != v else v for v in out]


def steps_trace(y: np.ndarray, name: str, **kw: object) -> dict[str, Any]:
    """A per-step series, x = 1, 2, … given as x0/dx (no x array in the payload)."""
    return trace("scatter", y=rounded(y), x0=1, dx=1, name=name, **kw)


def marker_line(x: float, y0: float, y1: float, label: str, show: bool = True) -> dict[str, Any]:
    """A dotted vertical line at x (a trace, so log axes place it right)."""
    return trace(
        "scatter",
        x=[x, x],
        y=[y0, y1],
        mode="lines",
        line={"color": style.HIGHLIGHT, "dash": "dot", "width": 2},
        name=label,
        showlegend=show,
        hoverinfo="skip",
    )


def series(x: Sequence, y: Sequence, name: str, colour: str, symbol: str) -> dict[str, Any]:
    """One measured curve: markers joined by a line."""
    return trace(
        "scatter",
        x=rounded(x),
        y=rounded(y),
        mode="markers+lines",
        marker={"size": 10, "symbol": symbol},
        line={"color": colour, "width": 3},
        name=name,
    )


def level(steps: int, value: float, name: str, show: bool) -> dict[str, Any]:
    """The training set's value: a dashed line over steps 1…steps."""
    return trace(
        "scatter",
        x=[1, steps],
        y=[float(value)] * 2,
        mode="lines",
        line={"color": TRUTH, "dash": "dash", "width": 2},
        name=name,
        legendgroup="truth",
        showlegend=show,
        hoverinfo="skip",
    )


Spread = tuple[np.ndarray, np.ndarray, str, str, str]  # small, pooled, their labels, title


def make_spread_figure(
    local: np.ndarray,
    pooled: np.ndarray,
    local_label: str,
    pooled_label: str,
    title: str,
    presenter: bool = False,
) -> go.Figure:
    """Accumulation and sync: per-channel batch means (in σ from the truth), small vs pooled."""
    k, C = local.shape
    fig = Spec()
    channels = np.arange(C)
    for j in range(k):
        fig.add_trace(
            trace(
                "scatter",
                x=rounded(channels + (j - (k - 1) / 2) * min(0.6 / max(k, 1), 0.12)),
                y=rounded(local[j]),
                mode="markers",
                marker={"color": style.PALETTE[0], "size": 9, "opacity": 0.55},
                name=local_label,
                legendgroup="local",
                showlegend=j == 0,
            )
        )
    fig.add_trace(
        trace(
            "scatter",
            x=channels.tolist(),
            y=rounded(pooled),
            mode="markers",
            marker={
                "color": style.PALETTE[5],
                "size": 15,
                "symbol": "diamond",
                "line": {"color": "white", "width": 1},
            },
            name=pooled_label,
        )
    )
    fig.add_hline(y=0, line={"color": TRUTH, "dash": "dash", "width": 2})
    fig.update_xaxes(title="channel", tickmode="linear", dtick=max(1, C // 16))
    fig.update_yaxes(title="batch mean − true mean (in σ)")
    fig.update_layout(title=title, legend=style.LEGEND_BELOW)
    return style.apply(fig, presenter, height=420).figure()


def spread_figure(res: Any, presenter: bool = False) -> go.Figure:
    """The figure of a result with a `spread` (accumulation, sync)."""
    return make_spread_figure(*res.spread, presenter)


def frame(result: object, columns: Sequence[tuple[str, str]]) -> pd.DataFrame:
    """A table whose columns are fields of `result`: (column title, field name) pairs."""
    return pd.DataFrame({title: getattr(result, name) for title, name in columns})
