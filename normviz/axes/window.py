"""A box of the tensor that a figure draws, and the pieces every block drawing shares.

Large tensors are drawn through a `Window`, a box of the tensor around the
selected cell, with a note of what is left out. Partition mode colours every
statistic group from one stepped colour scale (black stays free for the
selected cell).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from normviz import style
from normviz.core import Contract, NormConfigError
from normviz.figures.spec import Spec
from normviz.layouts import LAYOUTS

# Partition colours cycle through the palette without black (black marks the selected cell).
PARTITION_COLOURS: tuple[str, ...] = tuple(c for c in style.PALETTE if c != style.SELECTED)


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


def check_cell(layout: str, shape: tuple[int, ...], cell: Sequence[int] | None) -> tuple[int, ...]:
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
    cell = check_cell(layout, shape, cell)
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


def int_array(a: np.ndarray) -> np.ndarray:
    """The smallest integer dtype that holds `a` (plotly ships typed arrays as base64)."""
    return a.astype(np.int16 if a.size == 0 or int(a.max()) < 2**15 else np.int32)


def window_ids(con: Contract, win: Window) -> np.ndarray:
    """Group ids of the window's cells, row-major (the ids are a broadcast view: cheap)."""
    return np.asarray(con.stat_ids()[win.slices()]).reshape(-1)


def partition_scale() -> list[list]:
    """A stepped colour scale: colour number k (0..len−1) draws PARTITION_COLOURS[k]."""
    n = len(PARTITION_COLOURS)
    return [[(k + edge) / n, c] for k, c in enumerate(PARTITION_COLOURS) for edge in (0, 1)]


def partition_marker(ids: np.ndarray) -> dict:
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


def hover(layout: str, extra: str = "") -> str:
    axes = LAYOUTS[layout].axes
    idx = ", ".join(f"{a}=%{{customdata[{i}]}}" for i, a in enumerate(axes))
    return f"{idx}{extra}<extra></extra>"


def add_note(fig: Spec, win: Window) -> None:
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
