"""The 3D block as solid cubes, and the flat view's projector-proof highlight.

The block draws each set of cells by its boundary faces (`normviz.axes.solid`): the
selected group opaque, the rest faint, the selected cell a black cube that always
shows (its group is cut open in front of it when it would hide it). The flat view
veils every cell outside the group, outlines the group in black and marks the
selected cell with a symbol.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from normviz import LAYOUTS, STANDARD_METHODS, contract, style
from normviz.axes import block, solid
from normviz.axes.cells import group_slices

SMALL = {"BTC": (3, 5, 6), "NCHW": (2, 6, 3, 4)}
GROUPS = 3


def _trace(fig, uid: str):
    found = [t for t in fig.data if t.uid == uid]
    assert len(found) == 1, [t.uid for t in fig.data]
    return found[0]


def _uids(fig) -> set[str]:
    return {t.uid for t in fig.data if t.uid}


def _con(method: str, layout: str, shape, axes: str | None = None):
    g = GROUPS if method == "group" else None
    return contract(method, layout, shape, g, axes)


def test_boundary_faces_of_a_box_and_its_edges() -> None:
    grid = np.zeros((3, 2, 4), dtype=np.int8)
    faces = solid.boundary_faces(grid, np.ones_like(grid, dtype=bool))
    assert len(faces) == 2 * (3 * 2 + 2 * 4 + 3 * 4)  # the surface of a 3×2×4 box
    m = solid.mesh(faces)
    assert len(m["i"]) == 2 * len(faces) and len(m["x"]) == 4 * 3 * 5 - 2 * 1 * 3  # no inner corner
    x, _, z = solid.edges(faces)
    # every lattice line on the surface is one merged piece: along each axis, the lines
    # through the other two axes' lattice points that lie on the surface
    n = (3, 2, 4)
    lines = sum(
        (n[b] + 1) * (n[c] + 1) - (n[b] - 1) * (n[c] - 1) for b, c in ((1, 2), (0, 2), (0, 1))
    )
    assert np.isnan(x).sum() == lines == 36
    assert np.nanmin(x) == -0.5 and np.nanmax(x) == 2.5 and np.nanmax(z) == 3.5


def test_faces_towards_an_empty_position_count_as_surface() -> None:
    grid = np.zeros((3, 1, 1), dtype=np.int8)
    grid[1] = solid.EMPTY  # a gap between two slabs
    faces = solid.boundary_faces(grid, np.ones_like(grid, dtype=bool))
    assert len(faces) == 2 * 6  # two separate cubes


CASES = [(m, lay) for lay in LAYOUTS for m in STANDARD_METHODS]


@pytest.mark.parametrize(("method", "layout"), CASES)
@pytest.mark.parametrize("partition", [False, True])
def test_the_group_is_one_solid_and_the_selected_cell_always_shows(
    method: str, layout: str, partition: bool
) -> None:
    shape = SMALL[layout]
    con = _con(method, layout, shape)
    rng = np.random.default_rng(len(method) + len(layout))
    for _ in range(3):
        cell = tuple(int(rng.integers(n)) for n in shape)
        fig = block.make_block_figure(con, cell=cell, partition=partition)
        assert {"others-solid", "group-solid", "selected-solid", "selected-edges"} <= _uids(fig)
        group = _trace(fig, "group-solid")
        assert group.opacity == 1.0 and _trace(fig, "others-solid").opacity < 0.5
        if not partition:
            assert group.color == style.HIGHLIGHT
        assert _trace(fig, "selected-solid").color == style.SELECTED
        if "group-cut" not in _uids(fig):  # a box's surface: 2(ab + bc + ca) faces
            box = [sl.stop - sl.start for sl in group_slices(con, cell)]
            a, b, c = (math.prod(box[d] for d in ax.dims) for ax in block.axes3d(layout, False))
            faces = (len(group.i) + len(_trace(fig, "selected-solid").i)) // 2
            assert faces == 2 * (a * b + b * c + c * a)


def test_a_cell_inside_its_group_is_shown_by_cutting_the_group_open() -> None:
    con = contract("custom", "BTC", (4, 6, 8), axes="B,T,C")  # one group: the whole block
    fig = block.make_block_figure(con, cell=(2, 3, 4))
    assert "group-cut" in _uids(fig)
    assert len(_trace(fig, "selected-solid").i) == 2 * 3  # the three faces towards the camera
    assert any("cut open" in (t.name or "") for t in fig.data)
    corner = block.make_block_figure(con, cell=(3, 0, 5))  # on the camera's side: no cut
    assert "group-cut" not in _uids(corner)


def test_the_block_keeps_cubes_cubic() -> None:
    con = contract("layer", "BTC", (2, 5, 12))
    scene = block.make_block_figure(con).layout.scene
    lengths = [scene[a].range[1] - scene[a].range[0] for a in ("xaxis", "yaxis", "zaxis")]
    ratio = [scene.aspectratio[k] for k in "xyz"]
    np.testing.assert_allclose(np.divide(ratio, lengths), ratio[0] / lengths[0])


def test_the_selected_outline_is_thinner_than_a_cell() -> None:
    for shape in [(2, 2, 2), (16, 16, 16)]:
        fig = block.make_block_figure(contract("batch", "BTC", shape))
        width = _trace(fig, "selected-edges").line.width
        assert 2 <= width <= 360 / max(shape) / 3
