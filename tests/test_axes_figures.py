"""Axis Explorer figures (block, flat view, small multiples): the highlighted cells are
exactly the statistic group, read off group_ids."""

from __future__ import annotations

import base64
import html
import itertools
import json
import math
import re
import xml.etree.ElementTree as ET

import numpy as np
import plotly.graph_objects as go
import pytest
import torch
from signals import assert_within_budget

from normviz import LAYOUTS, METHODS, STANDARD_METHODS, NormConfigError, contract, group_ids, style
from normviz.axes import AxesSetup, block, flat, gridview, multiples, window

SMALL = {"BTC": (3, 5, 6), "NCHW": (2, 6, 3, 4)}
GROUPS = 3  # divides C = 6 in both small shapes
# largest shapes inside the element cap (2^22), one per direction that can grow
LARGEST = {
    "BTC": [(1024, 4096, 1), (1, 4096, 1024), (1024, 1, 4096), (64, 256, 256)],
    "NCHW": [(256, 64, 16, 16), (1, 16, 512, 512), (16, 4096, 8, 8), (256, 1, 128, 128)],
}


def _groups(method: str) -> int | None:
    return GROUPS if METHODS[method].grouped else None


def _trace(fig: go.Figure, uid: str):
    found = [t for t in fig.data if t.uid == uid]
    assert len(found) == 1, [t.uid for t in fig.data]
    return found[0]


def _cells(trace) -> set[tuple[int, ...]]:
    """Tensor indices a trace draws (its customdata rows, group id column dropped)."""
    cd = np.asarray(trace.customdata)
    return {tuple(int(v) for v in row) for row in cd}


def _group_set(method, layout, shape, groups, axes, cell, win=None) -> set[tuple[int, ...]]:
    ids = group_ids(method, layout, shape, groups, axes)
    hit = np.argwhere(ids == ids[tuple(cell)])
    if win is not None:
        hit = [h for h in hit if win.contains(h)]
    return {tuple(int(v) for v in h) for h in hit}


def _stepped_colour(scale, value: float, cmin: float, cmax: float) -> str:
    """The colour a stepped colour scale gives `value` (the band it falls in)."""
    t = (value - cmin) / (cmax - cmin)
    for (lo, c), (hi, _) in itertools.pairwise(scale):
        if lo <= t <= hi and lo != hi:
            return c
    raise AssertionError(f"{value} outside the scale")


CASES = [(m, lay) for lay in LAYOUTS for m in STANDARD_METHODS] + [
    ("custom", "BTC"),
    ("custom", "NCHW"),
]
CUSTOM_AXES = {"BTC": "B,C", "NCHW": "N,H"}


@pytest.mark.parametrize(("method", "layout"), CASES)
def test_block_highlights_exactly_the_group(method: str, layout: str) -> None:
    shape = SMALL[layout]
    axes = CUSTOM_AXES[layout] if method == "custom" else None
    rng = np.random.default_rng(len(method) * 7 + len(layout))
    for _ in range(3):
        cell = tuple(int(rng.integers(n)) for n in shape)
        con = contract(method, layout, shape, _groups(method), axes)
        fig = block.make_block_figure(con, cell=cell)
        group = _trace(fig, "group")
        assert len(group.x) == con.group_size
        assert _cells(group) == _group_set(method, layout, shape, _groups(method), axes, cell)
        others = _trace(fig, "others")
        assert len(others.x) + len(group.x) == math.prod(shape)
        assert _cells(_trace(fig, "selected")) == {cell}
        assert not any(a.text and "omitted" in a.text for a in fig.layout.annotations)


@pytest.mark.parametrize(("method", "layout"), CASES)
def test_partition_colours_follow_group_ids(method: str, layout: str) -> None:
    shape = SMALL[layout]
    axes = CUSTOM_AXES[layout] if method == "custom" else None
    con = contract(method, layout, shape, _groups(method), axes)
    fig = block.make_block_figure(con, partition=True)
    tr = _trace(fig, "partition")
    ids = group_ids(method, layout, shape, _groups(method), axes)
    cd = np.asarray(tr.customdata)
    idx, shown_ids = cd[:, :-1], cd[:, -1]
    assert len(idx) == math.prod(shape)
    np.testing.assert_array_equal(shown_ids, ids[tuple(idx.T)])
    marker = tr.marker
    colours = [
        _stepped_colour(marker.colorscale, v, marker.cmin, marker.cmax) for v in marker.color
    ]
    expected = [window.PARTITION_COLOURS[i % len(window.PARTITION_COLOURS)] for i in shown_ids]
    assert colours == expected
    # every statistic group is drawn; black stays free for the selected cell
    assert len(set(shown_ids)) == con.n_stats
    assert style.SELECTED not in window.PARTITION_COLOURS


