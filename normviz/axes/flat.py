"""The flat view: the tensor unfolded to a clickable grid, the selected group outlined.

(B, T, C) unfolds to rows B·T and columns C, (N, C, H, W) to rows N·C and columns
H·W. A click on a cell selects it: every cell carries an invisible marker whose
customdata is its tensor index (`cells.cell_from_point` reads it back).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
import torch

from normviz import style
from normviz.axes import window
from normviz.axes.block import PARTITION
from normviz.axes.cells import AxesSetup, box_text, group_slices
from normviz.core import Contract
from normviz.figures.spec import Spec, trace
from normviz.knobs import Value
from normviz.layouts import LAYOUTS
from normviz.sections import Progress, Section

FLAT_MAX_ROWS = 96  # rows of the flat view before capping (cells stay ≥ 7 px tall)
FLAT_MAX_COLS = 128  # columns of the flat view before capping
FLAT_ROW_PX = (14, 30)  # row height range of the flat view, px
FLAT_MAX_HEIGHT = 640  # px of grid before rows get thinner
INTRO = "**Flat view** (click a cell to select it)"
DIM = 0.7  # opacity of the white veil over the cells outside the selected group


@dataclass(frozen=True)
class FlatLayout:
    """How the flat view unfolds a tensor: rows are the first two axes, columns the rest."""

    row_dims: tuple[int, int]
    col_dims: tuple[int, ...]


def flat_layout(layout: str) -> FlatLayout:
    """(B, T, C) -> rows B·T, columns C; (N, C, H, W) -> rows N·C, columns H·W."""
    rank = LAYOUTS[layout].rank
    return FlatLayout((0, 1), tuple(range(2, rank)))


def flat_window(
    layout: str, shape: Sequence[int], cell: Sequence[int] | None = None
) -> window.Window:
    """The part of the tensor the flat view draws (rows and columns capped separately)."""
    fl = flat_layout(layout)
    win = window.make_window(layout, shape, cell, FLAT_MAX_ROWS, [fl.row_dims])
    cols = window.make_window(layout, shape, cell, FLAT_MAX_COLS, [fl.col_dims])
    start = tuple(cols.start[d] if d in fl.col_dims else win.start[d] for d in range(len(shape)))
    size = tuple(cols.size[d] if d in fl.col_dims else win.size[d] for d in range(len(shape)))
    while math.prod(size) > style.MAX_CELLS_2D:  # only if someone lowers the 2D cap
        d = int(np.argmax(size))
        size = tuple(k // 2 if i == d else k for i, k in enumerate(size))
    return window.Window(layout, tuple(int(s) for s in shape), start, size)


def _merged(local: np.ndarray, size: tuple[int, ...], dims: Sequence[int]) -> np.ndarray:
    """Row-major position of each cell within the merged dims."""
    out = np.zeros(len(local), dtype=np.int64)
    for d in dims:
        out = out * size[d] + local[:, d]
    return out


def _flat_ticks(
    win: window.Window, dims: Sequence[int], max_ticks: int = 32, compact: bool = True
) -> dict[str, list]:
    """Ticks with real indices: every position when few, else the starts of outer blocks.

    `compact=False` (narrow columns) labels only block starts of merged axes.
    """
    axes = LAYOUTS[win.layout].axes
    n = math.prod(win.size[d] for d in dims)
    inner = math.prod(win.size[d] for d in dims[1:])
    if len(dims) > 1 and (n > max_ticks or not compact):
        step = max(1, math.ceil(win.size[dims[0]] / max_ticks))
        pos = list(range(0, n, inner * step))
        text = [f"{axes[dims[0]]}{win.start[dims[0]] + p // inner}" for p in pos]
        return {"tickvals": pos, "ticktext": text}
    pos = list(range(0, n, max(1, math.ceil(n / max_ticks))))
    text = []
    for p in pos:
        parts, rem = [], p
        for d in reversed(dims):
            rem, i = divmod(rem, win.size[d])
            parts.append(f"{axes[d]}{win.start[d] + i}" if len(dims) > 1 else str(win.start[d] + i))
        text.append(" ".join(reversed(parts)))
    return {"tickvals": pos, "ticktext": text}


def _separators(win: window.Window, dims: Sequence[int], along: str, n_other: int) -> list[dict]:
    """Thin lines between blocks of the outer merged axis (at most 64)."""
    if len(dims) < 2:
        return []
    inner = math.prod(win.size[d] for d in dims[1:])
    n_blocks = win.size[dims[0]]
    if inner == 1 or n_blocks > 64:
        return []
    lines = []
    for b in range(1, n_blocks):
        p = b * inner - 0.5
        if along == "row":
            lines.append({"type": "line", "x0": -0.5, "x1": n_other - 0.5, "y0": p, "y1": p})
        else:
            lines.append({"type": "line", "y0": -0.5, "y1": n_other - 0.5, "x0": p, "x1": p})
    for ln in lines:
        ln["line"] = {"color": style.SELECTED, "width": 1.5}
    return lines


def _runs(lo: Sequence[int], hi: Sequence[int], size: Sequence[int]) -> list[tuple[int, int]]:
    """Runs [start, stop) of merged positions covered by the box lo..hi of a few merged axes."""
    runs = [(0, 1)]  # merged position range before any axis is folded in
    for a, b, k in zip(lo, hi, size, strict=True):
        if a == 0 and b == k:  # a full inner axis keeps every run contiguous
            runs = [(r0 * k, r1 * k) for r0, r1 in runs]
        else:
            runs = [(p * k + a, p * k + b) for r0, r1 in runs for p in range(r0, r1)]
    return runs


def flat_group_rects(
    win: window.Window, box: Sequence[slice], layout: str
) -> list[tuple[int, int, int, int]]:
    """The tensor box `box` as rectangles (col0, col1, row0, row1) of the flat view's cells."""
    fl = flat_layout(layout)
    lo, hi = [], []
    for d, sl in enumerate(box):
        a = max(sl.start, win.start[d]) - win.start[d]
        b = min(sl.stop, win.start[d] + win.size[d]) - win.start[d]
        if b <= a:
            return []  # the group lies outside the drawn window
        lo.append(a)
        hi.append(b)
    rows = _runs(
        [lo[d] for d in fl.row_dims],
        [hi[d] for d in fl.row_dims],
        [win.size[d] for d in fl.row_dims],
    )
    cols = _runs(
        [lo[d] for d in fl.col_dims],
        [hi[d] for d in fl.col_dims],
        [win.size[d] for d in fl.col_dims],
    )
    return [(c0, c1, r0, r1) for r0, r1 in rows for c0, c1 in cols]


