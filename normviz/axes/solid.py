"""Solid cubes for the 3D block: the boundary faces and edges of sets of grid cells.

The block is a grid of unit cubes, one per drawn cell, centred on integer display
coordinates. Each set of cells (the selected group, the rest) is drawn as the
faces on its boundary only: two cubes of one set share no face, so a set reads as
one solid with its cells' edges on the surface, and the payload grows with the
surface, not the volume. Faces are quads on the lattice of cube corners (cell i
spans i − ½ … i + ½), split into two triangles for a mesh3d trace.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from normviz import style
from normviz.figures import spec

EMPTY = -1  # grid code of a position with no cell (outside the block, or a gap between slabs)


@dataclass(frozen=True)
class Faces:
    """Boundary faces: the cell each belongs to and its four lattice corners."""

    cells: np.ndarray  # (k, 3) display coordinates of the cell that owns the face
    corners: np.ndarray  # (k, 4, 3) lattice indices of the corners, in cycle order

    def __len__(self) -> int:
        return len(self.cells)

    def subset(self, mask: np.ndarray) -> Faces:
        return Faces(self.cells[mask], self.corners[mask])


def boundary_faces(
    grid: np.ndarray, inside: np.ndarray, against: np.ndarray | None = None
) -> Faces:
    """The faces of the cells where `inside` is True whose neighbour is not in `against`.

    `grid` holds a code per display position (EMPTY where no cell is drawn);
    `inside` (same shape) marks the set; `against` (default: the set itself) the
    neighbours that hide a face. A face towards an EMPTY position or the grid's
    edge always counts.
    """
    drawn = grid != EMPTY
    own = inside & drawn
    hide = np.pad(own if against is None else against & drawn, 1, constant_values=False)
    pad = np.pad(own, 1, constant_values=False)
    cells, corners = [], []
    # the two other axes of a face on `axis`, in an order that keeps the quad a cycle
    for axis in range(3):
        b, c = [d for d in range(3) if d != axis]
        for side in (-1, 1):
            shift = [slice(1, -1)] * 3
            shift[axis] = slice(1 + side, hide.shape[axis] - 1 + side)
            hit = np.argwhere(pad[1:-1, 1:-1, 1:-1] & ~hide[tuple(shift)])
            if not len(hit):
                continue
            quad = np.repeat(hit[:, None, :], 4, axis=1)
            quad[:, :, axis] += 1 if side > 0 else 0
            for k, (db, dc) in enumerate(((0, 0), (1, 0), (1, 1), (0, 1))):
                quad[:, k, b] += db
                quad[:, k, c] += dc
            cells.append(hit)
            corners.append(quad)
    if not cells:
        return Faces(np.zeros((0, 3), np.int64), np.zeros((0, 4, 3), np.int64))
    return Faces(np.concatenate(cells), np.concatenate(corners))


def mesh(faces: Faces) -> dict[str, np.ndarray]:
    """mesh3d trace properties x, y, z, i, j, k: the faces' corners shared, two triangles each."""
    flat = faces.corners.reshape(-1, 3)
    points, inverse = np.unique(flat, axis=0, return_inverse=True)
    quad = inverse.reshape(-1, 4)
    tri = np.concatenate([quad[:, [0, 1, 2]], quad[:, [0, 2, 3]]])
    index = tri.astype(np.int16 if len(points) < 2**15 else np.int32)
    coords = (points - 0.5).astype(np.float32)  # lattice index -> display coordinate
    return {
        "x": coords[:, 0],
        "y": coords[:, 1],
        "z": coords[:, 2],
        "i": index[:, 0],
        "j": index[:, 1],
        "k": index[:, 2],
    }


def face_values(faces: Faces, values: np.ndarray) -> np.ndarray:
    """A per-cell value (indexed by display coordinates) repeated for each face's two triangles."""
    v = values[tuple(faces.cells.T)]
    return np.concatenate([v, v])


