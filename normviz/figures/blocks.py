"""The tensor as a block of cells: which cells share one mean and variance.

Three drawings of the same idea, all read from `group_ids` and the contract:
a rotatable 3D block (`make_block_figure`), a clickable flat 2D view
(`make_flat_figure`) and isometric 2D thumbnails of every method side by side
(`make_methods_figure`). Large tensors are drawn through a `Window`, a box of
the tensor around the selected cell, with a note of what is left out.

Display geometry: the sample axis runs along x, the channel axis along y and
the remaining axes (T, or H·W merged as in the Group Normalization paper)
along z; with `split_hw` each image is an H×W slab and the slabs stand side by
side along x.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from normviz import style
from normviz.core import AxesArg, NormConfigError, contract, group_ids
from normviz.explore import group_slices
from normviz.layouts import LAYOUTS
from normviz.methods import METHODS, STANDARD_METHODS

# Partition colours cycle through the palette without black (black marks the selected cell).
PARTITION_COLOURS: tuple[str, ...] = tuple(c for c in style.PALETTE if c != style.SELECTED)
FLAT_MAX_ROWS = 96  # rows of the flat view before capping (cells stay ≥ 7 px tall)
FLAT_MAX_COLS = 128  # columns of the flat view before capping
FLAT_ROW_PX = (14, 30)  # row height range of the flat view, px
FLAT_MAX_HEIGHT = 640  # px of grid before rows get thinner
THUMB_LIMITS = {"sample": 4, "channel": 8, "other": 8}  # cells per display axis in a thumbnail


@dataclass(frozen=True)
class Window:
    """The box of the tensor a figure draws: a start and a size per axis."""

    layout: str
    shape: tuple[int, ...]
    start: tuple[int, ...]
    size: tuple[int, ...]

    @property
    def n_cells(self) -> int:
        return math.prod(self.size)

    @property
    def n_total(self) -> int:
        return math.prod(self.shape)

    @property
    def capped(self) -> bool:
        return self.size != self.shape

    def slices(self) -> tuple[slice, ...]:
        return tuple(slice(s, s + k) for s, k in zip(self.start, self.size, strict=True))

    def indices(self) -> np.ndarray:
        """(n_cells, rank) real tensor indices of the drawn cells, in row-major order."""
        local = np.indices(self.size).reshape(len(self.size), -1).T
        return local + np.asarray(self.start)

    def contains(self, cell: Sequence[int]) -> bool:
        return all(s <= i < s + k for i, s, k in zip(cell, self.start, self.size, strict=True))

    def note(self) -> str:
        """What the drawing leaves out, in words ("" when it draws everything)."""
        if not self.capped:
            return ""
        axes = LAYOUTS[self.layout].axes
        parts = [
            f"{a} {s}–{s + k - 1} of {n}"
            for a, s, k, n in zip(axes, self.start, self.size, self.shape, strict=True)
            if k < n
        ]
        return (
            f"Drawing {', '.join(parts)}: {self.n_cells:,} of {self.n_total:,} cells "
            "(the rest are omitted)."
        )


def _uniform_cap(sizes: list[int], cap: int) -> list[int]:
    """Cap every size at the largest k with prod(min(size, k)) ≤ cap (keeps drawings balanced)."""
    if math.prod(sizes) <= cap:
        return sizes
    lo, hi = 1, max(sizes)
    while lo < hi:  # largest k that fits
        k = (lo + hi + 1) // 2
        if math.prod(min(s, k) for s in sizes) <= cap:
            lo = k
        else:
            hi = k - 1
    return [min(s, lo) for s in sizes]


def _check_cell(layout: str, shape: tuple[int, ...], cell: Sequence[int] | None) -> tuple[int, ...]:
    if cell is None:
        return (0,) * len(shape)
    cell = tuple(int(i) for i in cell)
    if len(cell) != len(shape) or not all(0 <= i < n for i, n in zip(cell, shape, strict=True)):
        raise NormConfigError(
            f"cell {cell} is outside the tensor {LAYOUTS[layout].shape_text(shape)}: "
            "each index runs from 0 to its axis size − 1"
        )
    return cell


def make_window(
    layout: str,
    shape: Sequence[int],
    cell: Sequence[int] | None = None,
    cap: int = style.MAX_CELLS_3D,
    axis_groups: Sequence[Sequence[int]] | None = None,
) -> Window:
    """A box of at most `cap` cells per group of axes, containing `cell`, centred on it if it can.

    `axis_groups` (default: all axes together) caps each group's cell count separately,
    e.g. the rows and the columns of the flat view.
    """
    shape = tuple(int(s) for s in shape)
    cell = _check_cell(layout, shape, cell)
    groups = axis_groups or [range(len(shape))]
    sizes = list(shape)
    for g in groups:
        g = list(g)
        for d, k in zip(g, _uniform_cap([shape[d] for d in g], cap), strict=True):
            sizes[d] = k
    start = tuple(
        min(max(i - k // 2, 0), n - k) for i, k, n in zip(cell, sizes, shape, strict=True)
    )
    return Window(layout, shape, start, tuple(sizes))


def _int_array(a: np.ndarray) -> np.ndarray:
    """The smallest integer dtype that holds `a` (plotly ships typed arrays as base64)."""
    return a.astype(np.int16 if a.size == 0 or int(a.max()) < 2**15 else np.int32)


def _ids(method: str, layout: str, shape: tuple[int, ...], groups, axes, win: Window) -> np.ndarray:
    """Group ids of the window's cells, row-major (group_ids is a broadcast view: cheap)."""
    return np.asarray(group_ids(method, layout, shape, groups, axes)[win.slices()]).reshape(-1)


