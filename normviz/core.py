"""The one formula, y = γ · (x − μ) / sqrt(σ² + ε) + β, over a contract's axes.

`normalize()` resolves the contract (normviz.contracts) and applies the formula;
`apply_contract()` applies it to an already resolved `Contract`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from normviz.contracts import (
    AxesArg,
    Contract,
    check_values,
    contract,
    group_ids,
    identify,
    parse_axes,
)
from normviz.errors import NormConfigError, Refusal
from normviz.running import RunningStats

__all__ = [
    "AxesArg",
    "Contract",
    "NormConfigError",
    "NormResult",
    "Refusal",
    "apply_contract",
    "as_tensor",
    "check_values",
    "contract",
    "exact_stats",
    "group_ids",
    "identify",
    "normalize",
    "parse_axes",
]


@dataclass(frozen=True)
class NormResult:
    """What normalize() returns: the output and the statistics that produced it.

    `mean` and `var` are computed exactly, in one pass (`exact_stats`), the first time
    they are read: most callers want only the output, which torch's fused kernels give
    faster but with σ² rebuilt as 1/rstd² − ε (digits lost when σ² is small against ε).
    """

    output: torch.Tensor  # same shape as x
    axes: tuple[str, ...]  # reduced axis names
    contract: Contract
    # (mean, var) once known, else the input they come from and its version counter
    _stats: dict[str, object] = field(repr=False, compare=False)

    @property
    def mean(self) -> torch.Tensor | None:
        """Keepdim, broadcastable to x; None when not centred."""
        return self._resolved()[0]

    @property
    def var(self) -> torch.Tensor:
        """Biased variance (mean square when not centred), keepdim, broadcastable to x."""
        return self._resolved()[1]

    def _resolved(self) -> tuple[torch.Tensor | None, torch.Tensor]:
        st = self._stats
        if "var" not in st:  # two threads may both compute it: the same values
            xv = st["x"]
            assert isinstance(xv, torch.Tensor)
            if xv._version != st["version"]:
                raise RuntimeError(
                    "x was changed in place after normalize(); read res.mean or res.var "
                    "before changing it"
                )
            mean, var = exact_stats(xv, self.contract)
            st["mean"] = None if mean is None else _to_x_shape(mean, self.contract)
            st["var"] = _to_x_shape(var, self.contract)
            st.pop("x", None)  # the statistics are all the result needs of x now
        return st["mean"], st["var"]  # type: ignore[return-value]


def exact_stats(xv: torch.Tensor, con: Contract) -> tuple[torch.Tensor | None, torch.Tensor]:
    """μ and the biased σ² of x (viewed as `con.expanded_shape`) in `con.stat_shape`.

    One pass, in x's dtype: torch.var_mean (Welford) for a centred contract, the mean
    square otherwise. No ε enters, so σ² keeps its digits however small it is.
    """
    if not con.centred:
        return None, _mean_square(xv, con)
    var, mean = torch.var_mean(xv, dim=con.reduce_dims, correction=0, keepdim=True)
    return mean, var


def _mean_square(xv: torch.Tensor, con: Contract) -> torch.Tensor:
    var = torch.linalg.vector_norm(xv, 2, dim=con.reduce_dims, keepdim=True)
    return var.square_().div_(con.group_size)


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
    return apply_contract(
        x, con, eps=eps, weight=weight, bias=bias, training=training, running=running
    )


def apply_contract(
    x: torch.Tensor | np.ndarray,
    con: Contract,
    *,
    eps: float = 1e-5,
    weight: torch.Tensor | np.ndarray | None = None,
    bias: torch.Tensor | np.ndarray | None = None,
    training: bool = True,
    running: RunningStats | None = None,
) -> NormResult:
    """normalize() for a resolved contract (x must have the contract's shape).

    Raises:
        NormConfigError: any invalid setting, with the numbers in the message.
    """
    x = as_tensor(x)
    if tuple(x.shape) != con.shape:
        raise NormConfigError(f"x has shape {tuple(x.shape)}, the contract is for {con.shape}")
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
        if not con.centred:
            raise NormConfigError(
                "running statistics hold a mean and a variance; this contract is not centred"
            )
        if running.num_features != C:
            raise NormConfigError(
                f"running statistics have {running.num_features} channels but x has C={C}"
            )
    check_values(con, from_input=not use_running)

    xv = x.reshape(con.expanded_shape)
    w_e = _param_view(w, con)
    b_e = _param_view(b, con)
    stats: dict[str, object] = {"x": xv, "version": xv._version}
    if use_running:
        assert running is not None
        mean_e = running.mean.to(x.dtype).reshape(con.stat_shape)
        var_e = running.var.to(x.dtype).reshape(con.stat_shape)
        out = _apply(xv, mean_e, var_e, w_e, b_e, eps)
        stats = {"mean": _to_x_shape(mean_e, con), "var": _to_x_shape(var_e, con)}
    elif not con.centred:  # RMS-style: the mean square is the statistic and the divisor
        var_e = _mean_square(xv, con)
        out = _apply(xv, None, var_e, w_e, b_e, eps)
        stats = {"mean": None, "var": _to_x_shape(var_e, con)}
    else:
        out = _normalize_fast(xv, con, w_e, b_e, eps)
        if running is not None and training:
            mean_e, var_e = exact_stats(xv, con)
            assert mean_e is not None  # centred: checked above
            running.update(mean_e.reshape(-1), var_e.reshape(-1), n=con.group_size)
            stats = {"mean": _to_x_shape(mean_e, con), "var": _to_x_shape(var_e, con)}
    return NormResult(output=out.reshape(con.shape), axes=con.axes, contract=con, _stats=stats)


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
) -> torch.Tensor:
    """A centred contract's output in as few passes over x as torch's own layers take.

    The formula is the one in `_apply`; this picks the torch kernel that computes
    it fused (and rounds as torch's layers do). GroupNorm's kernel fits every
    centred contract once kept axes come first and pooled ones last, so a
    layout that fits no kernel as it lies is permuted into that order, the
    copy torch's own modules make for such layouts too.
    The kernels' statistics are dropped: they give σ² only as 1/sqrt(σ² + ε), and
    LayerNorm's kernel sums squares, so exact_stats() computes the ones shown.
    """
    shape = con.expanded_shape
    red = set(con.reduce_dims)
    c = con.layout_obj.channel_axis
    n_red = con.group_size
    n_keep = xv.numel() // n_red
    affine = w is not None or b is not None
    varying = {d for d in (c, c + 1) if shape[d] > 1} if affine else set()
    keep = set(range(len(shape))) - red
    roles = [r for r, _ in _segments(con)]
    if n_red > 1:  # BatchNorm's kernel refuses one value per statistic
        # (kept, pooled): each row is one statistic -> LayerNorm's kernel
        if roles in ([True], [False, True]) and varying <= red:
            out, _, _ = torch.native_layer_norm(
                xv.reshape(n_keep, n_red),
                [n_red],
                _flat_param(w, shape, red),
                _flat_param(b, shape, red),
                eps,
            )
            return out
        # (pooled, kept, pooled): one statistic per kept index -> BatchNorm's kernel
        if roles.count(False) == 1 and varying <= keep:
            i = roles.index(False)
            before = math.prod(shape[d] for _, ds in _segments(con)[:i] for d in ds)
            after = n_red // before
            xk = xv.reshape(before, n_keep) if after == 1 else xv.reshape(before, n_keep, after)
            out, _, rstd = torch.native_batch_norm(
                xk,
                _flat_param(w, shape, keep),
                _flat_param(b, shape, keep),
                None,
                None,
                True,
                0.0,
                eps,
            )
            if eps == 0 and not bool(rstd.all()):
                # ATen's kernel writes 1/sqrt(0) as 0 (y = 0); the formula says 0/0 = NaN,
                # as torch's LayerNorm and GroupNorm kernels give: keep the methods alike
                dead = (rstd == 0).reshape(-1, n_keep, *([1] * (xk.dim() - 2)))
                out = out.masked_fill(dead.expand_as(out), float("nan"))
            return out
    # (kept..., G, C/G, pooled...) -> GroupNorm's kernel, after a permute if needed
    kept_nc = [d for d in sorted(keep) if d != c]
    red_nc = [d for d in sorted(red) if d != c + 1]
    order = [*kept_nc, c, c + 1, *red_nc]
    xp = xv if order == sorted(order) else xv.permute(order).contiguous()
    n = math.prod(shape[d] for d in kept_nc)
    C = shape[c] * shape[c + 1]
    hw = math.prod(shape[d] for d in red_nc)
    out, _, _ = torch.native_group_norm(
        xp.reshape(n, C, hw), _chan(w), _chan(b), n, C, hw, shape[c], eps
    )
    back = [order.index(d) for d in range(len(shape))]
    return out.reshape([shape[d] for d in order]).permute(back)


def _chan(p: torch.Tensor | None) -> torch.Tensor | None:
    return None if p is None else p.reshape(-1)