def edges(faces: Faces) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The faces' edges as NaN-separated line pieces, collinear unit edges merged.

    Returns float32 x, y, z for a scatter3d trace in "lines" mode.
    """
    if not len(faces):
        empty = np.zeros(0, np.float32)
        return empty, empty, empty
    a = faces.corners
    start = np.concatenate([a[:, k] for k in range(4)])
    stop = np.concatenate([a[:, (k + 1) % 4] for k in range(4)])
    lo, hi = np.minimum(start, stop), np.maximum(start, stop)
    axis = np.argmax(hi - lo, axis=1)
    seg = np.unique(np.column_stack([axis, lo]), axis=0)  # (axis, x, y, z) of each unit edge
    pieces = []
    for ax in range(3):
        s = seg[seg[:, 0] == ax][:, 1:]
        if not len(s):
            continue
        others = [d for d in range(3) if d != ax]
        order = np.lexsort((s[:, ax], s[:, others[1]], s[:, others[0]]))
        s = s[order]
        # a new run starts where the line changes or the next edge does not continue it
        new = np.ones(len(s), bool)
        new[1:] = (s[1:, others] != s[:-1, others]).any(axis=1) | (s[1:, ax] != s[:-1, ax] + 1)
        starts = np.flatnonzero(new)
        stops = np.append(starts[1:], len(s)) - 1
        p0, p1 = s[starts].copy(), s[stops].copy()
        p1[:, ax] += 1
        pieces.append(np.stack([p0, p1, np.full_like(p0, -1)], axis=1).reshape(-1, 3))
    pts = np.concatenate(pieces).astype(np.float32)
    gap = (pts == -1).all(axis=1)
    pts -= 0.5
    pts[gap] = np.nan
    return pts[:, 0], pts[:, 1], pts[:, 2]


def cube_edges(cell: tuple[int, int, int]) -> tuple[list, list, list]:
    """The 12 edges of the cube of one cell, None-separated (display coordinates)."""
    corners = [
        (cell[0] + dx, cell[1] + dy, cell[2] + dz)
        for dx in (-0.5, 0.5)
        for dy in (-0.5, 0.5)
        for dz in (-0.5, 0.5)
    ]
    xs: list = []
    ys: list = []
    zs: list = []
    for n, p in enumerate(corners):
        for q in corners[n + 1 :]:
            if sum(u != v for u, v in zip(p, q, strict=True)) == 1:
                xs += [p[0], q[0], None]
                ys += [p[1], q[1], None]
                zs += [p[2], q[2], None]
    return xs, ys, zs


# ---- traces ----------------------------------------------------------------------------

LIGHTING = {"ambient": 0.6, "diffuse": 0.55, "specular": 0.05, "roughness": 0.9, "fresnel": 0}
LIGHT = {"x": 2000, "y": -600, "z": 3000}  # faces facing x, −y and z get three shades
FAINT = {False: 0.18, True: 0.3}  # opacity of the cells outside the group (group, partition)


def trace(faces: Faces, uid: str, hover: str, **kw) -> dict:
    """The faces as one solid (a mesh3d trace dict); `hover` names what they are (a mesh
    hides the markers inside it from the pointer, so the solid itself carries the hover text)."""
    return spec.trace(
        "mesh3d",
        **mesh(faces),
        uid=uid,
        flatshading=True,
        lighting=LIGHTING,
        lightposition=LIGHT,
        hovertemplate=hover + "<extra></extra>",
        showlegend=False,
        **kw,
    )


def lines(xyz: tuple, uid: str, colour: str, width: float) -> dict:
    """Line pieces (a scatter3d trace dict), e.g. the `edges` of a set of faces."""
    return spec.trace(
        "scatter3d",
        x=xyz[0],
        y=xyz[1],
        z=xyz[2],
        mode="lines",
        uid=uid,
        line={"color": colour, "width": width},
        hoverinfo="skip",
        showlegend=False,
    )


def key(name: str, colour: str, symbol: str = "square") -> dict:
    """A legend entry alone (no point drawn; a scatter3d trace dict): what a colour means."""
    return spec.trace(
        "scatter3d",
        x=[None],
        y=[None],
        z=[None],
        mode="markers",
        name=name,
        marker={
            "color": colour,
            "symbol": symbol,
            "size": 12,
            "line": {"color": style.INK, "width": 1},
        },
        hoverinfo="skip",
    )


def cutaway(group: np.ndarray, at: tuple[int, int, int]) -> np.ndarray:
    """The group's cells to draw faint so that the selected cell shows from the camera.

    Empty unless the group covers the cell's three camera-side faces (+x, −y, +z);
    then the group's cells in the octant between the cell and the camera.
    """
    ext = group.shape
    x, y, z = at
    inside = x + 1 < ext[0] and y >= 1 and z + 1 < ext[2]
    covered = inside and all(group[p] for p in ((x + 1, y, z), (x, y - 1, z), (x, y, z + 1)))
    cut = np.zeros_like(group)
    if covered:
        cut[x:, : y + 1, z:] = group[x:, : y + 1, z:]
        cut[at] = False
    return cut
