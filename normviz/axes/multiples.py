"""Small multiples: every method's statistic group on the same tensor, side by side.

Isometric 2D drawings of the block (no WebGL context each, so the home page can
show them too), one subplot per method, with the group of the corner cell
highlighted: the pooled axes are the ones the highlight stretches along.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from normviz import style
from normviz.axes.block import axes3d
from normviz.axes.cells import AxesSetup
from normviz.axes.window import Window
from normviz.core import Contract, NormConfigError, contract
from normviz.figures.spec import Picture
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


def _path(quads: np.ndarray, top: float) -> str:
    """Closed quads as one SVG path (one filled shape per colour); `top` flips the
    projection's upward y into SVG's downward y. Two decimals of a block a few dozen
    cells wide are finer than a pixel of the thumbnail."""
    d = ["M" + "L".join(f"{x:.2f} {top - y:.2f}" for x, y in quad) + "Z" for quad in quads]
    return "".join(d)


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


def methods_html(
    layout: str,
    shape: Sequence[int],
    groups: int | None = None,
    methods: Sequence[str] = STANDARD_METHODS,
) -> str:
    """Isometric thumbnails of the block, one per method, cell 0's group highlighted.

    SVG images in a wrapping grid of panels (ui/css.py: `.nv-thumbs`), no chart library:
    the home page's first screen draws without loading Plotly, and on a phone the panels
    wrap onto rows instead of shrinking to a fifth of the width. Large shapes show their
    first few cells per axis. GroupNorm with C not divisible by `groups` says why instead
    of a drawing. Every text is ours or a number (no user text): escaped all the same.
    """
    shape = tuple(int(s) for s in shape)
    lay = LAYOUTS[layout]
    words = alt_lines(layout, shape, groups, methods)[1:]
    panels = []
    for m, said in zip(methods, words, strict=True):
        label = html.escape(METHODS[m].label)
        g = groups if METHODS[m].grouped else None
        try:
            con = contract(m, layout, shape, g)
            _, in_group, quads = thumbnail_cells(con)
        except NormConfigError as e:
            why = html.escape(str(e).split(". ")[0])
            panels.append(f"<figure><figcaption>{label}</figcaption><p>{why}</p></figure>")
            continue
        xs, ys = quads[..., 0], quads[..., 1]
        pad = 0.3
        x0, y0 = float(xs.min()) - pad, float(ys.min()) - pad
        w, h = float(xs.max()) - x0 + pad, float(ys.max()) - y0 + pad
        top = float(ys.max()) + pad  # SVG's y = top − y
        shapes = "".join(
            f'<path fill="{colour}" d="{_path(quads[mask], top)}"/>'
            for mask, colour in (
                (~in_group, style.MUTED),
                (in_group, style.METHOD_COLOURS[m]),
            )
        )
        svg = (
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="{x0:.2f} 0 {w:.2f} {h:.2f}" '
            'stroke="white"><style>path{stroke-width:1px;vector-effect:non-scaling-stroke}'
            f"</style>{shapes}</svg>"
        )
        # an image of its own (Streamlit's HTML sanitizer drops inline <svg>); its alt
        # text is the panel in words
        src = "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode()
        panels.append(
            f'<figure><figcaption>{label}</figcaption><img src="{src}" '
            f'alt="{html.escape(said)}"/></figure>'
        )
    win = _thumb_window(layout, shape)
    sizes = ", ".join(f"{a}={n}" for a, n in zip(lay.axes, shape, strict=True))
    up = "·".join(a for a in lay.axes if a not in (lay.sample, lay.channel))
    caption = f"{lay.key} {sizes}; each block: {lay.sample} across, {lay.channel} in depth, {up} up"
    if win.capped:
        caption += " (first cells only)"
    return (
        f'<div class="nv-thumbs">{"".join(panels)}</div>'
        f'<p class="nv-thumbs-note">{html.escape(caption)}</p>'
    )


# ---- the section --------------------------------------------------------------------


@dataclass(frozen=True)
class Multiples:
    """The tensor's layout and shape, and the G the GroupNorm drawing uses."""

    layout: str
    shape: tuple[int, ...]
    groups: int


def run(setup: AxesSetup, knobs: Mapping[str, Value], progress: Progress) -> Multiples:
    return Multiples(setup.contract.layout, setup.contract.shape, setup.groups)


def figure(res: Multiples, presenter: bool) -> Picture:
    """Presenter mode needs nothing of its own: the picture's text follows the page's."""
    return Picture(methods_html(res.layout, res.shape, res.groups))


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
