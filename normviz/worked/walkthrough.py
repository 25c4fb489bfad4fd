"""Step by step: each method's statistics written out, its output, and the torch check.

The figure shows the input and each method's output with the cells that share one
mean and variance outlined; below it, per method, every μ and σ² worked through,
a table of the statistics and the comparison with the torch.nn layer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from normviz import style
from normviz.errors import NormConfigError
from normviz.figures.spec import Spec, trace
from normviz.knobs import Value
from normviz.methods import METHODS
from normviz.sections import Progress, Section
from normviz.worked.steps import (
    METHODS_SHOWN,
    TORCH_NAME,
    Matrix,
    MethodSteps,
    Statistic,
    fmt,
    fmt_list,
    method_steps,
    pooled_axis,
    statistic_latex,
)

INTRO = (
    "The matrix is a batch of N samples (its rows) with C features each (its columns), "
    "shape (N, C), as `nn.BatchNorm1d` reads it. Both methods apply the same formula to it. "
    "BatchNorm takes μ and σ² down each column, over axis 0 (one feature, across the "
    "samples); LayerNorm takes them along each row, over axis 1 (one sample, across its "
    "features). Change the numbers and follow every step."
)
AFFINE = "Here γ = 1 and β = 0, as in a freshly initialized layer."
STEPS_INTRO = (
    "The input and each method's output; the cells that share one μ and σ² are outlined. "
    "Below, each method's statistics are worked through and checked against torch.nn."
)


@dataclass(frozen=True)
class Walkthrough:
    """Each method shown, applied to the matrix; the methods that refuse it, and why."""

    x: np.ndarray  # the matrix, (rows, cols)
    steps: tuple[MethodSteps, ...]
    refused: tuple[tuple[str, str], ...]  # (method label, the refusal's message)


def run(setup: Matrix, knobs: Mapping[str, Value], progress: Progress) -> Walkthrough:
    """method_steps for every method shown; a refusal (one row for BatchNorm) is kept."""
    x = np.array(setup, dtype=np.float64)
    steps, refused = [], []
    for key in METHODS_SHOWN:
        try:
            steps.append(method_steps(x, key))
        except NormConfigError as e:
            refused.append((METHODS[key].label, str(e)))
    return Walkthrough(x, tuple(steps), tuple(refused))


# ---- words and tables for one method -----------------------------------------------


def heading(steps: MethodSteps) -> str:
    return f"{steps.label}: one mean and variance per {steps.pools}"


def summary(steps: MethodSteps) -> str:
    """What one statistic pools, with the numbers."""
    return (
        f"{steps.label} pools each **{steps.pools}**, {pooled_axis(steps.method)}: "
        f"m = {len(steps.stats[0].values)} values "
        f"feed one μ and one σ² (divided by m, not m − 1), and ε = {steps.eps:g}."
    )


def stat_heading(steps: MethodSteps, stat: Statistic) -> str:
    return f"**{steps.pools.capitalize()} {stat.index + 1}**"


def worked_stats(
    steps: MethodSteps, row: int, col: int
) -> tuple[tuple[str, tuple[str, str, str]], ...]:
    """Each statistic's heading and LaTeX lines, with its output in the selected cell's row
    (column statistics) or column (row statistics) worked through; row, col are 0-based."""
    out = []
    for s in steps.stats:
        if steps.pools == "column":
            pos, cell, own = row, (row + 1, s.index + 1), s.index == col
        else:
            pos, cell, own = col, (s.index + 1, col + 1), s.index == row
        head = stat_heading(steps, s) + (" (holds the selected cell)" if own else "")
        out.append((head, statistic_latex(s, steps.eps, pos, cell)))
    return tuple(out)


def cell_text(res: Walkthrough, row: int, col: int) -> str:
    """Which statistic normalizes the selected cell, for each method shown."""
    parts = [
        f"{s.label} with {s.pools} {(col if s.pools == 'column' else row) + 1}'s μ and σ²"
        for s in res.steps
    ]
    where = "; ".join(parts) if parts else "no method can run on this matrix"
    return (
        f"Cell (row {row + 1}, column {col + 1}) holds {fmt(res.x[row, col])}. It is "
        f"normalized by {where}. Each statistic below works out its output in this cell's "
        "row (a column's statistic) or column (a row's)."
    )


def torch_check(steps: MethodSteps) -> tuple[bool, str]:
    """(agrees, the sentence): ours against the torch.nn layer."""
    module = TORCH_NAME[steps.method]
    if steps.matches_torch:
        return True, f"Same as torch.nn.{module}: largest difference {steps.torch_max_diff:.1e}."
    return False, f"Differs from torch.nn.{module} by up to {steps.torch_max_diff:.2e}."


def refusal_text(label: str, message: str) -> str:
    return f"**{label} cannot run here:** {message}."


def steps_frame(steps: MethodSteps) -> pd.DataFrame:
    """One row per statistic: its values, μ, σ² and outputs, rounded to 3 decimals."""
    noun = steps.pools
    return pd.DataFrame(
        [
            {
                noun: f"{noun} {s.index + 1}",
                "values": fmt_list(s.values),
                "μ": fmt(s.mean),
                "σ²": fmt(s.var),
                "outputs": fmt_list(s.outputs),
            }
            for s in steps.stats
        ]
    ).set_index(noun)


# ---- the figure -----------------------------------------------------------------------


def _panel(fig: Spec, z: np.ndarray, row: int, diverging: bool, name: str, presenter: bool) -> None:
    """One annotated heatmap; rows drawn top-down as in the matrix."""
    rows, cols = z.shape
    text = [[fmt(v) for v in row] for row in z]
    lim = float(np.max(np.abs(z))) or 1.0
    scale = {"colorscale": style.DIVERGING, "zmid": 0, "zmin": -lim, "zmax": lim}
    fig.add_trace(
        trace(
            "heatmap",
            z=np.round(z, 4).tolist(),
            x=[f"col {j + 1}" for j in range(cols)],
            y=[f"row {i + 1}" for i in range(rows)],
            text=text,
            texttemplate="%{text}",
            textfont={"size": style.font_size(presenter) + 2},
            **(scale if diverging else {"colorscale": style.GREYS}),
            showscale=False,
            name=name,
            hovertemplate=f"{name}<br>%{{y}}, %{{x}}: %{{text}}<extra></extra>",
            xgap=3,
            ygap=3,
        ),
        row=row,
        col=1,
    )
    fig.update_yaxes({"autorange": "reversed"}, row=row, col=1)


def _outline(fig: Spec, steps: MethodSteps, row: int, shape: tuple[int, int]) -> None:
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
            row=row,
            col=1,
        )


def make_worked_figure(
    x: np.ndarray,
    steps: tuple[MethodSteps, ...],
    presenter: bool = False,
) -> go.Figure:
    """The input, then each method's output, with the cells that share statistics outlined:
    one panel under another (side by side, three did not fit a phone's column)."""
    titles = ("Input x", *(f"{s.label}, one μ, σ² per {s.pools} (outlined)" for s in steps))
    n = 1 + len(steps)
    fig = Spec.grid(n, 1, titles, shared_xaxes=True, vertical_spacing=0.5 / n)
    _panel(fig, x, 1, False, "input", presenter)
    for row, s in enumerate(steps, start=2):
        _panel(fig, s.output, row, True, s.label, presenter)
        _outline(fig, s, row, x.shape)
    fig.update_xaxes({"showgrid": False})
    fig.update_yaxes({"showgrid": False})
    style.apply(fig, presenter)
    style.top_room(fig, presenter, below=1)  # the first panel's title
    size = style.font_size(presenter)
    # each panel: its title's line and its rows of cells
    panel = round(1.6 * size) + 48 * x.shape[0]
    return fig.update_layout(height=fig.layout["margin"]["t"] + 60 + n * panel).figure()


def figure(result: Walkthrough, presenter: bool) -> go.Figure | None:
    return make_worked_figure(result.x, result.steps, presenter)


SECTION = Section(slug="steps", label="Step by step", intro=STEPS_INTRO, run=run, figure=figure)
