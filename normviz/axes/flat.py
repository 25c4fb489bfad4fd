"""The flat view's unfolding: which part of the tensor the tensor grid draws, and how.

(B, T, C) unfolds to rows B·T and columns C, (N, C, H, W) to rows N·C and columns
H·W; a large tensor is drawn through a window around the selected cell (rows and
columns capped separately). The grid itself (its cells, groups, μ and σ², and its
sentences) is normviz/axes/gridview.py, drawn by ui/tensorgrid.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from normviz import style
from normviz.axes import window
from normviz.core import Contract
from normviz.layouts import LAYOUTS

FLAT_MAX_ROWS = 96  # rows of the flat view before capping
FLAT_MAX_COLS = 128  # columns of the flat view before capping


@dataclass(frozen=True)
class FlatLayout:
    """How the flat view unfolds a tensor: rows are the first two axes, columns the rest."""

    row_dims: tuple[int, int]
    col_dims: tuple[int, ...]


def flat_layout(layout: str) -> FlatLayout:
    """(B, T, C) -> rows B·T, columns C; (N, C, H, W) -> rows N·C, columns H·W."""
    rank = LAYOUTS[layout].rank
    return FlatLayout((0, 1), tuple(range(2, rank)))


def flat_window(
    layout: str, shape: Sequence[int], cell: Sequence[int] | None = None
) -> window.Window:
    """The part of the tensor the flat view draws (rows and columns capped separately)."""
    fl = flat_layout(layout)
    win = window.make_window(layout, shape, cell, FLAT_MAX_ROWS, [fl.row_dims])
    cols = window.make_window(layout, shape, cell, FLAT_MAX_COLS, [fl.col_dims])
    start = tuple(cols.start[d] if d in fl.col_dims else win.start[d] for d in range(len(shape)))
    size = tuple(cols.size[d] if d in fl.col_dims else win.size[d] for d in range(len(shape)))
    while math.prod(size) > style.MAX_CELLS_2D:  # only if someone lowers the 2D cap
        d = int(np.argmax(size))
        size = tuple(k // 2 if i == d else k for i, k in enumerate(size))
    return window.Window(layout, tuple(int(s) for s in shape), start, size)


@dataclass(frozen=True)
class FlatView:
    """What the flat view draws: the window of the tensor and its values, the selection."""

    contract: Contract
    cell: tuple[int, ...]
    partition: bool
    window: window.Window
    values: np.ndarray  # float32, the window's values in row-major order


def flat_view(
    x: torch.Tensor | np.ndarray,
    con: Contract,
    cell: Sequence[int] | None = None,
    partition: bool = False,
) -> FlatView:
    """The part of `x` the flat view draws (a window around `cell`), for `con`.

    Raises:
        NormConfigError: a cell outside the tensor.
    """
    arr = x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)
    shape = tuple(int(s) for s in arr.shape)
    cell = window.check_cell(con.layout, shape, cell)
    win = flat_window(con.layout, shape, cell)
    vals = arr[win.slices()].reshape(-1).astype(np.float32)
    return FlatView(con, cell, partition, win, vals)
