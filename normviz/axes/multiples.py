"""Small multiples: every method's statistic group on the same tensor, side by side.

Isometric 2D drawings of the block (no WebGL context each, so the home page can
show them too), one subplot per method, with the group of the corner cell
highlighted: the pooled axes are the ones the highlight stretches along.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from normviz import style
from normviz.axes.block import axes3d
from normviz.axes.cells import AxesSetup
from normviz.axes.window import Window
from normviz.core import Contract, NormConfigError, contract
from normviz.figures.spec import Spec, trace
from normviz.knobs import Value
from normviz.layouts import LAYOUTS
from normviz.methods import METHODS, STANDARD_METHODS
from normviz.sections import Progress, Section

THUMB_LIMITS = {"sample": 4, "channel": 8, "other": 8}  # cells per display axis in a thumbnail
INTRO = (
    "The same tensor under each method, with the group of the corner cell highlighted. "
    "The pooled axes are the ones the highlight stretches along."
)


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
    # float32: 3 decimals of a block a few dozen cells wide need no more, and the typed
    # arrays (most of the home page's first load) go out at half the bytes of float64
    path = np.round(path, 3).astype(np.float32).reshape(-1, 2)
    return path[:, 0], path[:, 1]


def _thumb_window(layout: str, shape: tuple[int, ...]) -> Window:
    lay = LAYOUTS[layout]
    s = lay.axes.index(lay.sample)
    role = {s: "sample", lay.channel_axis: "channel"}
    # T alone gets the whole "other" budget; H and W share one display axis (H·W), 4 each
    other = THUMB_LIMITS["other"] if lay.rank == 3 else THUMB_LIMITS["other"] // 2
    size = tuple(min(n, THUMB_LIMITS[role[d]] if d in role else other) for d, n in enumerate(shape))
    return Window(layout, shape, (0,) * len(shape), size)


def thumbnail_cells(con: Contract) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Tensor indices of the visible thumbnail cells, whether each shares cell 0's group, quads."""
    layout, shape = con.layout, con.shape
    win = _thumb_window(layout, shape)
    ax3 = axes3d(layout, split_hw=False)
    n = tuple(a.extent(win.size) for a in ax3)
    disp, quads = _face_polygons(n)  # type: ignore[arg-type]
    # display index -> tensor index (window starts at 0)
    idx = np.zeros((len(disp), len(shape)), dtype=np.int64)
    for k, a in enumerate(ax3):
        rem = disp[:, k]
        for d in reversed(a.dims):
            rem, idx[:, d] = np.divmod(rem, win.size[d])
    ids = con.stat_ids()
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
    # "Batch<br>Norm": five one-line names side by side ran into each other on a phone
    titles = tuple(METHODS[m].label.replace("Norm", "<br>Norm", 1) for m in methods)
    fig = Spec.grid(1, len(methods), titles, horizontal_spacing=0.02)
    win = _thumb_window(layout, shape)
    for col, m in enumerate(methods, start=1):
        g = groups if METHODS[m].grouped else None
        try:
            con = contract(m, layout, shape, g)
            _, in_group, quads = thumbnail_cells(con)
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
                trace(
                    "scatter",
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
    # two lines: one runs off a phone's column
    caption = f"{lay.key} {sizes};<br>each block: {lay.sample} across, {lay.channel} in depth, "
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
    size = style.font_size(presenter) - 2
    top = round(2.6 * style.font_size(presenter)) + 8  # the two-line panel titles
    fig.update_layout(margin={"l": 10, "r": 10, "t": top, "b": round(2.6 * size) + 16})
    return fig.figure()


# ---- the section --------------------------------------------------------------------


@dataclass(frozen=True)
class Multiples:
    """The tensor's layout and shape, and the G the GroupNorm drawing uses."""

    layout: str
    shape: tuple[int, ...]
    groups: int


def run(setup: AxesSetup, knobs: Mapping[str, Value], progress: Progress) -> Multiples:
    return Multiples(setup.contract.layout, setup.contract.shape, setup.groups)


def figure(res: Multiples, presenter: bool) -> go.Figure:
    return make_methods_figure(res.layout, res.shape, res.groups, presenter=presenter)


def alt_lines(
    layout: str, shape: Sequence[int], groups: int | None, methods: Sequence[str] = STANDARD_METHODS
) -> list[str]:
    """The thumbnails in words: for each method, which axes the corner cell's group pools."""
    lay = LAYOUTS[layout]
    out = [f"The {lay.key} tensor {lay.shape_text(tuple(shape))} under each method:"]
    for m in methods:
        try:
            con = contract(m, layout, tuple(shape), groups if METHODS[m].grouped else None)
        except NormConfigError as e:
            out.append(f"{METHODS[m].label}: not drawn ({str(e).split('. ')[0]}).")
            continue
        pooled = ", ".join(con.axes)
        out.append(
            f"{con.method_obj.label}: the corner cell's group pools {pooled} "
            f"(m = {con.group_size:,} values, {con.n_stats:,} groups)."
        )
    return out


def alt(res: Multiples) -> list[str]:
    return alt_lines(res.layout, res.shape, res.groups)


SECTION = Section(
    slug="methods",
    label="All methods side by side",
    intro=INTRO,
    run=run,
    figure=figure,
    alt=alt,
)