def partition_scale() -> list[list]:
    """A stepped colour scale: colour number k (0..len−1) draws PARTITION_COLOURS[k]."""
    n = len(PARTITION_COLOURS)
    return [[(k + edge) / n, c] for k, c in enumerate(PARTITION_COLOURS) for edge in (0, 1)]


def _partition_marker(ids: np.ndarray) -> dict:
    """Marker colours for partition mode: group id mod the palette size, on a stepped scale.

    Numbers, not colour strings: plotly validates thousands of strings slowly.
    """
    n = len(PARTITION_COLOURS)
    return {
        "color": (ids % n).astype(np.int8),
        "colorscale": partition_scale(),
        "cmin": -0.5,
        "cmax": n - 0.5,
        "showscale": False,
    }


def _hover(layout: str, extra: str = "") -> str:
    axes = LAYOUTS[layout].axes
    idx = ", ".join(f"{a}=%{{customdata[{i}]}}" for i, a in enumerate(axes))
    return f"{idx}{extra}<extra></extra>"


# ---- 3D block -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Axis3D:
    """One display direction of the block: the tensor axes merged along it."""

    dims: tuple[int, ...]  # tensor dimensions, outer first
    gap: int  # empty cells between blocks of the outer dimension (split H, W)

    def coords(self, local: np.ndarray, size: tuple[int, ...]) -> np.ndarray:
        """Display coordinate of each cell from its window-local indices (cells, rank)."""
        if len(self.dims) == 1:
            return local[:, self.dims[0]]
        outer, inner = self.dims
        return local[:, outer] * (size[inner] + self.gap) + local[:, inner]

    def extent(self, size: tuple[int, ...]) -> int:
        if len(self.dims) == 1:
            return size[self.dims[0]]
        outer, inner = self.dims
        return size[outer] * (size[inner] + self.gap) - self.gap


def _axes3d(layout: str, split_hw: bool) -> tuple[_Axis3D, _Axis3D, _Axis3D]:
    """x = sample axis, y = channel axis, z = the rest (see the module docstring)."""
    lay = LAYOUTS[layout]
    s, c = lay.axes.index(lay.sample), lay.channel_axis
    rest = tuple(i for i in range(lay.rank) if i not in (s, c))
    if split_hw and len(rest) == 2:
        return _Axis3D((s, rest[1]), 1), _Axis3D((c,), 0), _Axis3D((rest[0],), 0)
    return _Axis3D((s,), 0), _Axis3D((c,), 0), _Axis3D(rest, 0)