def test_split_hw_puts_each_image_in_its_own_slab() -> None:
    shape = (3, 2, 4, 5)
    con = contract("instance", "NCHW", shape)
    fig = block.make_block_figure(con, split_hw=True, partition=True)
    tr = _trace(fig, "partition")
    cd = np.asarray(tr.customdata)
    n, c, h, w = cd[:, 0], cd[:, 1], cd[:, 2], cd[:, 3]
    x, y, z = (np.asarray(v) for v in (tr.x, tr.y, tr.z))
    W = shape[3]
    np.testing.assert_array_equal(x // (W + 1), n)  # one empty column between images
    np.testing.assert_array_equal(x % (W + 1), w)
    np.testing.assert_array_equal(y, c)
    np.testing.assert_array_equal(z, h)
    merged = _trace(block.make_block_figure(con, partition=True), "partition")
    cdm = np.asarray(merged.customdata)
    np.testing.assert_array_equal(np.asarray(merged.z), cdm[:, 2] * W + cdm[:, 3])  # H·W


def test_large_shape_is_capped_around_the_cell_with_a_note() -> None:
    shape = (64, 128, 512)
    cell = (63, 127, 511)  # the far corner must still be drawn
    fig = block.make_block_figure(contract("layer", "BTC", shape), cell=cell)
    win = window.make_window("BTC", shape, cell)
    drawn = len(_trace(fig, "group").x) + len(_trace(fig, "others").x)
    assert drawn == win.n_cells <= style.MAX_CELLS_3D
    assert _cells(_trace(fig, "selected")) == {cell}
    assert _cells(_trace(fig, "group")) == _group_set("layer", "BTC", shape, None, None, cell, win)
    notes = [a.text for a in fig.layout.annotations if a.text and "omitted" in a.text]
    assert len(notes) == 1 and "of 4,194,304 cells" in notes[0] and "C " in notes[0]


def test_window() -> None:
    win = window.make_window("NCHW", (4, 6, 4, 4), (1, 2, 3, 0))
    assert not win.capped and win.note() == "" and win.n_cells == 384
    big = window.make_window("NCHW", (256, 64, 16, 16), (255, 0, 8, 15), cap=1000)
    assert big.capped and big.n_cells <= 1000 and big.contains((255, 0, 8, 15))
    assert len(big.indices()) == big.n_cells
    assert "N " in big.note() and "omitted" in big.note()
    with pytest.raises(NormConfigError, match="outside"):
        window.make_window("BTC", (2, 2, 2), (2, 0, 0))


# ---- flat view ------------------------------------------------------------------------


def _rect_cells(trace) -> set[tuple[int, int]]:
    """(row, col) cells inside the closed outlines of a lines trace."""
    xs, ys = list(trace.x), list(trace.y)
    out: set[tuple[int, int]] = set()
    for k in range(0, len(xs), 6):
        c0, c1 = round(xs[k] + 0.5), round(xs[k + 1] + 0.5)
        r0, r1 = round(ys[k] + 0.5), round(ys[k + 2] + 0.5)
        cells = {(r, c) for r in range(r0, r1) for c in range(c0, c1)}
        assert not (cells & out), "outlines overlap"
        out |= cells
    return out


# ---- thumbnails -----------------------------------------------------------------------


def thumbnail_panels(page: str) -> list[dict]:
    """The thumbnails' panels read back from their HTML: title, alt text, and each fill
    colour's SVG path (one closed "M…Z" per cell), or the text that stands in."""
    panels = []
    for fig in re.findall(r"<figure>(.*?)</figure>", page):
        title = re.search(r"<figcaption>(.*?)</figcaption>", fig).group(1)
        img = re.search(r'<img src="data:image/svg\+xml;base64,([^"]+)" alt="([^"]*)"/>', fig)
        if img is None:
            panels.append({"title": title, "text": re.search(r"<p>(.*?)</p>", fig).group(1)})
            continue
        svg = ET.fromstring(base64.b64decode(img.group(1)))
        paths = {p.get("fill"): p.get("d") for p in svg.iter("{http://www.w3.org/2000/svg}path")}
        panels.append({"title": title, "alt": html.unescape(img.group(2)), "paths": paths})
    return panels


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_thumbnails_highlight_the_corner_cells_group(layout: str) -> None:
    shape = SMALL[layout]
    panels = thumbnail_panels(multiples.methods_html(layout, shape, GROUPS))
    assert [p["title"] for p in panels] == [METHODS[m].label for m in STANDARD_METHODS]
    words = multiples.alt_lines(layout, shape, GROUPS)[1:]
    for m, panel, said in zip(STANDARD_METHODS, panels, words, strict=True):
        assert panel["alt"] == said  # the image's alt text: the panel in words
        idx, in_group, quads = multiples.thumbnail_cells(contract(m, layout, shape, _groups(m)))
        ids = group_ids(m, layout, shape, _groups(m))
        np.testing.assert_array_equal(in_group, ids[tuple(idx.T)] == ids[(0,) * len(shape)])
        # one closed quad per cell, the group in the method's colour, the rest muted
        group, others = panel["paths"][style.METHOD_COLOURS[m]], panel["paths"][style.MUTED]
        assert group.count("M") == group.count("Z") == in_group.sum() > 0
        assert others.count("M") == (~in_group).sum() > 0
        assert len(quads) == in_group.size
        # every visible cell of the group is drawn: the group through the corner lies on
        # the visible faces, so its visible part is its cells with an index 0 somewhere
        cells = {tuple(i) for i in np.argwhere(ids == ids[(0,) * len(shape)])}
        visible = {tuple(int(v) for v in i) for i in idx}
        assert {tuple(int(v) for v in i) for i in idx[in_group]} == cells & visible


def test_thumbnail_explains_groups_that_do_not_divide_c() -> None:
    panels = thumbnail_panels(multiples.methods_html("NCHW", (2, 6, 3, 3), groups=4))
    (group,) = [p for p in panels if p["title"] == METHODS["group"].label]
    assert "divisible" in group["text"] and "paths" not in group
    assert all("paths" in p for p in panels if p is not group)


def test_thumbnails_escape_their_text() -> None:
    """Every text of the picture goes through html.escape (the alt's apostrophes too)."""
    page = multiples.methods_html("BTC", (4, 6, 8), 2)
    assert "&#x27;s group pools" in page and "'s group" not in page


# ---- payload --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("layout", "shape"), [(lay, s) for lay, shapes in LARGEST.items() for s in shapes]
)
def test_payload_stays_under_1mb_at_the_largest_shapes(layout: str, shape: tuple) -> None:
    assert math.prod(shape) <= 2**22
    cell = tuple(n // 2 for n in shape)
    C = shape[LAYOUTS[layout].channel_axis]
    for method, axes in [
        ("batch", None),
        ("group", None),
        ("custom", "B,C" if layout == "BTC" else "N,H"),
    ]:
        g = (2 if C % 2 == 0 else 1) if method == "group" else None
        con = contract(method, layout, shape, g, axes)
        figs = [
            block.make_block_figure(con, cell=cell),
            block.make_block_figure(con, cell=cell, partition=True, split_hw=True),
        ]
        assert_within_budget(*figs, what=(layout, shape, method))
        for partition in (False, True):  # the flat view's tensor grid: as a figure, ≤ 1 MB
            grid = gridview.axes_grid(AxesSetup(con, cell=cell), {"partition": partition})
            assert len(json.dumps(grid.payload())) < 1_000_000, (layout, shape, method)
    assert len(multiples.methods_html(layout, shape, 1)) < 100_000  # capped: first cells


def test_invalid_settings_raise_a_config_error() -> None:
    with pytest.raises(NormConfigError, match="divisible"):
        block.make_block_figure(contract("group", "BTC", (2, 3, 8), groups=3))
    with pytest.raises(NormConfigError, match="outside"):
        con = contract("layer", "BTC", (2, 3, 4))
        flat.flat_view(torch.zeros(2, 3, 4), con, cell=(0, 3, 0))


def test_presenter_mode_draws_fewer_larger_tick_numbers() -> None:
    """At the projector's font size, eight numbers along a 3D axis run together; presenter
    mode labels at most four, every label still the index of the cell under it."""
    con = contract("layer", "BTC", (8, 8, 8))
    for presenter, most in ((False, 8), (True, 4)):
        scene = block.make_block_figure(con, presenter=presenter).layout.scene
        for axis in (scene.xaxis, scene.yaxis, scene.zaxis):
            assert 2 <= len(axis.ticktext) <= most
            assert [int(t) for t in axis.ticktext] == [int(v) for v in axis.tickvals]
        assert len(scene.xaxis.ticktext) == most