def _outline(rects: Sequence[tuple[int, int, int, int]]) -> tuple[list, list]:
    """Closed outlines of cell rectangles, None-separated, in data coordinates."""
    xs: list = []
    ys: list = []
    for c0, c1, r0, r1 in rects:
        x0, x1, y0, y1 = c0 - 0.5, c1 - 0.5, r0 - 0.5, r1 - 0.5
        xs += [x0, x1, x1, x0, x0, None]
        ys += [y0, y0, y1, y1, y0, None]
    return xs, ys


@dataclass(frozen=True)
class FlatView:
    """What the flat view draws: the window of the tensor and its values, the selection."""

    contract: Contract
    cell: tuple[int, ...]
    partition: bool
    window: window.Window
    values: np.ndarray  # float32, the window's values in row-major order


def flat_view(
    x: torch.Tensor | np.ndarray,
    con: Contract,
    cell: Sequence[int] | None = None,
    partition: bool = False,
) -> FlatView:
    """The part of `x` the flat view draws (a window around `cell`), for `con`.

    Raises:
        NormConfigError: a cell outside the tensor.
    """
    arr = x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)
    shape = tuple(int(s) for s in arr.shape)
    cell = window.check_cell(con.layout, shape, cell)
    win = flat_window(con.layout, shape, cell)
    vals = arr[win.slices()].reshape(-1).astype(np.float32)
    return FlatView(con, cell, partition, win, vals)


def make_flat_figure(
    x: torch.Tensor | np.ndarray,
    con: Contract,
    cell: Sequence[int] | None = None,
    *,
    partition: bool = False,
    presenter: bool = False,
) -> go.Figure:
    """The tensor unfolded to a grid of cells (clickable), the selected group outlined.

    Raises:
        NormConfigError: a cell outside the tensor.
    """
    return flat_figure(flat_view(x, con, cell, partition), presenter)


