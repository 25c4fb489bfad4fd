"""The worked example's figure: the matrix, BatchNorm's output and LayerNorm's, cell by cell."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from normviz import style
from normviz.worked import MethodSteps, fmt


def _panel(
    fig: go.Figure, z: np.ndarray, col: int, diverging: bool, name: str, presenter: bool
) -> None:
    """One annotated heatmap; rows drawn top-down as in the matrix."""
    rows, cols = z.shape
    text = [[fmt(v) for v in row] for row in z]
    lim = float(np.max(np.abs(z))) or 1.0
    fig.add_trace(
        go.Heatmap(
            z=np.round(z, 4).tolist(),
            x=[f"col {j + 1}" for j in range(cols)],
            y=[f"row {i + 1}" for i in range(rows)],
            text=text,
            texttemplate="%{text}",
            textfont={"size": style.font_size(presenter) + 2},
            colorscale=style.DIVERGING if diverging else "Greys",
            zmid=0 if diverging else None,
            zmin=-lim if diverging else None,
            zmax=lim if diverging else None,
            showscale=False,
            name=name,
            hovertemplate=f"{name}<br>%{{y}}, %{{x}}: %{{text}}<extra></extra>",
            xgap=3,
            ygap=3,
        ),
        row=1,
        col=col,
    )
    fig.update_yaxes(autorange="reversed", row=1, col=col)


def _outline(fig: go.Figure, steps: MethodSteps, col: int, shape: tuple[int, int]) -> None:
    """A rectangle around each group of cells that shares one mean and variance."""
    rows, cols = shape
    colour = style.METHOD_COLOURS[steps.method]
    for s in steps.stats:
        if steps.pools == "column":
            x0, x1, y0, y1 = s.index - 0.5, s.index + 0.5, -0.5, rows - 0.5
        else:
            x0, x1, y0, y1 = -0.5, cols - 0.5, s.index - 0.5, s.index + 0.5
        fig.add_shape(
            type="rect",
            x0=x0 + 0.04,
            x1=x1 - 0.04,
            y0=y0 + 0.04,
            y1=y1 - 0.04,
            line={"color": colour, "width": 4},
            row=1,
            col=col,
        )


def make_worked_figure(
    x: np.ndarray,
    steps: tuple[MethodSteps, ...],
    presenter: bool = False,
) -> go.Figure:
    """The input, then each method's output, with the cells that share statistics outlined."""
    titles = ["Input x"] + [f"{s.label}: one μ, σ² per {s.pools} (outlined)" for s in steps]
    fig = make_subplots(rows=1, cols=1 + len(steps), subplot_titles=titles, horizontal_spacing=0.06)
    _panel(fig, x, 1, False, "input", presenter)
    for col, s in enumerate(steps, start=2):
        _panel(fig, s.output, col, True, s.label, presenter)
        _outline(fig, s, col, x.shape)
    height = 130 + 48 * x.shape[0]
    fig.update_xaxes(showgrid=False)
    fig.update_yaxes(showgrid=False)
    return style.apply(fig, presenter, height=height)
