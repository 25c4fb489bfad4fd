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
from normviz.axes import solid
from normviz.axes.cells import AxesSetup, box_text, group_slices
from normviz.axes.window import (
    PARTITION_COLOURS,
    Window,
    add_note,
    check_cell,
    hover,
    int_array,
    make_window,
    partition_marker,
    partition_scale,
    window_ids,
)
from normviz.core import Contract
from normviz.figures.spec import Spec, trace
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
    """The letter and the size ("T (6)"): the axes' names are in the page's cell inputs
    just above; written out here ("T: tokens (6)") two titles met at the block's corner."""
    lay = LAYOUTS[layout]
    names = [lay.axes[d] for d in ax.dims]
    if len(names) == 1:
        return f"{names[0]} ({shape[ax.dims[0]]})"
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


def make_block_figure(
    con: Contract,
    cell: Sequence[int] | None = None,
    *,
    partition: bool = False,
    split_hw: bool = False,
    presenter: bool = False,
    cap: int = style.MAX_CELLS_3D,
) -> go.Figure:
    """A rotatable 3D block of the tensor's cells, drawn as solid cubes with edges.

    The selected cell's statistic group is opaque and coloured, every other cell
    faint (grey; in partition mode, each group in its own colour), and the selected
    cell a black cube with a thick black outline (with three black lines through it
    when its group hides it on every side). Shapes over `cap` cells are drawn
    through a window around the cell. Invisible markers at the cell centres carry
    each cell's tensor index (and group id); the solids carry the hover text.

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
    extents = [a.extent(win.size) for a in ax3]
    in_group = ids == sel_id
    sel = (idx == np.asarray(cell)).all(axis=1)
    at = (int(x[sel][0]), int(y[sel][0]), int(z[sel][0]))
    n_colours = len(PARTITION_COLOURS)
    grid = np.full(extents, solid.EMPTY, dtype=np.int8)
    grid[x, y, z] = (ids % n_colours) if partition else 0
    group = np.zeros(extents, dtype=bool)
    group[x[in_group], y[in_group], z[in_group]] = True

    def points(mask: np.ndarray, **kw) -> dict:
        """Invisible markers at the cell centres: each cell's tensor index, as data."""
        extra = kw.pop("extra", None)
        cd = idx[mask] if extra is None else np.column_stack([idx[mask], extra[mask]])
        marker = {"size": 4, "opacity": 0, "color": style.SELECTED} | kw.pop("marker", {})
        return trace(
            "scatter3d",
            x=int_array(x[mask]),
            y=int_array(y[mask]),
            z=int_array(z[mask]),
            mode="markers",
            customdata=int_array(cd),
            marker=marker,
            showlegend=False,
            **kw,
        )

    cut = solid.cutaway(group, at)
    solid_part = group & ~cut
    faces = solid.boundary_faces(grid, solid_part)
    mine = (faces.cells == np.asarray(at)).all(axis=1)
    shell = solid.boundary_faces(grid, ~group, against=np.ones_like(group))
    cut_faces = solid.boundary_faces(grid, cut, against=group)
    box = box_text(layout, group_slices(con, cell))
    says = {
        "others": "another statistic group" if partition else "not in the selected cell's group",
        "group": f"the selected cell's group: m = {con.group_size:,} values ({box})",
        "selected": f"the selected cell {lay.shape_text(cell)}",
    }
    group_colour = PARTITION_COLOURS[sel_id % n_colours] if partition else style.HIGHLIGHT
    fig = Spec()
    if partition:
        fig.add_trace(
            solid.trace(
                shell,
                "others-solid",
                says["others"],
                intensity=solid.face_values(shell, grid),
                intensitymode="cell",
                colorscale=partition_scale(),
                cmin=-0.5,
                cmax=n_colours - 0.5,
                showscale=False,
                opacity=solid.FAINT[True],
            )
        )
    else:
        fig.add_trace(
            solid.trace(
                shell,
                "others-solid",
                says["others"],
                color=style.BEFORE,
                opacity=solid.FAINT[False],
            )
        )
    if cut.any():  # the part of the group cut open in front of the selected cell
        fig.add_trace(
            solid.trace(
                cut_faces, "group-cut", says["group"], color=group_colour, opacity=solid.FAINT[True]
            )
        )
    fig.add_trace(
        solid.trace(
            faces.subset(~mine), "group-solid", says["group"], color=group_colour, opacity=1.0
        )
    )
    if mine.any():
        fig.add_trace(
            solid.trace(
                faces.subset(mine), "selected-solid", says["selected"], color=style.SELECTED
            )
        )
    cell_px = 360 / max(extents)  # about a cell's width on screen at the default zoom
    fig.add_trace(solid.lines(solid.edges(shell), "others-edges", style.EDGE, 1))
    fig.add_trace(solid.lines(solid.edges(faces.subset(~mine)), "group-edges", "white", 2))
    width = float(np.clip(cell_px / 5, 2, 6))  # thick, yet thinner than the cell is wide
    fig.add_trace(solid.lines(solid.cube_edges(at), "selected-edges", style.SELECTED, width))
    if partition:
        fig.add_trace(
            points(
                np.ones_like(in_group),
                uid="partition",
                name=f"{con.n_stats:,} statistic groups",
                marker=partition_marker(ids),
                extra=ids,
                hovertemplate=hover(layout, "<br>group %{customdata[" + str(lay.rank) + "]}"),
            )
        )
    else:
        fig.add_trace(
            points(~in_group, uid="others", name="other cells", hovertemplate=hover(layout))
        )
        fig.add_trace(
            points(
                in_group,
                uid="group",
                name=f"share μ, σ² with the selected cell (m = {con.group_size:,})",
                hovertemplate=hover(layout),
            )
        )
    fig.add_trace(points(sel, uid="selected", name="selected cell", hovertemplate=hover(layout)))
    # legend entries in short lines: a half-width column in presenter mode holds about
    # 30 characters a line
    where = "<br>(its group cut open in front)" if cut.any() else ""
    for key in (
        solid.key(f"the {con.group_size:,} values sharing<br>its μ, σ² (solid)", group_colour),
        solid.key(
            "the other groups (faint,<br>a colour each, colours repeat)"
            if partition
            else "the other cells (faint)",
            PARTITION_COLOURS[(sel_id + 1) % n_colours] if partition else style.BEFORE,
            "square-open",  # faint: an outline; the selected cell: a diamond
        ),
        solid.key("the selected cell<br>(black, outlined)" + where, style.SELECTED, "diamond"),
    ):
        fig.add_trace(key)
    lengths = [e + 1.0 for e in extents]  # axis ranges −1 … e: equal units on every axis
    scale = 1.35 / math.hypot(*(v / max(lengths) for v in lengths))
    ratio = [v / max(lengths) * scale for v in lengths]
    dense = 4 if presenter else 8  # tick labels along the longest axis
    scene_axes = {
        name: {
            "title": {"text": _axis_title(layout, shape, a)},
            "range": [-1.0, e],
            "showbackground": False,
            "showspikes": False,
            "tickfont": {"size": style.font_size(presenter) - 3},
            # fewer, larger numbers in presenter mode (a half-width column): 8 in a row
            # at the projector's size run together
            **_ticks(a, win, max(2, round(dense * (e + 1) / max(lengths)))),
        }
        for name, a, e in zip(("xaxis", "yaxis", "zaxis"), ax3, extents, strict=True)
    }
    # two short lines (a half-width column in presenter mode)
    title = f"{con.method_obj.label}: " + (
        f"{con.n_stats:,} groups<br>of {con.group_size:,} values each"
        if partition
        else f"one μ and σ²<br>from {con.group_size:,} values"
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
    style.apply(fig, presenter, height=600)
    # room for the title, and for the note between the title and the scene
    return style.top_room(fig, presenter, below=2 if win.capped else 0).figure()


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


def alt(view: BlockView) -> list[str]:
    """The block in words: the shape, the selected cell, its group's box, what is drawn."""
    con, cell = view.contract, view.cell
    lay = con.layout_obj
    win = make_window(con.layout, con.shape, cell)
    box = box_text(con.layout, group_slices(con, cell))
    out = [
        f"A 3D block of the {lay.key} tensor {lay.shape_text(con.shape)}: one cube per value, "
        f"{win.n_cells:,} of {win.n_total:,} drawn.",
        f"The selected cell {lay.shape_text(cell)} (black cube) shares its mean and "
        f"variance with m = {con.group_size:,} values: {box}"
        f" (solid); the other {'groups' if view.partition else 'cells'} are faint.",
    ]
    if view.partition:
        out.append(
            f"Every one of the {con.n_stats:,} statistic groups has a colour "
            f"(colours repeat after {len(PARTITION_COLOURS)})."
        )
    if win.capped:
        out.append(win.note())
    return out


SECTION = Section(
    slug="block",
    label="Block view",
    intro=INTRO,
    run=run,
    knobs=(PARTITION, SPLIT_HW),
    figure=figure,
    alt=alt,
)