def flat_figure(view: FlatView, presenter: bool = False) -> go.Figure:
    """The flat view's figure.

    Rows are the first two axes (B·T or N·C), columns the rest (C or H·W). The
    colour (a heatmap, so cells fill any width) is the value of x, or in
    partition mode the statistic group. Clicks land on an invisible Scatter
    marker per cell whose customdata is the cell's tensor index.
    """
    con, cell, win, vals = view.contract, view.cell, view.window, view.values
    partition = view.partition
    layout = con.layout
    fl = flat_layout(layout)
    lay = LAYOUTS[layout]
    idx = win.indices()
    local = idx - np.asarray(win.start)
    rows = _merged(local, win.size, fl.row_dims)
    cols = _merged(local, win.size, fl.col_dims)
    n_rows = math.prod(win.size[d] for d in fl.row_dims)
    n_cols = math.prod(win.size[d] for d in fl.col_dims)
    # cells fill the chart's width (a heatmap), rows get a height that fits the page
    row_px = int(np.clip(FLAT_MAX_HEIGHT // n_rows, *FLAT_ROW_PX))
    # win.indices() is row-major over the tensor axes, and rows/cols are the first two
    # axes and the rest: so the values already lie in (row, col) order
    grid = vals.reshape(n_rows, n_cols)
    heat: dict = {"hoverinfo": "skip", "xgap": 1, "ygap": 1}
    if partition:
        ids = window.window_ids(con, win).reshape(n_rows, n_cols)
        part = window.partition_marker(ids)
        heat |= {
            "z": part["color"],
            "colorscale": part["colorscale"],
            "zmin": part["cmin"],
            "zmax": part["cmax"],
            "showscale": False,
        }
    else:
        lim = float(np.abs(vals).max()) if vals.size else 1.0
        heat |= {
            "z": grid,
            "colorscale": style.DIVERGING,
            "zmin": -lim,
            "zmax": lim,
            "colorbar": {"title": {"text": "x"}, "thickness": 14},
        }
    fig = Spec().add_trace(trace("heatmap", uid="heat", name="x", **heat))
    ids = window.window_ids(con, win).reshape(n_rows, n_cols)
    dim = {"showscale": False, "opacity": DIM, "hoverinfo": "skip", "xgap": 1, "ygap": 1}
    outside = ids != int(con.stat_ids()[cell])
    veil = np.where(outside, 1.0, np.nan).astype(np.float32)
    white = [[0, "white"], [1, "white"]]
    fig.add_trace(  # a white veil over the cells outside the group: the group stands out
        trace("heatmap", z=veil, uid="dim", name="other cells (dimmed)", colorscale=white, **dim)
    )
    fig.add_trace(
        trace(
            "scatter",
            x=window.int_array(cols),
            y=window.int_array(rows),
            mode="markers",
            uid="cells",
            name="cells",
            customdata=window.int_array(idx),
            marker={"symbol": "square", "size": row_px, "color": vals, "opacity": 0},
            selected={"marker": {"opacity": 0}},
            unselected={"marker": {"opacity": 0}},
            hovertemplate=window.hover(layout, "<br>x = %{marker.color:.3f}"),
            showlegend=False,
        )
    )
    rects = flat_group_rects(win, group_slices(con, cell), layout)
    sel = tuple(slice(i, i + 1) for i in cell)
    for uid, r, width, name in (
        (
            "group",
            rects,
            4,
            # short lines: a half-width column in presenter mode holds about 30 characters
            f"the selected cell's group<br>(m = {con.group_size:,}; the rest dimmed)",
        ),
        ("selected", flat_group_rects(win, sel, layout), 2, "selected cell"),
    ):
        ox, oy = _outline(r)
        fig.add_trace(
            trace(
                "scatter",
                x=ox,
                y=oy,
                mode="lines",
                uid=uid,
                name=name,
                line={"color": style.SELECTED, "width": width},
                hoverinfo="skip",
                showlegend=uid == "group",
            )
        )
    at = (idx == np.asarray(cell)).all(axis=1)
    mark = {"symbol": "x", "size": max(8, round(row_px * 0.7)), "color": style.SELECTED}
    fig.add_trace(  # a symbol, not a colour, names the selected cell
        trace(
            "scatter",
            x=window.int_array(cols[at]),
            y=window.int_array(rows[at]),
            mode="markers",
            uid="selected-mark",
            name="selected cell (✕)",
            marker=mark | {"line": {"color": "white", "width": 1.5}},
            hoverinfo="skip",
        )
    )
    row_ticks = _flat_ticks(win, fl.row_dims, max_ticks=16)
    row_title = "·".join(lay.axes[d] for d in fl.row_dims)
    col_title = "·".join(lay.axes[d] for d in fl.col_dims)
    blocks_of = f" (blocks of {lay.axes[fl.col_dims[-1]]})" if len(fl.col_dims) > 1 else ""
    fig.update_layout(
        xaxis={
            "title": {"text": col_title + blocks_of},
            "range": [-0.5, n_cols - 0.5],
            "showgrid": False,
            "zeroline": False,
            "side": "top",
            **_flat_ticks(win, fl.col_dims, max_ticks=24, compact=False),
        },
        yaxis={
            "title": {"text": row_title},
            "range": [n_rows - 0.5, -0.5],  # row 0 at the top, as in a matrix
            "showgrid": False,
            "zeroline": False,
            **row_ticks,
        },
        shapes=_separators(win, fl.row_dims, "row", n_cols)
        + _separators(win, fl.col_dims, "col", n_rows),
        legend={"orientation": "h", "y": 0, "yanchor": "top"},
        clickmode="event+select",
        dragmode=False,
        hovermode="closest",
    )
    window.add_note(fig, win)
    style.apply(fig, presenter)
    # room for the row labels: plotly's automargin does not always run inside Streamlit
    label_px = style.font_size(presenter) * 0.6 * max(len(t) for t in row_ticks["ticktext"])
    fig.update_layout(
        margin={"l": round(label_px) + 40, "r": 10, "t": 90 if win.capped else 60, "b": 10},
        height=n_rows * row_px + (150 if win.capped else 120),
    )
    return fig.figure()


# ---- the section --------------------------------------------------------------------


def run(setup: AxesSetup, knobs: Mapping[str, Value], progress: Progress) -> FlatView:
    return flat_view(setup.tensor(), setup.contract, setup.selected, bool(knobs["partition"]))


def alt(view: FlatView) -> list[str]:
    """The flat view in words: rows and columns, the values, the selected cell and group."""
    con, cell, win, vals = view.contract, view.cell, view.window, view.values
    lay, fl = LAYOUTS[con.layout], flat_layout(con.layout)
    rows = " · ".join(f"{lay.axes[d]} ({win.size[d]})" for d in fl.row_dims)
    cols = " · ".join(f"{lay.axes[d]} ({win.size[d]})" for d in fl.col_dims)
    ids = window.window_ids(con, win)
    mine = vals[ids == int(con.stat_ids()[cell])]
    at = int(np.flatnonzero((win.indices() == np.asarray(cell)).all(axis=1))[0])
    box = box_text(con.layout, group_slices(con, cell))
    drawn = " where drawn" if win.capped else ""
    out = [
        f"The tensor unfolded to a grid: rows {rows}, columns {cols}; "
        f"x runs from {vals.min():.3g} to {vals.max():.3g}.",
        f"The selected cell {lay.shape_text(cell)} (marked ✕) holds x = {vals[at]:.3g}. "
        f"Its group of m = {con.group_size:,} values ({box})"
        f" is outlined in black, x from {mine.min():.3g} to {mine.max():.3g}{drawn}; "
        "the other cells are dimmed.",
    ]
    groups = f"Colours show the {con.n_stats:,} statistic groups (they repeat)."
    return out + [s for s in (groups if view.partition else "", win.note()) if s]


SECTION = Section(
    slug="flat",
    label="Flat view",
    intro=INTRO,
    run=run,
    knobs=(PARTITION,),
    figure=flat_figure,
    alt=alt,
)
