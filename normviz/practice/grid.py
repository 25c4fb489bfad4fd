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
from normviz.figures.spec import Spec, trace
from normviz.layouts import LAYOUTS
from normviz.practice.common import Exercise, TallyRow, Verdict, cell_name

MAX_GRID_PX = 640  # the grid's width at most
CELL_PX = (22, 56)  # a cell's side, px (min, max)
FRAME_PX = 140  # the grid's height beyond its rows: column labels, axis titles, legend
TALLY_PX = 180  # the tally's height beyond its bars: title, axis, its title
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
    """A cell's side: the grid at most MAX_GRID_PX wide."""
    n_cols = math.prod(shape[2:])
    return int(np.clip(MAX_GRID_PX // max(n_cols, 1), *CELL_PX))


def _axis_text(axes: Sequence[str], index: Sequence[int]) -> str:
    return " ".join(f"{a}{int(i)}" for a, i in zip(axes, index, strict=True))


GROUP_COLOURS = style.PALETTE[:-1]  # black is the marked cell's
COLOUR_NAMES = ("blue", "orange", "green", "pink", "sky blue", "vermillion", "yellow")


def _groups(ex: Exercise) -> np.ndarray:
    """Each cell's statistic group, numbered 1, 2, … in the order the groups first appear."""
    assert ex.case is not None
    ids = ex.case.ids().reshape(-1)
    _, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    rank = np.argsort(np.argsort(first))  # group id -> its order of appearance
    return rank[inverse] + 1


def _fill(ex: Exercise) -> list[str]:
    if ex.colour == "groups":
        return [GROUP_COLOURS[(int(g) - 1) % len(GROUP_COLOURS)] for g in _groups(ex)]
    return [style.MUTED] * ex.n_cells


def _rows(ex: Exercise, cell_text: Sequence[str]) -> list[str]:
    """The grid row by row in words: "row B0 T1: 1, 1, 2, 2"."""
    assert ex.case is not None
    shape = ex.case.shape
    axes = LAYOUTS[ex.case.layout].axes
    n_cols = math.prod(shape[2:])
    return [
        f"row {_axis_text(axes[:2], divmod(r, shape[1]))}: "
        + ", ".join(cell_text[r * n_cols : (r + 1) * n_cols])
        for r in range(shape[0] * shape[1])
    ]


def grid_alt(ex: Exercise, picked: Sequence[int] = (), verdict: Verdict | None = None) -> list[str]:
    """The grid in words, as complete as the picture: its rows and columns, each cell's
    group (or value), and which cells are marked, picked, missed or extra."""
    case = ex.case
    assert case is not None
    lay = LAYOUTS[case.layout]
    names = [cell_name(case.layout, c) for c in np.ndindex(*case.shape)]
    out = [
        f"A grid of the {case.layout} tensor {lay.shape_text(case.shape)}, one square per "
        f"cell: rows {'·'.join(lay.axes[:2])}, columns {'·'.join(lay.axes[2:])}."
    ]
    if ex.colour == "groups":
        groups = _groups(ex)
        n = int(groups.max())
        colours = ", ".join(
            f"{g} {COLOUR_NAMES[(g - 1) % len(COLOUR_NAMES)]}" for g in range(1, min(n, 7) + 1)
        )
        again = f"; colours repeat after {len(COLOUR_NAMES)}" if n > len(COLOUR_NAMES) else ""
        out.append(
            f"Each cell is coloured and numbered by its statistic group, {n} groups "
            f"({colours}{again}). The numbers, row by row:"
        )
        out += _rows(ex, [str(int(g)) for g in groups])
    elif ex.colour == "values":
        out.append("Each cell shows its value x. The values, row by row:")
        out += _rows(ex, [f"{v:g}" for v in ex.values])
    if ex.marked is not None:
        out.append(f"The marked cell (black square outline): {cell_name(case.layout, ex.marked)}.")
    said = (
        ("Picked (sky blue, outlined)", picked),
        (
            "Missed: in the group, not picked (green square outline)",
            verdict.missed if verdict else (),
        ),
        ("Extra: picked, not in the group (vermillion ✕)", verdict.extra if verdict else ()),
    )
    for what, idx in said:
        cells = [names[i] for i in idx if 0 <= i < len(names)]
        if cells or (what.startswith("Picked") and ex.form == "cells"):
            out.append(f"{what}, {len(cells)}: " + ("; ".join(cells) if cells else "none") + ".")
    return out


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
    if ex.colour == "groups":  # the group's number in each cell: colour is not the only signal
        text = [str(int(g)) for g in _groups(ex)]
    px = cell_px(case.shape)
    fig = Spec().add_trace(
        trace(
            "scatter",
            x=cols.tolist(),
            y=rows.tolist(),
            mode="markers+text" if text else "markers",
            text=text,
            textfont={
                "size": min(style.font_size(presenter) - 2, round(0.6 * px)),  # fits a cell
                "color": [style.ink(f) for f in fill],
            },
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
            trace(
                "scatter",
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
    # column labels stacked ("H0" over "W1") and level: slanted labels of neighbouring
    # columns overlap each other's boxes
    col_text = [
        _axis_text(col_axes, np.unravel_index(c, case.shape[2:])).replace(" ", "<br>")
        for c in range(n_cols)
    ]
    fig.update_layout(
        xaxis={
            "title": {"text": "·".join(col_axes)},
            "range": [-0.5, n_cols - 0.5],
            "tickvals": list(range(n_cols)),
            "ticktext": col_text,
            "side": "top",
            "tickangle": 0,
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
    char_px = style.font_size(presenter) * 0.6
    label_px = char_px * max(len(t) for t in row_text)
    # a legend entry is not wrapped: the figure is at least as wide as the longest one
    names = [t["name"] for t in fig.data if t.get("showlegend")]
    legend_px = max((char_px * len(n) + 60 for n in names), default=0)
    fig.update_layout(
        width=round(max(n_cols * px + label_px + 80, legend_px)),
        height=n_rows * px + FRAME_PX,
        margin={"l": round(label_px) + 50, "r": 20, "t": 70, "b": 40},
    )
    return fig.figure()


def make_tally_figure(
    rows: Sequence[TallyRow], revealed: bool, presenter: bool = False
) -> go.Figure:
    """A class's answers as horizontal bars, most frequent on top; after the reveal the
    right answer's bar is green, hatched and ticked."""
    colours = [
        RIGHT if (revealed and r.correct) else (WRONG if revealed else style.PALETTE[0])
        for r in rows
    ]
    fig = Spec().add_trace(
        trace(
            "bar",
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
        # no answers yet: no bars, so no numbers up the side either
        yaxis={"autorange": "reversed", "fixedrange": True, "showticklabels": bool(rows)},
        xaxis={
            "title": {"text": "students"},
            "fixedrange": True,
            "rangemode": "tozero",
            "tick0": 0,
            "dtick": max(1, math.ceil(max((r.count for r in rows), default=1) / 8)),
        },
    )
    style.apply(fig, presenter, height=TALLY_PX + 40 * max(len(rows), 1))
    style.top_room(fig, presenter)
    return fig.figure()