def _axis_title(layout: str, shape: tuple[int, ...], ax: _Axis3D) -> str:
    lay = LAYOUTS[layout]
    names = [lay.axes[d] for d in ax.dims]
    if len(names) == 1:
        a = names[0]
        return f"{a}: {lay.names[a]} ({shape[ax.dims[0]]})"
    sizes = "×".join(str(shape[d]) for d in ax.dims)
    sep = " blocks × " if ax.gap else "·"
    return f"{sep.join(names)} ({sizes})"


def _ticks(ax: _Axis3D, win: Window, max_ticks: int = 8) -> dict[str, list]:
    """Tick positions labelled with real indices (block starts for merged axes)."""
    if len(ax.dims) == 1:
        d = ax.dims[0]
        step = max(1, math.ceil(win.size[d] / max_ticks))
        pos = list(range(0, win.size[d], step))
        return {"tickvals": pos, "ticktext": [str(win.start[d] + p) for p in pos]}
    outer, inner = ax.dims
    step = max(1, math.ceil(win.size[outer] / max_ticks))
    blocks = range(0, win.size[outer], step)
    pos = [b * (win.size[inner] + ax.gap) for b in blocks]
    axes = LAYOUTS[win.layout].axes
    return {"tickvals": pos, "ticktext": [f"{axes[outer]}{win.start[outer] + b}" for b in blocks]}


def _box_edges(nx: int, ny: int, nz: int) -> tuple[list, list, list]:
    """The 12 edges of the box around cells 0..n−1 on each axis, None-separated."""
    lo = -0.5
    hx, hy, hz = nx - 0.5, ny - 0.5, nz - 0.5
    corners = [(x, y, z) for x in (lo, hx) for y in (lo, hy) for z in (lo, hz)]
    xs: list = []
    ys: list = []
    zs: list = []
    for i, a in enumerate(corners):
        for b in corners[i + 1 :]:
            if sum(p != q for p, q in zip(a, b, strict=True)) == 1:  # differ in one coordinate
                xs += [a[0], b[0], None]
                ys += [a[1], b[1], None]
                zs += [a[2], b[2], None]
    return xs, ys, zs


