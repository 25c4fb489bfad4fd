"""Axis contracts: which values share one mean and variance, for a method, layout and shape.

`contract()` resolves (method, layout, shape) into a `Contract`, the one object the
rest of normviz takes; `group_ids()` says which elements share a statistic;
`identify()` names the method behind a set of axes; `check_values()` refuses what
torch refuses.

Internally the channel axis is always split in two, C -> (G, C/G): G groups are
kept apart and the C/G channels inside a group are pooled. G = 1 pools every
channel (LayerNorm), G = C keeps every channel apart (BatchNorm, InstanceNorm),
anything between is GroupNorm. That single rule covers every method.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from normviz.errors import NormConfigError, Refusal
from normviz.layouts import LAYOUTS, Layout
from normviz.methods import METHODS, STANDARD_METHODS, Method

AxesArg = str | Iterable[str] | None


@dataclass(frozen=True)
class Contract:
    """A method's axis contract resolved for one layout and shape."""

    method: str
    layout: str
    shape: tuple[int, ...]
    groups: int  # G: the channel axis becomes G kept groups of C/G pooled channels
    reduced: tuple[str, ...]  # layout axes pooled entirely (channel: G == 1)
    centred: bool

    @property
    def layout_obj(self) -> Layout:
        return LAYOUTS[self.layout]

    @property
    def method_obj(self) -> Method:
        return METHODS[self.method]

    def _names(self, pooled: bool) -> tuple[str, ...]:
        """Axis names in layout order that are pooled (`pooled`) or kept apart; GroupNorm's
        channel axis is both: its C/G channels are pooled, its G groups kept apart."""
        lay = self.layout_obj
        out = []
        for a in lay.axes:
            if a == lay.channel and self.method_obj.grouped:
                out.append(f"{a}/G" if pooled else "G")
            elif (a in self.reduced) == pooled:
                out.append(a)
        return tuple(out)

    @property
    def axes(self) -> tuple[str, ...]:
        """Reduced axis names in layout order; GroupNorm's pooled channels read "C/G"."""
        return self._names(pooled=True)

    @property
    def kept(self) -> tuple[str, ...]:
        """Axes that keep separate statistics ("G" for GroupNorm's groups)."""
        return self._names(pooled=False)

    @property
    def expanded_shape(self) -> tuple[int, ...]:
        """The shape with the channel axis split into (G, C/G)."""
        c = self.layout_obj.channel_axis
        C = self.shape[c]
        return (*self.shape[:c], self.groups, C // self.groups, *self.shape[c + 1 :])

    @property
    def reduce_dims(self) -> tuple[int, ...]:
        """Dimensions of `expanded_shape` that are pooled (C/G always is)."""
        lay = self.layout_obj
        c = lay.channel_axis
        dims = [
            i + (i > c) for i, a in enumerate(lay.axes) if a != lay.channel and a in self.reduced
        ]
        return tuple(sorted([*dims, c + 1]))

    @property
    def stat_shape(self) -> tuple[int, ...]:
        """Keepdim shape of one statistic tensor in the expanded view."""
        red = set(self.reduce_dims)
        return tuple(1 if i in red else s for i, s in enumerate(self.expanded_shape))

    @property
    def group_size(self) -> int:
        """m: how many values feed one mean and variance."""
        return math.prod(self.expanded_shape[d] for d in self.reduce_dims)

    @property
    def n_stats(self) -> int:
        return math.prod(self.shape) // self.group_size

    @property
    def per_channel(self) -> bool:
        """True when there is exactly one statistic per channel (running stats fit)."""
        lay = self.layout_obj
        return self.groups == self.shape[lay.channel_axis] and set(self.reduced) == (
            set(lay.axes) - {lay.channel}
        )

    def stat_ids(self) -> np.ndarray:
        """Integer array of `shape`: equal ids share one statistic (a broadcast view)."""
        ids = np.arange(self.n_stats, dtype=np.int64).reshape(self.stat_shape)
        return np.broadcast_to(ids, self.expanded_shape).reshape(self.shape)

    def size_text(self) -> str:
        """`B·T = 24`: the product behind `group_size`, for messages."""
        return f"{'·'.join(self.axes)} = {self.group_size}"


def _layout(layout: str) -> Layout:
    if layout not in LAYOUTS:
        raise NormConfigError(f"unknown layout {layout!r}: choose one of {', '.join(LAYOUTS)}")
    return LAYOUTS[layout]


def parse_axes(layout: str, axes: AxesArg) -> tuple[str, ...]:
    """Axis names from "B,T" or ["B", "T"], checked against the layout, in layout order."""
    lay = _layout(layout)
    if axes is None:
        names: list[str] = []
    elif isinstance(axes, str):
        names = [a.strip() for a in axes.split(",") if a.strip()]
    else:
        names = [str(a).strip() for a in axes]
    unknown = [a for a in names if a not in lay.axes]
    if unknown:
        raise NormConfigError(
            f"unknown axis {unknown[0]!r} for layout {lay.key}: its axes are {', '.join(lay.axes)}"
        )
    return tuple(a for a in lay.axes if a in names)


@lru_cache(maxsize=512)
def _contract(
    method: str,
    layout: str,
    shape: tuple[int, ...],
    groups: int | None,
    axes: tuple[str, ...] | None,
    centred: bool,
) -> Contract:
    lay = _layout(layout)
    if method not in METHODS:
        raise NormConfigError(f"unknown method {method!r}: choose one of {', '.join(METHODS)}")
    m = METHODS[method]
    if method != "custom" and not m.reduces.get(layout):
        raise NormConfigError(
            f"{m.label} has no axis contract: it computes no mean or variance, so no values "
            f"share a statistic ({m.summary}). Choose one of {', '.join(STANDARD_METHODS)} "
            "to see statistics pooled"
        )
    if len(shape) != lay.rank:
        raise NormConfigError(
            f"layout {lay.key} needs a {lay.rank}-D tensor ({', '.join(lay.axes)}); "
            f"got shape {shape} ({len(shape)}-D)"
        )
    for a, s in zip(lay.axes, shape, strict=True):
        if s <= 0:
            raise NormConfigError(
                f"axis {a} has size {s} in shape {lay.shape_text(shape)}: every axis needs "
                "at least one element"
            )
    C = shape[lay.channel_axis]
    if method == "custom":
        if not axes:
            raise NormConfigError(
                f"custom normalization needs at least one axis to reduce: choose from "
                f"{', '.join(lay.axes)}"
            )
        reduced, centred_ = axes, centred
    else:
        if axes:
            raise NormConfigError(
                f"axes= goes with method='custom'; {m.label} always reduces "
                f"{', '.join(_contract(method, layout, shape, groups, None, True).axes)}"
            )
        reduced, centred_ = m.reduces[layout], m.centred
    if m.grouped:
        if groups is None:
            raise NormConfigError(f"GroupNorm needs a number of groups G that divides C={C}")
        if groups < 1:
            raise NormConfigError(f"groups must be a whole number ≥ 1, got {groups!r}")
        if C % groups:
            raise NormConfigError(
                f"GroupNorm needs C divisible by groups: C={C}, groups={groups}. "
                f"Try groups in {_divisors(C)}"
            )
        G = groups
    else:
        if groups is not None:
            raise NormConfigError(f"groups= only applies to GroupNorm, not {m.label}")
        G = 1 if lay.channel in reduced else C
    return Contract(method, layout, shape, G, tuple(reduced), centred_)


def _divisors(n: int) -> str:
    return ", ".join(str(d) for d in range(1, n + 1) if n % d == 0)


def contract(
    method: str,
    layout: str,
    shape: Iterable[int],
    groups: int | None = None,
    axes: AxesArg = None,
    centred: bool = True,
) -> Contract:
    """Resolve a method's axis contract for a concrete shape.

    Raises:
        NormConfigError: unknown method, layout or axis; wrong rank; a zero-sized
            axis; GroupNorm with C not divisible by groups.
    """
    try:
        shape_t = tuple(int(s) for s in shape)
    except (TypeError, ValueError) as e:
        raise NormConfigError(f"shape must be a list of whole numbers, got {shape!r}") from e
    if isinstance(groups, np.integer):
        groups = int(groups)
    if groups is not None and (isinstance(groups, bool) or not isinstance(groups, int)):
        raise NormConfigError(f"groups must be a whole number ≥ 1, got {groups!r}")
    parsed = parse_axes(layout, axes) if axes is not None else None
    return _contract(method, layout, shape_t, groups, parsed or None, bool(centred))


def identify(layout: str, axes: AxesArg) -> str | None:
    """The standard method that reduces exactly `axes` (any order), else None.

    "layer" wins over "rms" for the same axes: it is the centred one.
    """
    wanted = set(parse_axes(layout, axes))
    for key in STANDARD_METHODS:
        m = METHODS[key]
        if not m.grouped and set(m.reduces[layout]) == wanted:
            return key
    return None


def group_ids(
    method: str,
    layout: str,
    shape: Iterable[int],
    groups: int | None = None,
    axes: AxesArg = None,
) -> np.ndarray:
    """Integer array of `shape`: equal ids share one mean/variance; ids are 0..n_stats−1."""
    con = contract(method, layout, shape, groups, axes)
    return con.stat_ids()


def check_values(con: Contract, from_input: bool = True) -> None:
    """Refuse what torch refuses: statistics from the input with one value each.

    `from_input` is False when BatchNorm normalizes with running statistics.

    Raises:
        NormConfigError: with the axes and the count that make the one value.
    """
    m, lay = con.method_obj, con.layout_obj
    if m.needs_two_in_training and from_input and con.group_size == 1:
        where = "in training " if m.train_eval_differ else ""
        raise Refusal(
            f"{m.label} {where}needs more than 1 value per {m.stat_noun}: "
            f"{con.size_text()} for shape {lay.shape_text(con.shape)}"
        )
    if m.grouped and math.prod(con.shape) == con.groups:
        # torch's GroupNorm runs BatchNorm's check on (N·C/G, G, rest): mirror its refusal
        raise Refusal(
            f"GroupNorm needs more than 1 value per group across the whole batch; shape "
            f"{lay.shape_text(con.shape)} with groups={con.groups} has one. Make the "
            "batch or an axis larger"
        )
