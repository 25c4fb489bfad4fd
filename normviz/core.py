"""The one formula, y = γ · (x − μ) / sqrt(σ² + ε) + β, over a method's axes.

`contract()` turns (method, layout, shape) into the axes that supply μ and σ²;
`normalize()` applies the formula; `group_ids()` says which elements share a
statistic; `identify()` names the method behind a set of axes.

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
import torch

from normviz.errors import NormConfigError, Refusal
from normviz.layouts import LAYOUTS, Layout
from normviz.methods import METHODS, STANDARD_METHODS, Method
from normviz.running import RunningStats

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
    ids = np.arange(con.n_stats, dtype=np.int64).reshape(con.stat_shape)
    return np.broadcast_to(ids, con.expanded_shape).reshape(con.shape)


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


@dataclass(frozen=True)
class NormResult:
    """What normalize() returns: the output and the statistics that produced it."""

    output: torch.Tensor  # same shape as x
    mean: torch.Tensor | None  # keepdim, broadcastable to x; None when not centred
    var: torch.Tensor  # biased variance (mean square when not centred), keepdim
    axes: tuple[str, ...]  # reduced axis names
    contract: Contract


def as_tensor(x: torch.Tensor | np.ndarray) -> torch.Tensor:
    """A float32/float64 tensor view of `x` (other real dtypes become float32)."""
    if isinstance(x, np.ndarray):
        if x.dtype.kind not in "biuf":
            raise NormConfigError(f"x must hold real numbers; got dtype {x.dtype}")
        x = torch.from_numpy(np.ascontiguousarray(x))
    if not isinstance(x, torch.Tensor):
        raise NormConfigError(f"x must be a torch.Tensor or numpy array, got {type(x).__name__}")
    if x.is_complex():
        raise NormConfigError(f"x must hold real numbers; got dtype {x.dtype}")
    if x.dtype not in (torch.float32, torch.float64):
        x = x.to(torch.float32)
    return x


def _param(p: object, name: str, C: int, x: torch.Tensor) -> torch.Tensor | None:
    if p is None:
        return None
    t = as_tensor(p if isinstance(p, torch.Tensor | np.ndarray) else np.asarray(p, np.float64))
    if tuple(t.shape) != (C,):
        raise NormConfigError(
            f"{name} must have shape (C,) = ({C},), one value per channel; got {tuple(t.shape)}"
        )
    return t.to(x.dtype)


def normalize(
    x: torch.Tensor | np.ndarray,
    method: str,
    layout: str,
    *,
    groups: int | None = None,
    axes: AxesArg = None,
    eps: float = 1e-5,
    weight: torch.Tensor | np.ndarray | None = None,
    bias: torch.Tensor | np.ndarray | None = None,
    training: bool = True,
    running: RunningStats | None = None,
    centred: bool = True,
) -> NormResult:
    """y = γ · (x − μ) / sqrt(σ² + ε) + β with μ, σ² over the method's axes.

    `centred` only matters for method="custom" (False: RMS-style, no mean).
    BatchNorm: training=True uses batch statistics and updates `running`;
    training=False normalizes with `running` (batch statistics if None).

    Raises:
        NormConfigError: any invalid setting, with the numbers in the message.
    """
    x = as_tensor(x)
    con = contract(method, layout, tuple(x.shape), groups, axes, centred)
    lay = con.layout_obj
    try:
        eps = float(eps)
    except (TypeError, ValueError) as e:
        raise NormConfigError(f"eps must be a number ≥ 0, got {eps!r}") from e
    if not eps >= 0 or math.isinf(eps):
        raise NormConfigError(f"eps must be a finite number ≥ 0, got {eps}")
    C = con.shape[lay.channel_axis]
    w = _param(weight, "weight (γ)", C, x)
    b = _param(bias, "bias (β)", C, x)

    use_running = running is not None and not training
    if running is not None:
        if not con.per_channel:
            raise NormConfigError(
                f"running statistics hold one value per channel; {con.method_obj.label} "
                f"keeps {', '.join(con.kept)} separate"
            )
        if running.num_features != C:
            raise NormConfigError(
                f"running statistics have {running.num_features} channels but x has C={C}"
            )
    check_values(con, from_input=not use_running)

    xv = x.reshape(con.expanded_shape)
    w_e = _param_view(w, con)
    b_e = _param_view(b, con)
    if use_running:
        assert running is not None
        mean_e = running.mean.to(x.dtype).reshape(con.stat_shape)
        var_e = running.var.to(x.dtype).reshape(con.stat_shape)
        out = _apply(xv, mean_e, var_e, w_e, b_e, eps)
    else:
        out, mean_e, var_e = _normalize_fast(xv, con, w_e, b_e, eps)
        if running is not None and training:
            running.update(mean_e.reshape(-1), var_e.reshape(-1), n=con.group_size)
    return NormResult(
        output=out.reshape(con.shape),
        mean=None if mean_e is None else _to_x_shape(mean_e, con),
        var=_to_x_shape(var_e, con),
        axes=con.axes,
        contract=con,
    )


def _param_view(p: torch.Tensor | None, con: Contract) -> torch.Tensor | None:
    """γ or β of shape (C,) viewed as (1, .., G, C/G, .., 1) for the expanded tensor."""
    if p is None:
        return None
    c = con.layout_obj.channel_axis
    shape = [1] * len(con.expanded_shape)
    shape[c], shape[c + 1] = con.expanded_shape[c], con.expanded_shape[c + 1]
    return p.reshape(shape)


def _to_x_shape(stat: torch.Tensor, con: Contract) -> torch.Tensor:
    """A statistic in the expanded keepdim shape, made broadcastable to x itself."""
    c = con.layout_obj.channel_axis
    shape = list(stat.shape)
    if 1 < con.groups < con.shape[c]:  # GroupNorm: repeat each group's value over its channels
        shape[c + 1] = con.expanded_shape[c + 1]
        stat = stat.expand(shape)
    return stat.reshape(*shape[:c], shape[c] * shape[c + 1], *shape[c + 2 :])


def _apply(
    xv: torch.Tensor,
    mean: torch.Tensor | None,
    var: torch.Tensor,
    w: torch.Tensor | None,
    b: torch.Tensor | None,
    eps: float,
) -> torch.Tensor:
    """The one formula, written as x·scale + shift so it costs one pass over x."""
    scale = torch.rsqrt(var + eps)
    if w is not None:
        scale = scale * w
    shift = torch.zeros((), dtype=xv.dtype) if mean is None else -mean * scale
    if b is not None:
        shift = shift + b
    return torch.addcmul(shift, xv, scale)


def _segments(con: Contract) -> list[tuple[bool, list[int]]]:
    """Runs of adjacent non-trivial dims with the same role: [(reduced, dims), ...]."""
    red = set(con.reduce_dims)
    segs: list[tuple[bool, list[int]]] = []
    for d, s in enumerate(con.expanded_shape):
        if s == 1:
            continue
        r = d in red
        if segs and segs[-1][0] == r:
            segs[-1][1].append(d)
        else:
            segs.append((r, [d]))
    return segs


def _flat_param(
    p: torch.Tensor | None, shape: tuple[int, ...], keep: set[int]
) -> torch.Tensor | None:
    """γ/β broadcast over the dims in `keep` (1 elsewhere), flattened for a torch kernel."""
    if p is None:
        return None
    target = tuple(s if d in keep else 1 for d, s in enumerate(shape))
    return p.expand(target).reshape(-1)


def _normalize_fast(
    xv: torch.Tensor,
    con: Contract,
    w: torch.Tensor | None,
    b: torch.Tensor | None,
    eps: float,
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """Statistics and output in as few passes over x as torch's own layers take.

    The formula is the one in `_apply`; this picks the torch kernel that computes
    it fused (and rounds as torch's layers do). GroupNorm's kernel fits every
    centred contract once kept axes come first and pooled ones last, so a
    layout that fits no kernel as it lies is permuted into that order, the
    copy torch's own modules make for such layouts too.
    Returns (output, mean, var) with statistics in `con.stat_shape`.
    """
    shape = con.expanded_shape
    red = set(con.reduce_dims)
    c = con.layout_obj.channel_axis
    n_red = con.group_size
    n_keep = xv.numel() // n_red
    if not con.centred:
        var = torch.linalg.vector_norm(xv, 2, dim=con.reduce_dims, keepdim=True)
        var = var.square_().div_(n_red)
        return _apply(xv, None, var, w, b, eps), None, var
    affine = w is not None or b is not None
    varying = {d for d in (c, c + 1) if shape[d] > 1} if affine else set()
    keep = set(range(len(shape))) - red
    roles = [r for r, _ in _segments(con)]
    if n_red > 1:  # BatchNorm's kernel refuses one value per statistic
        # (kept, pooled): each row is one statistic -> LayerNorm's kernel
        if roles in ([True], [False, True]) and varying <= red:
            out, mean, rstd = torch.native_layer_norm(
                xv.reshape(n_keep, n_red),
                [n_red],
                _flat_param(w, shape, red),
                _flat_param(b, shape, red),
                eps,
            )
            return out, mean.reshape(con.stat_shape), _var_from_rstd(rstd, eps, con)
        # (pooled, kept, pooled): one statistic per kept index -> BatchNorm's kernel
        if roles.count(False) == 1 and varying <= keep:
            i = roles.index(False)
            before = math.prod(shape[d] for _, ds in _segments(con)[:i] for d in ds)
            after = n_red // before
            xk = xv.reshape(before, n_keep) if after == 1 else xv.reshape(before, n_keep, after)
            out, mean, rstd = torch.native_batch_norm(
                xk,
                _flat_param(w, shape, keep),
                _flat_param(b, shape, keep),
                None,
                None,
                True,
                0.0,
                eps,
            )
            return out, mean.reshape(con.stat_shape), _var_from_rstd(rstd, eps, con)
    # (kept..., G, C/G, pooled...) -> GroupNorm's kernel, after a permute if needed
    kept_nc = [d for d in sorted(keep) if d != c]
    red_nc = [d for d in sorted(red) if d != c + 1]
    order = [*kept_nc, c, c + 1, *red_nc]
    xp = xv if order == sorted(order) else xv.permute(order).contiguous()
    n = math.prod(shape[d] for d in kept_nc)
    C = shape[c] * shape[c + 1]
    hw = math.prod(shape[d] for d in red_nc)
    out, mean, rstd = torch.native_group_norm(
        xp.reshape(n, C, hw), _chan(w), _chan(b), n, C, hw, shape[c], eps
    )
    back = [order.index(d) for d in range(len(shape))]
    out = out.reshape([shape[d] for d in order]).permute(back)
    stat_dims = [*kept_nc, c]
    to_sorted = sorted(range(len(stat_dims)), key=lambda i: stat_dims[i])
    mean = mean.reshape([shape[d] for d in stat_dims]).permute(to_sorted)
    rstd = rstd.reshape([shape[d] for d in stat_dims]).permute(to_sorted)
    return out, mean.reshape(con.stat_shape), _var_from_rstd(rstd, eps, con)


def _chan(p: torch.Tensor | None) -> torch.Tensor | None:
    return None if p is None else p.reshape(-1)


def _var_from_rstd(rstd: torch.Tensor, eps: float, con: Contract) -> torch.Tensor:
    """Torch's fused kernels return 1/sqrt(σ² + ε); recover the biased σ² (≥ 0)."""
    return (
        (rstd.double().reciprocal().square() - eps)
        .clamp_min(0)
        .to(rstd.dtype)
        .reshape(con.stat_shape)
    )