def make_block_figure(
    method: str,
    layout: str,
    shape: Sequence[int],
    *,
    groups: int | None = None,
    axes: AxesArg = None,
    cell: Sequence[int] | None = None,
    partition: bool = False,
    split_hw: bool = False,
    presenter: bool = False,
    cap: int = style.MAX_CELLS_3D,
) -> go.Figure:
    """A rotatable 3D block of the tensor's cells.

    Group mode highlights the cells that share the selected cell's mean and
    variance; partition mode colours every statistic group (cycling colours).
    Shapes over `cap` cells are drawn through a window around the cell.

    Raises:
        NormConfigError: invalid settings or a cell outside the tensor.
    """
    shape = tuple(int(s) for s in shape)
    con = contract(method, layout, shape, groups, axes)
    win = make_window(layout, shape, cell, cap)
    cell = _check_cell(layout, shape, cell)
    lay = LAYOUTS[layout]
    idx = win.indices()
    local = idx - np.asarray(win.start)
    ax3 = _axes3d(layout, split_hw)
    x, y, z = (a.coords(local, win.size) for a in ax3)
    ids = _ids(method, layout, shape, groups, axes, win)
    sel_id = int(group_ids(method, layout, shape, groups, axes)[cell])
    n_max = max(a.extent(win.size) for a in ax3)
    size = int(np.clip(round(300 / n_max), 3, 16))

    def points(mask: np.ndarray, **kw) -> go.Scatter3d:
        extra = kw.pop("extra", None)
        cd = idx[mask] if extra is None else np.column_stack([idx[mask], extra[mask]])
        return go.Scatter3d(
            x=_int_array(x[mask]),
            y=_int_array(y[mask]),
            z=_int_array(z[mask]),
            mode="markers",
            customdata=_int_array(cd),
            **kw,
        )

    fig = go.Figure()
    in_group = ids == sel_id
    if partition:
        fig.add_trace(
            points(
                np.ones_like(in_group),
                uid="partition",
                name=f"{con.n_stats:,} statistic groups",
                marker={"size": size, "symbol": "square", "opacity": 0.9, **_partition_marker(ids)},
                extra=ids,
                hovertemplate=_hover(layout, "<br>group %{customdata[" + str(lay.rank) + "]}"),
            )
        )
    else:
        fig.add_trace(
            points(
                ~in_group,
                uid="others",
                name="other cells",
                marker={"size": size, "symbol": "square", "color": style.MUTED, "opacity": 0.35},
                hovertemplate=_hover(layout),
            )
        )
        fig.add_trace(
            points(
                in_group,
                uid="group",
                name=f"share μ, σ² with the selected cell (m = {con.group_size:,})",
                marker={
                    "size": size,
                    "symbol": "square",
                    "color": style.HIGHLIGHT,
                    "opacity": 0.95,
                },
                hovertemplate=_hover(layout),
            )
        )
    sel = (idx == np.asarray(cell)).all(axis=1)
    fig.add_trace(
        points(
            sel,
            uid="selected",
            name="selected cell",
            marker={"size": size + 6, "symbol": "diamond", "color": style.SELECTED},
            hovertemplate=_hover(layout),
        )
    )
    ex, ey, ez = _box_edges(*(a.extent(win.size) for a in ax3))
    fig.add_trace(
        go.Scatter3d(
            x=ex,
            y=ey,
            z=ez,
            mode="lines",
            uid="outline",
            line={"color": style.BEFORE, "width": 2},
            hoverinfo="skip",
            showlegend=False,
        )
    )
    extents = [a.extent(win.size) for a in ax3]
    ratio = [max(0.5, e / max(extents)) for e in extents]
    scale = 1.5 / math.hypot(*ratio)  # same on-screen size for cubes and slabs
    ratio = [r * scale for r in ratio]
    scene_axes = {
        name: {
            "title": {"text": _axis_title(layout, shape, a)},
            "range": [-0.7, e - 0.3],
            "showbackground": False,
            "tickfont": {"size": style.font_size(presenter) - 3},
            **_ticks(a, win),
        }
        for name, a, e in zip(("xaxis", "yaxis", "zaxis"), ax3, extents, strict=True)
    }
    title = f"{con.method_obj.label}: " + (
        f"{con.n_stats:,} groups of {con.group_size:,} values"
        if partition
        else f"the {con.group_size:,} values behind one μ and σ²"
    )
    fig.update_layout(
        title={"text": title},
        scene={
            **scene_axes,
            "aspectmode": "manual",
            "aspectratio": dict(zip("xyz", ratio, strict=True)),
            "camera": {"eye": {"x": 1.45, "y": -1.4, "z": 0.75}},
        },
        legend={"orientation": "h", "y": -0.02, "yanchor": "top"},
        uirevision=f"{layout}{shape}{split_hw}",  # keep the user's rotation across reruns
    )
    _note(fig, win)
    return style.apply(fig, presenter, height=560)


def _note(fig: go.Figure, win: Window) -> None:
    if win.capped:
        fig.add_annotation(
            text=win.note().replace(": ", ":<br>", 1),
            xref="paper",
            yref="paper",
            x=0,
            y=1.0,
            yanchor="bottom",
            xanchor="left",
            showarrow=False,
            font={"color": style.BEFORE},
        )


# ---- flat 2D view -------------------------------------------------------------------


@dataclass(frozen=True)
class FlatLayout:
    """How the flat view unfolds a tensor: rows are the first two axes, columns the rest."""

    row_dims: tuple[int, int]
    col_dims: tuple[int, ...]


def flat_layout(layout: str) -> FlatLayout:
    """(B, T, C) -> rows B·T, columns C; (N, C, H, W) -> rows N·C, columns H·W."""
    rank = LAYOUTS[layout].rank
    return FlatLayout((0, 1), tuple(range(2, rank)))


