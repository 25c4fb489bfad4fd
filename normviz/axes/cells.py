"""The Axis Explorer's setup and its selected cell: which cells share one mean and variance.

`AxesSetup` is what every section of the page runs on: the shared settings resolved
to one `Contract`, ε, the input generator and seed, and the selected cell. The
selected cell is a page knob per axis (`cell_b`, `cell_t`, ...); a pick in the flat
view's tensor grid names a cell by its index (ui/tensorgrid.picked_cell).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from normviz.core import Contract, contract
from normviz.data import DEFAULT_GENERATOR, generate
from normviz.knobs import Knob
from normviz.layouts import LAYOUTS
from normviz.limits import SIZE_LIMITS
from normviz.pretrained import RealInput

# the selected cell, one index per axis (the other layout's are kept for a switch)
CELL_KNOBS: tuple[Knob, ...] = tuple(
    Knob(f"cell_{a.lower()}", 0, lo=0, hi=SIZE_LIMITS[a] - 1, label=a)
    for a in ("B", "T", "C", "N", "H", "W")
)


@dataclass(frozen=True)
class AxesSetup:
    """What the Axis Explorer's sections run on (hashable: the runner's cache key)."""

    contract: Contract  # the shared settings resolved (method, layout, shape, G, axes)
    eps: float = 1e-5
    data: str = DEFAULT_GENERATOR  # input generator (normviz.data.GENERATORS)
    seed: int = 0
    groups: int = 2  # the sidebar's G: the GroupNorm thumbnail uses it for every method
    cell: tuple[int, ...] | None = None  # the selected cell; None: the first one
    real: RealInput | None = None  # a real source's tensor instead of the generator's

    @property
    def selected(self) -> tuple[int, ...]:
        """The selected cell, inside the tensor."""
        return clamp_cell(self.contract.shape, self.cell)

    def tensor(self) -> torch.Tensor:
        """The seeded input this setup describes."""
        con = self.contract
        if self.real is not None:
            return self.real.tensor()
        return generate(self.data, con.layout, con.shape, self.seed)


def example_setup() -> AxesSetup:
    """A small, fast setup: BatchNorm on (B, T, C) = (4, 6, 8), data 'channels'."""
    return AxesSetup(contract("batch", "BTC", (4, 6, 8)), data="channels", cell=(1, 2, 3))


def cell_keys(layout: str) -> list[str]:
    """The selected cell's knob names (URL names), one per axis of `layout`."""
    return [f"cell_{a.lower()}" for a in LAYOUTS[layout].axes]


def clamp_cell(shape: Sequence[int], cell: Sequence[int] | None) -> tuple[int, ...]:
    """`cell` moved inside `shape` (each index in 0..size−1); zeros when missing or malformed."""
    shape = tuple(int(s) for s in shape)
    try:
        idx = [int(i) for i in (cell or ())]
    except (TypeError, ValueError):
        idx = []
    if len(idx) != len(shape):
        idx = [0] * len(shape)
    return tuple(min(max(i, 0), max(n - 1, 0)) for i, n in zip(idx, shape, strict=True))


def linked_cell_warnings(
    layout: str, sizes: dict[str, int], values: dict[str, int], fresh: Sequence[str]
) -> list[tuple[str, str]]:
    """(knob, warning) for each cell index a link set outside the tensor (it falls back to 0).

    `fresh`: the cell knobs just read from the link (or their defaults); a value kept
    from an earlier run is clamped quietly instead, as the shape changed under it.
    """
    out = []
    for a, k in zip(LAYOUTS[layout].axes, cell_keys(layout), strict=True):
        n, v = sizes[a], values[k]
        if k in fresh and v >= n:
            out.append(
                (
                    k,
                    f"`{k}={v}` is not valid ({a} has {n} positions: expected a value from 0 "
                    f"to {n - 1}): using the default 0.",
                )
            )
    return out


def cell_text(layout: str, cell: Sequence[int]) -> str:
    """`B=0, T=2, C=5`."""
    return ", ".join(f"{a}={i}" for a, i in zip(LAYOUTS[layout].axes, cell, strict=True))


def group_slices(con: Contract, cell: Sequence[int]) -> tuple[slice, ...]:
    """The box of the tensor that shares `cell`'s statistic (every group is a box).

    A reduced axis contributes its full range, a kept axis the cell's index, and
    the channel axis the C/G channels of the cell's group.
    """
    lay = con.layout_obj
    out = []
    for d, (a, i) in enumerate(zip(lay.axes, cell, strict=True)):
        if d == lay.channel_axis:
            per = con.shape[d] // con.groups  # C/G channels pooled per group
            g = i // per
            out.append(slice(g * per, (g + 1) * per))
        elif a in con.reduced:
            out.append(slice(0, con.shape[d]))
        else:
            out.append(slice(i, i + 1))
    return tuple(out)


def box_text(layout: str, box: Sequence[slice]) -> str:
    """`B 0–3, T 0–5, C 3`: the index range of a box of the tensor on every axis."""
    parts = []
    for a, sl in zip(LAYOUTS[layout].axes, box, strict=True):
        last = sl.stop - 1
        parts.append(f"{a} {sl.start}" if last == sl.start else f"{a} {sl.start}–{last}")
    return ", ".join(parts)
