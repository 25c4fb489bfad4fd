"""The 3D block: the tensor's cells, with the group behind one mean and variance lit.

Display geometry: the sample axis runs along x, the channel axis along y and
the remaining axes (T, or H·W merged as in the Group Normalization paper)
along z; with `split_hw` each image is an H×W slab and the slabs stand side by
side along x. Shapes over `style.MAX_CELLS_3D` cells are drawn through a window
around the selected cell.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from normviz import style
from normviz.axes.cells import AxesSetup
from normviz.axes.window import (
    Window,
    add_note,
    check_cell,
    hover,
    int_array,
    make_window,
    partition_marker,
    window_ids,
)
from normviz.core import Contract
from normviz.knobs import Knob, Value
from normviz.layouts import LAYOUTS
from normviz.sections import Progress, Section

INTRO = "**Block view** (drag to rotate)"
PARTITION = Knob("partition", False, label="Colour every statistic group")
SPLIT_HW = Knob("split_hw", False, label="Show H and W separately")
HELP = {
    "partition": "Partition mode: each group of cells that shares one mean and variance gets a "
    "colour (colours repeat for many groups).",
    "split_hw": "Off: H·W is one axis, as in the Group Normalization paper's figure. On: every "
    "image is an H×W slab, side by side.",
}


@dataclass(frozen=True)
class Axis3D:
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


def axes3d(layout: str, split_hw: bool) -> tuple[Axis3D, Axis3D, Axis3D]:
    """x = sample axis, y = channel axis, z = the rest (see the module docstring)."""
    lay = LAYOUTS[layout]
    s, c = lay.axes.index(lay.sample), lay.channel_axis
    rest = tuple(i for i in range(lay.rank) if i not in (s, c))
    if split_hw and len(rest) == 2:
        return Axis3D((s, rest[1]), 1), Axis3D((c,), 0), Axis3D((rest[0],), 0)
    return Axis3D((s,), 0), Axis3D((c,), 0), Axis3D(rest, 0)


def _axis_title(layout: str, shape: tuple[int, ...], ax: Axis3D) -> str:
    lay = LAYOUTS[layout]
    names = [lay.axes[d] for d in ax.dims]
    if len(names) == 1:
        a = names[0]
        return f"{a}: {lay.names[a]} ({shape[ax.dims[0]]})"
    sizes = "×".join(str(shape[d]) for d in ax.dims)
    sep = " blocks × " if ax.gap else "·"
    return f"{sep.join(names)} ({sizes})"


def _ticks(ax: Axis3D, win: Window, max_ticks: int = 8) -> dict[str, list]:
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
    con: Contract,
    cell: Sequence[int] | None = None,
    *,
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
        NormConfigError: a cell outside the tensor.
    """
    layout, shape = con.layout, con.shape
    win = make_window(layout, shape, cell, cap)
    cell = check_cell(layout, shape, cell)
    lay = LAYOUTS[layout]
    idx = win.indices()
    local = idx - np.asarray(win.start)
    ax3 = axes3d(layout, split_hw)
    x, y, z = (a.coords(local, win.size) for a in ax3)
    ids = window_ids(con, win)
    sel_id = int(con.stat_ids()[cell])
    n_max = max(a.extent(win.size) for a in ax3)
    size = int(np.clip(round(300 / n_max), 3, 16))

    def points(mask: np.ndarray, **kw) -> go.Scatter3d:
        extra = kw.pop("extra", None)
        cd = idx[mask] if extra is None else np.column_stack([idx[mask], extra[mask]])
        return go.Scatter3d(
            x=int_array(x[mask]),
            y=int_array(y[mask]),
            z=int_array(z[mask]),
            mode="markers",
            customdata=int_array(cd),
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
                marker={"size": size, "symbol": "square", "opacity": 0.9, **partition_marker(ids)},
                extra=ids,
                hovertemplate=hover(layout, "<br>group %{customdata[" + str(lay.rank) + "]}"),
            )
        )
    else:
        fig.add_trace(
            points(
                ~in_group,
                uid="others",
                name="other cells",
                marker={"size": size, "symbol": "square", "color": style.MUTED, "opacity": 0.35},
                hovertemplate=hover(layout),
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
                hovertemplate=hover(layout),
            )
        )
    sel = (idx == np.asarray(cell)).all(axis=1)
    fig.add_trace(
        points(
            sel,
            uid="selected",
            name="selected cell",
            marker={"size": size + 6, "symbol": "diamond", "color": style.SELECTED},
            hovertemplate=hover(layout),
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
    add_note(fig, win)
    return style.apply(fig, presenter, height=560)


# ---- the section --------------------------------------------------------------------


@dataclass(frozen=True)
class BlockView:
    """What the block draws: the contract, the selected cell and the two view switches."""

    contract: Contract
    cell: tuple[int, ...]
    partition: bool
    split_hw: bool


def run(setup: AxesSetup, knobs: Mapping[str, Value], progress: Progress) -> BlockView:
    return BlockView(
        setup.contract,
        setup.selected,
        bool(knobs["partition"]),
        bool(knobs["split_hw"]) and setup.contract.layout == "NCHW",
    )


def figure(view: BlockView, presenter: bool) -> go.Figure:
    return make_block_figure(
        view.contract,
        view.cell,
        partition=view.partition,
        split_hw=view.split_hw,
        presenter=presenter,
    )


SECTION = Section(
    slug="block",
    label="Block view",
    intro=INTRO,
    run=run,
    knobs=(PARTITION, SPLIT_HW),
    figure=figure,
)