def flat_window(layout: str, shape: Sequence[int], cell: Sequence[int] | None = None) -> Window:
    """The part of the tensor the flat view draws (rows and columns capped separately)."""
    fl = flat_layout(layout)
    win = make_window(layout, shape, cell, FLAT_MAX_ROWS, [fl.row_dims])
    cols = make_window(layout, shape, cell, FLAT_MAX_COLS, [fl.col_dims])
    start = tuple(cols.start[d] if d in fl.col_dims else win.start[d] for d in range(len(shape)))
    size = tuple(cols.size[d] if d in fl.col_dims else win.size[d] for d in range(len(shape)))
    while math.prod(size) > style.MAX_CELLS_2D:  # only if someone lowers the 2D cap
        d = int(np.argmax(size))
        size = tuple(k // 2 if i == d else k for i, k in enumerate(size))
    return Window(layout, tuple(int(s) for s in shape), start, size)


def _merged(local: np.ndarray, size: tuple[int, ...], dims: Sequence[int]) -> np.ndarray:
    """Row-major position of each cell within the merged dims."""
    out = np.zeros(len(local), dtype=np.int64)
    for d in dims:
        out = out * size[d] + local[:, d]
    return out


def _flat_ticks(
    win: Window, dims: Sequence[int], max_ticks: int = 32, compact: bool = True
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


def _separators(win: Window, dims: Sequence[int], along: str, n_other: int) -> list[dict]:
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
    win: Window, box: Sequence[slice], layout: str
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


def make_flat_figure(
    x: torch.Tensor | np.ndarray,
    method: str,
    layout: str,
    *,
    groups: int | None = None,
    axes: AxesArg = None,
    cell: Sequence[int] | None = None,
    partition: bool = False,
    presenter: bool = False,
) -> go.Figure:
    """The tensor unfolded to a grid of cells (clickable), the selected group outlined.

    Rows are the first two axes (B·T or N·C), columns the rest (C or H·W). The
    colour (a heatmap, so cells fill any width) is the value of x, or in
    partition mode the statistic group. Clicks land on an invisible Scatter
    marker per cell whose customdata is the cell's tensor index.

    Raises:
        NormConfigError: invalid settings or a cell outside the tensor.
    """
    arr = x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)
    shape = tuple(int(s) for s in arr.shape)
    con = contract(method, layout, shape, groups, axes)
    cell = _check_cell(layout, shape, cell)
    win = flat_window(layout, shape, cell)
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
    vals = arr[win.slices()].reshape(-1).astype(np.float32)
    # win.indices() is row-major over the tensor axes, and rows/cols are the first two
    # axes and the rest: so the values already lie in (row, col) order
    grid = vals.reshape(n_rows, n_cols)
    heat: dict = {"hoverinfo": "skip", "xgap": 1, "ygap": 1}
    if partition:
        ids = _ids(method, layout, shape, groups, axes, win).reshape(n_rows, n_cols)
        part = _partition_marker(ids)
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
    fig = go.Figure(go.Heatmap(uid="heat", name="x", **heat))
    fig.add_trace(
        go.Scatter(
            x=_int_array(cols),
            y=_int_array(rows),
            mode="markers",
            uid="cells",
            name="cells",
            customdata=_int_array(idx),
            marker={"symbol": "square", "size": row_px, "color": vals, "opacity": 0},
            selected={"marker": {"opacity": 0}},
            unselected={"marker": {"opacity": 0}},
            hovertemplate=_hover(layout, "<br>x = %{marker.color:.3f}"),
            showlegend=False,
        )
    )
    rects = flat_group_rects(win, group_slices(con, cell), layout)
    sel = tuple(slice(i, i + 1) for i in cell)
    for uid, r, colour, width, name in (
        (
            "group",
            rects,
            style.SELECTED if partition else style.HIGHLIGHT,  # orange is a partition colour
            3,
            f"shares μ, σ² with the selected cell (m = {con.group_size:,})",
        ),
        ("selected", flat_group_rects(win, sel, layout), style.SELECTED, 4, "selected cell"),
    ):
        ox, oy = _outline(r)
        fig.add_trace(
            go.Scatter(
                x=ox,
                y=oy,
                mode="lines",
                uid=uid,
                name=name,
                line={
                    "color": colour,
                    "width": width,
                    "dash": "dot" if partition and uid == "group" else "solid",
                },
                hoverinfo="skip",
            )
        )
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
            **_flat_ticks(win, fl.row_dims, max_ticks=16),
        },
        shapes=_separators(win, fl.row_dims, "row", n_cols)
        + _separators(win, fl.col_dims, "col", n_rows),
        legend={"orientation": "h", "y": 0, "yanchor": "top"},
        clickmode="event+select",
        dragmode=False,
        hovermode="closest",
    )
    _note(fig, win)
    style.apply(fig, presenter)
    # room for the row labels: plotly's automargin does not always run inside Streamlit
    label_px = style.font_size(presenter) * 0.6 * max(len(t) for t in fig.layout.yaxis.ticktext)
    fig.update_layout(
        margin={"l": round(label_px) + 40, "r": 10, "t": 90 if win.capped else 60, "b": 10},
        height=n_rows * row_px + (150 if win.capped else 120),
    )
    return fig


