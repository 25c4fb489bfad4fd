"""What the tensor grid (ui/tensorgrid.py) ships to the browser, once per server run.

The grid unfolds a tensor as the flat view does: rows are the first two axes (B·T or
N·C), columns the rest (C or H·W), drawn through the flat view's window around the
selected cell. With every cell it ships its value, its colour, its statistic group
(a small local number) and, once per group, the group's μ and σ² from the same exact
reduction the page shows (`apply_contract`): the browser then answers "which cells
share this cell's statistics, and what is its y?" on hover, focus or tap, without
asking the server. A pick (click, tap, Enter) goes back to Python as the cell's index.

    grid = axes_grid(setup, {"partition": False})  # an AxesSetup, as every section runs on
    grid.payload()  # the JSON the component receives
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import torch
from plotly.colors import sample_colorscale, unlabel_rgb

from normviz import style
from normviz.axes import flat, window
from normviz.axes.block import PARTITION
from normviz.axes.cells import AxesSetup, box_text, group_slices
from normviz.core import Refusal, apply_contract
from normviz.knobs import Value
from normviz.layouts import LAYOUTS
from normviz.practice import grid as pgrid
from normviz.practice.common import Exercise, Verdict
from normviz.sections import Progress, Section

INTRO = "**Flat view** (click a cell to select it)"
VALUE_STEPS = 33  # colours of the diverging value scale (odd: 0 has its own, white)
PICK_MODES = ("one", "many", "none")  # a pick selects one cell, toggles cells, or nothing
AXES_LEGEND = (
    "✕ marks the selected cell; its group is at full colour, outlined, the rest faded. "
    "Hover, tap or move with the arrow keys to see any cell's group and numbers; click, "
    "tap or press Enter to select it."
)
PICK_LEGEND = (
    "Click or tap a cell (or move with the arrow keys and press Enter) to pick or unpick it."
)
# the marks' colours, as the practice figures had them (style.py holds every colour)
MARK_COLOURS = {
    "selected": style.SELECTED,
    "picked": pgrid.PICKED,
    "missed": pgrid.MISSED,
    "extra": pgrid.EXTRA,
}
MARK_WORDS = {
    "marked": "black outline: the marked cell",
    "picked": "sky blue: picked",
    "missed": "green outline: missed (in the group, not picked)",
    "extra": "vermillion ✕: extra (picked, not in the group)",
}


@dataclass(frozen=True)
class Grouping:
    """One way the drawn cells share μ and σ² (one method): each cell's group, and once per
    group its μ and σ². A grid that works out two methods at once carries two (the worked
    example: BatchNorm's columns and LayerNorm's rows); the browser lights and fills in both.
    """

    group: tuple[int, ...]  # per cell: its group, 0, 1, … in order of first appearance
    mean: tuple[float | None, ...] = ()  # per group: μ (None for RMSNorm's groups)
    var: tuple[float, ...] = ()  # per group: σ², or the mean square when not centred
    m: int = 0  # values per group (every group of a contract has as many)
    name: str = ""  # the method, when a grid carries more than one ("BatchNorm")
    noun: str = "group"  # what one group is ("column"), numbered from 1 in the panel
    colour: str = ""  # the outline of its lit group ("": the text colour)

    def payload(self) -> dict:
        return {
            "group": list(self.group),
            "mean": [None if v is None else float(v) for v in self.mean],
            "var": [float(v) for v in self.var],
            "m": self.m,
            "name": self.name,
            "noun": self.noun,
            "colour": self.colour,
        }


NO_GROUPS = Grouping(group=())


@dataclass(frozen=True)
class Grid:
    """The tensor grid's data: the drawn window of a tensor, its colours and its groups.

    Cells are numbered row-major within the window (`size`); `start` places the
    window in the whole tensor (`shape`). Per-group lists are indexed by `group`.
    """

    layout: str  # a layout's key ("" with `dims`)
    shape: tuple[int, ...]  # the whole tensor
    start: tuple[int, ...]  # the drawn window: its first index per axis
    size: tuple[int, ...]  # ... and its size per axis
    palette: tuple[str, ...]  # "#RRGGBB" colours the cells use
    fill: tuple[int, ...]  # per cell: an index into `palette`
    label: str  # what the grid shows, for its ARIA label ("BatchNorm on (4, 6, 8)")
    pick: str = "one"  # one of PICK_MODES
    values: tuple[float, ...] = ()  # per cell: x (empty: values not shown)
    text: tuple[str, ...] = ()  # per cell: a short label drawn inside it (empty: none)
    groupings: tuple[Grouping, ...] = ()  # how cells share statistics (empty: not shown)
    eps: float = 1e-5
    selected: int | None = None  # the selected cell (pick="one"), a window index
    picked: tuple[int, ...] = ()  # the picked cells (pick="many"), window indices
    marks: tuple[tuple[str, tuple[int, ...]], ...] = ()  # (marked|missed|extra, cells)
    note: str = ""  # what the window leaves out ("" when everything is drawn)
    legend: str = ""  # what the marks mean and what a pick does, under the grid
    alt: tuple[str, ...] = field(default=(), compare=False)  # the grid in sentences
    # the axes' names when they are words, not a layout's letters (("row", "column")): cells
    # are then named "row 1, column 2", counted from 1 as the page's words count them
    dims: tuple[str, ...] = ()

    @property
    def axes(self) -> tuple[str, ...]:
        return self.dims or LAYOUTS[self.layout].axes

    @property
    def n_cells(self) -> int:
        return math.prod(self.size)

    def cell(self, i: int) -> tuple[int, ...]:
        """The tensor index of window cell `i`."""
        local = np.unravel_index(int(i), self.size)
        return tuple(int(s + k) for s, k in zip(self.start, local, strict=True))

    def index(self, cell: Sequence[int]) -> int | None:
        """The window index of tensor cell `cell`, or None when it is not drawn."""
        local = [int(i) - s for i, s in zip(cell, self.start, strict=True)]
        if len(local) != len(self.size) or not all(
            0 <= k < n for k, n in zip(local, self.size, strict=True)
        ):
            return None
        return int(np.ravel_multi_index(local, self.size))

    def payload(self) -> dict:
        """The JSON the component receives; `sig` changes only when the drawing does (the
        browser rebuilds its cells then, and otherwise only moves the selection)."""
        body = {
            "axes": list(self.axes),
            "words": bool(self.dims),
            "shape": list(self.shape),
            "start": list(self.start),
            "size": list(self.size),
            "rowDims": min(2, len(self.shape) - 1),  # rows: B·T or N·C (a matrix's rows)
            "palette": list(self.palette),
            "ink": [style.ink(c) for c in self.palette],
            "fill": list(self.fill),
            "label": self.label,
            "pick": self.pick,
            "values": [float(v) for v in self.values],
            "text": list(self.text),
            # the first grouping's fields at the top (as a grid with one has them), the rest
            **(self.groupings or (NO_GROUPS,))[0].payload(),
            "more": [g.payload() for g in self.groupings[1:]],
            "eps": self.eps,
            "marks": {k: list(v) for k, v in self.marks},
            "note": self.note,
            "legend": self.legend,
            "colours": MARK_COLOURS,
        }
        sig = hashlib.sha1(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]
        return body | {"sig": sig, "selected": self.selected, "picked": list(self.picked)}


def _hex(rgb: str) -> str:
    return "#" + "".join(f"{round(float(c)):02X}" for c in unlabel_rgb(rgb))


VALUE_PALETTE: tuple[str, ...] = tuple(
    _hex(c) for c in sample_colorscale(style.DIVERGING, np.linspace(0, 1, VALUE_STEPS).tolist())
)


def value_fill(values: np.ndarray) -> tuple[int, ...]:
    """Each value's step of the diverging scale, symmetric around 0 (as the flat view)."""
    lim = float(np.abs(values).max()) if values.size else 0.0
    if not lim > 0 or not math.isfinite(lim):
        return (VALUE_STEPS // 2,) * values.size
    pos = (np.clip(values / lim, -1, 1) + 1) / 2 * (VALUE_STEPS - 1)
    return tuple(int(k) for k in np.rint(np.nan_to_num(pos, nan=VALUE_STEPS // 2)))


def local_groups(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(each cell's local group 0, 1, … in order of first appearance, each group's first cell)."""
    _, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    order = np.argsort(first)  # local number -> unique id
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return rank[inverse.reshape(-1)], first[order]


def _cell_stats(
    x: torch.Tensor, setup: AxesSetup, win: window.Window
) -> tuple[np.ndarray | None, np.ndarray] | None:
    """μ (None when not centred) and σ² at every window cell; None when torch refuses."""
    con = setup.contract
    try:
        res = apply_contract(x, con, eps=setup.eps)
    except Refusal:  # one value per statistic: the group section says why
        return None
    sl = win.slices()
    var = res.var.expand(con.shape)[sl].reshape(-1).double().numpy()
    mean = None if res.mean is None else res.mean.expand(con.shape)[sl].reshape(-1).double()
    return (None if mean is None else mean.numpy()), var


def axes_grid(setup: AxesSetup, knobs: Mapping[str, Value]) -> Grid:
    """The Axis Explorer's grid: the flat view's window, x, the groups and their μ and σ²."""
    x = setup.tensor()
    con = setup.contract
    view = flat.flat_view(x, con, setup.selected, bool(knobs.get("partition", False)))
    win = view.window
    ids = window.window_ids(con, win)
    group, first = local_groups(ids)
    vals = view.values.astype(np.float64)
    if view.partition:
        n = len(window.PARTITION_COLOURS)
        palette, fill = window.PARTITION_COLOURS, tuple(int(i % n) for i in ids)
    else:
        palette, fill = VALUE_PALETTE, value_fill(vals)
    stats = _cell_stats(x, setup, win)
    mean: tuple[float | None, ...] = ()
    var: tuple[float, ...] = ()
    if stats is not None:
        mu, sq = stats
        var = tuple(float(sq[i]) for i in first)
        mean = tuple(None if mu is None else float(mu[i]) for i in first)
    grid = Grid(
        layout=con.layout,
        shape=con.shape,
        start=win.start,
        size=win.size,
        palette=tuple(palette),
        fill=fill,
        label=f"{con.method_obj.label} on {con.layout_obj.shape_text(con.shape)}",
        values=tuple(float(v) for v in vals),
        groupings=(Grouping(tuple(int(g) for g in group), mean, var, con.group_size),),
        eps=float(setup.eps),
        note=win.note(),
        legend=AXES_LEGEND,
        alt=tuple(axes_alt(view)),
    )
    return grid_with_selection(grid, setup.selected)


def axes_alt(view: flat.FlatView) -> list[str]:
    """The flat view's grid in words: rows, columns, values, the selected cell and group."""
    con, cell, win, vals = view.contract, view.cell, view.window, view.values
    lay, fl = LAYOUTS[con.layout], flat.flat_layout(con.layout)
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


def grid_with_selection(grid: Grid, cell: Sequence[int]) -> Grid:
    """`grid` with `cell` (a tensor index) selected (None when it is not drawn)."""
    return replace(grid, selected=grid.index(cell))


def run(setup: AxesSetup, knobs: Mapping[str, Value], progress: Progress) -> Grid:
    return axes_grid(setup, knobs)


SECTION = Section(slug="grid", label="Flat view", intro=INTRO, run=run, knobs=(PARTITION,))


# ---- the practice page's grids ----------------------------------------------------------


def exercise_grid(
    ex: Exercise, picked: Sequence[int] = (), verdict: Verdict | None = None, open_: bool = False
) -> Grid:
    """An exercise's tensor as the grid: its colours and labels as the exercise shows them
    (groups, values or none), the marked cell, the picked cells and, once graded, the
    missed and extra ones. `open_`: cells can be picked (an open "cells" answer).

    No μ or σ² ships (they would give away the answer to compute), and the groups ship
    only where the exercise colours them (naming the method from the pattern).
    """
    case = ex.case
    assert case is not None, "an exercise without a tensor has no grid"
    n = ex.n_cells
    palette = (*pgrid.GROUP_COLOURS, style.MUTED)
    # numbered 1, 2, … in order of appearance, as the exercise's words number them
    groups = local_groups(case.ids().reshape(-1))[0] + 1 if ex.colour == "groups" else None
    if groups is not None:
        fill = tuple(int(g - 1) % len(pgrid.GROUP_COLOURS) for g in groups)
        text = tuple(str(int(g)) for g in groups)
    else:
        fill = (len(palette) - 1,) * n
        text = tuple(f"{v:g}" for v in ex.values) if ex.colour == "values" else ()
    marks = [("marked", (ravel(ex.marked, case.shape),))] if ex.marked is not None else []
    if verdict is not None:
        marks += [("missed", tuple(verdict.missed)), ("extra", tuple(verdict.extra))]
    said = [k for k, cells in marks if cells] + (["picked"] if picked else [])
    words = "; ".join(MARK_WORDS[k] for k in MARK_WORDS if k in said)
    legend = " ".join(
        w for w in ((words + ".") if words else "", PICK_LEGEND if open_ else "") if w
    )
    return Grid(
        layout=case.layout,
        shape=tuple(case.shape),
        start=(0,) * len(case.shape),
        size=tuple(case.shape),
        palette=palette,
        fill=fill,
        label=f"The exercise's tensor {LAYOUTS[case.layout].shape_text(tuple(case.shape))}",
        pick="many" if open_ else "none",
        values=tuple(float(v) for v in ex.values) if ex.colour == "values" else (),
        text=text,
        groupings=()
        if groups is None
        else (Grouping(tuple(int(g - 1) for g in groups), m=case.group_size),),
        picked=tuple(sorted(i for i in picked if 0 <= i < n)),
        marks=tuple(marks),
        legend=legend[:1].upper() + legend[1:],
        alt=tuple(pgrid.grid_alt(ex, picked, verdict)),
    )


def ravel(cell: Sequence[int], shape: Sequence[int]) -> int:
    return int(np.ravel_multi_index(tuple(cell), tuple(shape)))
