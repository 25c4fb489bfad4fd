"""The exercises' figures: the tensor as a clickable grid of squares, and a class's answers.

The grid unfolds a tensor as the Axis Explorer's flat view does: rows are the
first two axes (B·T or N·C), columns the rest (C or H·W). Every cell is a square
Scatter marker whose customdata is its flat index, so a click (or a box drag)
returns the cells picked: Plotly sends no selection for a click on a Heatmap.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from normviz import style
from normviz.layouts import LAYOUTS
from normviz.practice.common import Exercise, TallyRow, Verdict, cell_name

MAX_GRID_PX = 640  # the grid's width at most
CELL_PX = (22, 56)  # a cell's side, px (min, max)
MISSED = style.PALETTE[2]  # green: in the group, not picked
EXTRA = style.PALETTE[5]  # vermillion: picked, not in the group
PICKED = style.PALETTE[4]  # sky: picked (not graded yet)
RIGHT = style.PALETTE[2]
WRONG = style.BEFORE


def positions(layout: str, shape: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """(row, column) of every element, in flat (row-major) order."""
    shape = tuple(shape)
    idx = np.stack(np.unravel_index(np.arange(math.prod(shape)), shape), axis=1)
    rows = idx[:, 0] * shape[1] + idx[:, 1]
    cols = np.zeros(len(idx), dtype=np.int64)
    for d in range(2, len(shape)):
        cols = cols * shape[d] + idx[:, d]
    return rows, cols


def cell_px(shape: Sequence[int]) -> int:
    n_cols = math.prod(shape[2:])
    return int(np.clip(MAX_GRID_PX // max(n_cols, 1), *CELL_PX))


def _axis_text(axes: Sequence[str], index: Sequence[int]) -> str:
    return " ".join(f"{a}{int(i)}" for a, i in zip(axes, index, strict=True))


def _fill(ex: Exercise) -> list[str]:
    assert ex.case is not None
    n = ex.n_cells
    if ex.colour == "groups":
        ids = ex.case.ids().reshape(-1)
        return [style.PALETTE[int(i) % (len(style.PALETTE) - 1)] for i in ids]
    return [style.MUTED] * n


def make_grid_figure(
    ex: Exercise,
    picked: Sequence[int] = (),
    verdict: Verdict | None = None,
    presenter: bool = False,
) -> go.Figure:
    """The exercise's tensor: the marked cell in black, picked cells, and after grading
    the missed (green) and extra (vermillion, crossed) cells."""
    case = ex.case
    assert case is not None
    lay = LAYOUTS[case.layout]
    rows, cols = positions(case.layout, case.shape)
    cells = np.stack(np.unravel_index(np.arange(ex.n_cells), case.shape), axis=1)
    names = [cell_name(case.layout, c) for c in cells]
    fill = _fill(ex)
    edge = [0.0] * len(fill)  # picked cells are also outlined: not colour alone
    for i in picked:
        if 0 <= i < len(fill):
            fill[i] = PICKED
            edge[i] = 3.0
    text = [f"{v:g}" for v in ex.values] if ex.colour == "values" else None
    px = cell_px(case.shape)
    fig = go.Figure(
        go.Scatter(
            x=cols.tolist(),
            y=rows.tolist(),
            mode="markers+text" if text else "markers",
            text=text,
            textfont={"size": style.font_size(presenter) - 2},
            customdata=list(range(ex.n_cells)),
            hovertext=names,
            hoverinfo="text",
            marker={
                "symbol": "square",
                "size": px - 3,
                "color": fill,
                "line": {"width": edge, "color": style.SELECTED},
            },
            selected={"marker": {"opacity": 1}},
            unselected={"marker": {"opacity": 1}},
            name="cells",
            uid="cells",
            showlegend=False,
        )
    )

    def overlay(idx: Sequence[int], name: str, colour: str, symbol: str, width: float) -> None:
        idx = list(idx)
        fig.add_trace(
            go.Scatter(
                x=cols[idx].tolist(),
                y=rows[idx].tolist(),
                mode="markers",
                customdata=idx,
                hovertext=[names[i] for i in idx],
                hoverinfo="text",
                marker={
                    "symbol": symbol,
                    "size": px - 3,
                    "color": colour,  # an open symbol is drawn in the marker's colour
                    "line": {"color": colour, "width": width},
                },
                name=name,
                showlegend=True,
            )
        )

    if verdict is not None:
        overlay(verdict.missed, f"missed ({len(verdict.missed)})", MISSED, "square-open", 4)
        overlay(verdict.extra, f"extra ({len(verdict.extra)})", EXTRA, "x-thin-open", 4)
    if ex.marked is not None:
        marked = int(np.ravel_multi_index(ex.marked, case.shape))
        overlay([marked], f"marked cell {names[marked]}", style.SELECTED, "square-open", 5)
    n_rows, n_cols = case.shape[0] * case.shape[1], math.prod(case.shape[2:])
    row_text = [_axis_text(lay.axes[:2], divmod(r, case.shape[1])) for r in range(n_rows)]
    col_axes = lay.axes[2:]
    col_text = [_axis_text(col_axes, np.unravel_index(c, case.shape[2:])) for c in range(n_cols)]
    fig.update_layout(
        xaxis={
            "title": {"text": "·".join(col_axes)},
            "range": [-0.5, n_cols - 0.5],
            "tickvals": list(range(n_cols)),
            "ticktext": col_text,
            "side": "top",
            "showgrid": False,
            "zeroline": False,
            "fixedrange": True,
        },
        yaxis={
            "title": {"text": "·".join(lay.axes[:2])},
            "range": [n_rows - 0.5, -0.5],
            "tickvals": list(range(n_rows)),
            "ticktext": row_text,
            "showgrid": False,
            "zeroline": False,
            "fixedrange": True,
        },
        clickmode="event+select",
        dragmode=False,  # a click picks one cell; the modebar's box tool picks many
        hovermode="closest",
        legend={"orientation": "h", "y": -0.02, "yanchor": "top"},
    )
    style.apply(fig, presenter)
    label_px = style.font_size(presenter) * 0.6 * max(len(t) for t in row_text)
    fig.update_layout(
        width=n_cols * px + round(label_px) + 80,
        height=n_rows * px + 140,
        margin={"l": round(label_px) + 50, "r": 20, "t": 70, "b": 40},
    )
    return fig


def make_tally_figure(
    rows: Sequence[TallyRow], revealed: bool, presenter: bool = False
) -> go.Figure:
    """A class's answers as horizontal bars, most frequent on top; after the reveal the
    right answer's bar is green, hatched and ticked."""
    colours = [
        RIGHT if (revealed and r.correct) else (WRONG if revealed else style.PALETTE[0])
        for r in rows
    ]
    fig = go.Figure(
        go.Bar(
            x=[r.count for r in rows],
            y=[r.label for r in rows],
            orientation="h",
            marker={
                "color": colours,
                "pattern": {"shape": ["/" if revealed and r.correct else "" for r in rows]},
            },
            text=[f"{r.count} ✔" if revealed and r.correct else str(r.count) for r in rows],
            textposition="outside",
            hoverinfo="skip",
            name="answers",
        )
    )
    total = sum(r.count for r in rows)
    fig.update_layout(
        title={"text": f"{total} answer{'s' if total != 1 else ''}"},
        yaxis={"autorange": "reversed", "fixedrange": True},
        xaxis={
            "title": {"text": "students"},
            "fixedrange": True,
            "rangemode": "tozero",
            "tick0": 0,
            "dtick": max(1, math.ceil(max((r.count for r in rows), default=1) / 8)),
        },
    )
    style.apply(fig, presenter, height=120 + 40 * max(len(rows), 1))
    return fig