# ---- isometric thumbnails of every method -------------------------------------------


def _iso(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Isometric projection seen from (+x, +y, +z): the x, y and z = max faces are visible."""
    c, s = math.cos(math.pi / 6), math.sin(math.pi / 6)
    return (x - y) * c, z - (x + y) * s


def _face_polygons(n: tuple[int, int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Visible face cells of an nx×ny×nz block: their display indices and 2D quads.

    Display index 0 on every axis sits at the visible corner, so a group that
    contains cell (0, 0, 0) always lies on the visible faces.
    Returns (cells (k, 3) display indices, quads (k, 4, 2) projected corners).
    """
    cells, quads = [], []
    # each face: cells with one display index 0, the corner of each cell on that face
    for face in range(3):
        a, b = [d for d in range(3) if d != face]
        ia, ib = np.meshgrid(np.arange(n[a]), np.arange(n[b]), indexing="ij")
        ia, ib = ia.ravel(), ib.ravel()
        idx = np.zeros((ia.size, 3), dtype=np.int64)
        idx[:, a], idx[:, b] = ia, ib
        corners = []
        for da, db in ((0, 0), (1, 0), (1, 1), (0, 1)):
            p = np.zeros((ia.size, 3))
            # coordinate = n − index (index 0 at the max face), the face plane at its max
            p[:, face] = n[face]
            p[:, a] = n[a] - ia - da
            p[:, b] = n[b] - ib - db
            corners.append(np.stack(_iso(p[:, 0], p[:, 1], p[:, 2]), axis=1))
        cells.append(idx)
        quads.append(np.stack(corners, axis=1))
    return np.concatenate(cells), np.concatenate(quads)


def _poly_xy(quads: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Closed quads as one NaN-separated path (one filled trace per colour).

    Plotly breaks a line at NaN as at None, and `fill="toself"` closes each piece
    on its own; a float array goes out as one typed array instead of thousands of
    validated Python numbers.
    """
    n = len(quads)
    path = np.full((n, 6, 2), np.nan)
    path[:, :4] = quads
    path[:, 4] = quads[:, 0]  # back to the first corner
    path = np.round(path, 3).reshape(-1, 2)
    return path[:, 0], path[:, 1]


def _thumb_window(layout: str, shape: tuple[int, ...]) -> Window:
    lay = LAYOUTS[layout]
    s = lay.axes.index(lay.sample)
    role = {s: "sample", lay.channel_axis: "channel"}
    # T alone gets the whole "other" budget; H and W share one display axis (H·W), 4 each
    other = THUMB_LIMITS["other"] if lay.rank == 3 else THUMB_LIMITS["other"] // 2
    size = tuple(min(n, THUMB_LIMITS[role[d]] if d in role else other) for d, n in enumerate(shape))
    return Window(layout, shape, (0,) * len(shape), size)


def thumbnail_cells(
    method: str, layout: str, shape: Sequence[int], groups: int | None = None, axes: AxesArg = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Tensor indices of the visible thumbnail cells, whether each shares cell 0's group, quads."""
    shape = tuple(int(s) for s in shape)
    win = _thumb_window(layout, shape)
    ax3 = _axes3d(layout, split_hw=False)
    n = tuple(a.extent(win.size) for a in ax3)
    disp, quads = _face_polygons(n)  # type: ignore[arg-type]
    # display index -> tensor index (window starts at 0)
    idx = np.zeros((len(disp), len(shape)), dtype=np.int64)
    for k, a in enumerate(ax3):
        rem = disp[:, k]
        for d in reversed(a.dims):
            rem, idx[:, d] = np.divmod(rem, win.size[d])
    ids = group_ids(method, layout, shape, groups, axes)
    in_group = ids[tuple(idx.T)] == ids[(0,) * len(shape)]
    return idx, in_group, quads


def make_methods_figure(
    layout: str,
    shape: Sequence[int],
    groups: int | None = None,
    methods: Sequence[str] = STANDARD_METHODS,
    presenter: bool = False,
    height: int = 300,
) -> go.Figure:
    """Isometric thumbnails of the block, one subplot per method, cell 0's group highlighted.

    Small multiples in 2D (no WebGL context each); large shapes show their first
    few cells per axis. GroupNorm with C not divisible by `groups` shows why
    instead of a drawing.
    """
    shape = tuple(int(s) for s in shape)
    fig = make_subplots(
        rows=1,
        cols=len(methods),
        subplot_titles=[METHODS[m].label for m in methods],
        horizontal_spacing=0.02,
    )
    win = _thumb_window(layout, shape)
    for col, m in enumerate(methods, start=1):
        g = groups if METHODS[m].grouped else None
        try:
            con = contract(m, layout, shape, g)
            _, in_group, quads = thumbnail_cells(m, layout, shape, g)
        except NormConfigError as e:
            fig.add_annotation(
                text=str(e).split(". ")[0].replace(": ", ":<br>"),
                row=1,
                col=col,
                x=0,
                y=0,
                showarrow=False,
                font={"size": style.font_size(presenter) - 4},
            )
            continue
        for mask, colour, name in (
            (~in_group, style.MUTED, "other cells"),
            (in_group, style.METHOD_COLOURS[m], f"{con.method_obj.label}: one μ, σ²"),
        ):
            xs, ys = _poly_xy(quads[mask])
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=ys,
                    mode="lines",
                    fill="toself",
                    fillcolor=colour,
                    line={"color": "white", "width": 1},
                    name=name,
                    uid=f"{m}-{'group' if colour != style.MUTED else 'others'}",
                    hoverinfo="skip",
                    showlegend=False,
                ),
                row=1,
                col=col,
            )
    # hidden axes, equal scale inside every thumbnail: one layout update for all of them
    fig.update_layout(
        {f"xaxis{i if i > 1 else ''}": {"visible": False} for i in range(1, len(methods) + 1)}
        | {
            f"yaxis{i if i > 1 else ''}": {
                "visible": False,
                "scaleanchor": f"x{i if i > 1 else ''}",
                "scaleratio": 1,
            }
            for i in range(1, len(methods) + 1)
        }
    )
    lay = LAYOUTS[layout]
    sizes = ", ".join(f"{a}={n}" for a, n in zip(lay.axes, shape, strict=True))
    caption = f"{lay.key} {sizes}; each block: {lay.sample} across, {lay.channel} in depth, "
    caption += "·".join(a for a in lay.axes if a not in (lay.sample, lay.channel)) + " up"
    if win.capped:
        caption += " (first cells only)"
    fig.add_annotation(
        text=caption,
        xref="paper",
        yref="paper",
        x=0.5,
        y=-0.02,
        yanchor="top",
        showarrow=False,
        font={"color": style.BEFORE, "size": style.font_size(presenter) - 2},
    )
    style.apply(fig, presenter, height=height)
    fig.update_layout(margin={"l": 10, "r": 10, "t": 40, "b": 40})
    return fig


__all__ = [
    "PARTITION_COLOURS",
    "FlatLayout",
    "Window",
    "flat_layout",
    "flat_window",
    "make_block_figure",
    "make_flat_figure",
    "make_methods_figure",
    "make_window",
    "thumbnail_cells",
]
