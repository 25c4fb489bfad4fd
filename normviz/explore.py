"""What the Axis Explorer says in words and numbers, built from the registry and the contract.

`selected_group()` shows one statistic group with its numbers substituted into
the formula; `contract_card()` summarises a method's axis contract for a shape;
`explain_axes()` and `confusions()` name the method behind a set of axes and the
classic mix-ups that apply to it. No streamlit here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from normviz.core import (
    AxesArg,
    Contract,
    NormConfigError,
    as_tensor,
    contract,
    identify,
    normalize,
    parse_axes,
)
from normviz.layouts import LAYOUTS
from normviz.methods import METHODS

SHOWN_VALUES = 6  # values of a group listed in the numbers section


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


def cell_from_point(point: object, shape: Sequence[int]) -> tuple[int, ...] | None:
    """The cell a clicked flat-view marker names (its customdata), clamped; None if unusable.

    The browser sends customdata as a list, or as {"0": i, "1": j, ...} when the
    figure shipped it as a typed array.
    """
    raw = point.get("customdata") if isinstance(point, dict) else None
    if isinstance(raw, dict):
        try:
            raw = [raw[k] for k in sorted(raw, key=int)]
        except (TypeError, ValueError):
            return None
    if not isinstance(raw, list | tuple) or len(raw) != len(shape):
        return None
    try:
        cell = [int(v) for v in raw]
    except (TypeError, ValueError, OverflowError):
        return None
    return clamp_cell(shape, cell)


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


def cell_text(layout: str, cell: Sequence[int]) -> str:
    """`B=0, T=2, C=5`."""
    return ", ".join(f"{a}={i}" for a, i in zip(LAYOUTS[layout].axes, cell, strict=True))


def _num(v: float) -> str:
    """A number short enough for a formula on a projector."""
    if v == 0:
        return "0"
    if abs(v) >= 1e4 or abs(v) < 1e-3:
        mant, exp = f"{v:.3e}".split("e")
        return rf"{mant}\times 10^{{{int(exp)}}}"
    return f"{v:.4g}" if abs(v) >= 1 else f"{v:.4f}".rstrip("0")


def _paren(v: float) -> str:
    """A number ready to follow a minus sign."""
    return f"({_num(v)})" if v < 0 else _num(v)


def _eps(v: float) -> str:
    return "0" if v == 0 else f"10^{{{round(math.log10(v))}}}" if _is_pow10(v) else _num(v)


def _is_pow10(v: float) -> bool:
    return v > 0 and math.isclose(10 ** round(math.log10(v)), v, rel_tol=1e-9)


@dataclass(frozen=True)
class GroupDetail:
    """One statistic group: which values it pools and the selected cell's computation."""

    layout: str
    method_label: str
    cell: tuple[int, ...]
    m: int  # values pooled into this mean and variance
    size_text: str  # "B·T = 24"
    values: tuple[float, ...]  # the first few values of the group (row-major)
    mean: float | None  # μ; None when the method does not centre (RMSNorm)
    var: float  # σ² (biased), or the mean square when not centred
    eps: float
    x: float  # the selected cell's input
    y: float  # its output (γ = 1, β = 0: a freshly initialised layer)

    @property
    def centred(self) -> bool:
        return self.mean is not None

    def values_text(self) -> str:
        """`1.23, −0.5, … (24 values)`."""
        shown = ", ".join(f"{v:.3f}" for v in self.values)
        more = f", … ({self.m:,} values)" if self.m > len(self.values) else ""
        return shown + more

    def stats_latex(self) -> str:
        """μ and σ² of the group as LaTeX, with m shown."""
        if self.mean is None:
            return (
                rf"\tfrac{{1}}{{m}}\textstyle\sum x^2 = {_num(self.var)}"
                rf"\quad (m = {self.m:,})"
            )
        return (
            rf"\mu = \tfrac{{1}}{{m}}\textstyle\sum x = {_num(self.mean)},\quad "
            rf"\sigma^2 = \tfrac{{1}}{{m}}\textstyle\sum (x-\mu)^2 = {_num(self.var)}"
            rf"\quad (m = {self.m:,})"
        )

    def formula_latex(self) -> str:
        """The symbolic formula this group uses (no μ when the method does not centre)."""
        if self.mean is None:
            return r"y = \frac{x}{\sqrt{\tfrac{1}{m}\sum x^2 + \varepsilon}} \cdot \gamma + \beta"
        return r"y = \frac{x - \mu}{\sqrt{\sigma^2 + \varepsilon}} \cdot \gamma + \beta"

    def computation_latex(self) -> str:
        """(x − μ)/√(σ² + ε)·γ + β = y with the numbers substituted (γ = 1, β = 0)."""
        num = f"{_num(self.x)} - {_paren(self.mean)}" if self.mean is not None else _num(self.x)
        den = rf"\sqrt{{{_num(self.var)} + {_eps(self.eps)}}}"
        return rf"y = \frac{{{num}}}{{{den}}} \cdot 1 + 0 = {_num(self.y)}"


def selected_group(
    x: torch.Tensor | np.ndarray,
    method: str,
    layout: str,
    cell: Sequence[int],
    *,
    groups: int | None = None,
    axes: AxesArg = None,
    eps: float = 1e-5,
    centred: bool = True,
) -> GroupDetail:
    """The statistic group of `cell`, its μ and σ², and the cell's normalized value.

    Raises:
        NormConfigError: settings torch refuses (e.g. BatchNorm with one value per
            channel in training), with the reason in the message.
    """
    x = as_tensor(x)
    cell = tuple(int(i) for i in cell)
    if clamp_cell(tuple(x.shape), cell) != cell:
        raise NormConfigError(
            f"cell {cell} is outside the tensor {LAYOUTS[layout].shape_text(tuple(x.shape))}"
        )
    res = normalize(x, method, layout, groups=groups, axes=axes, eps=eps, centred=centred)
    con = res.contract
    box = x[group_slices(con, cell)]
    # the statistics are keepdim tensors broadcastable to x: index them at the cell
    at = tuple(0 if n == 1 else i for i, n in zip(cell, res.var.shape, strict=True))
    mean = None if res.mean is None else float(res.mean[at])
    return GroupDetail(
        layout=layout,
        method_label=con.method_obj.label,
        cell=cell,
        m=con.group_size,
        size_text=con.size_text(),
        values=tuple(float(v) for v in box.reshape(-1)[:SHOWN_VALUES]),
        mean=mean,
        var=float(res.var[at]),
        eps=float(eps),
        x=float(x[cell]),
        y=float(res.output[cell]),
    )


def refusal_hint(
    method: str,
    layout: str,
    shape: Sequence[int],
    groups: int | None = None,
    axes: AxesArg = None,
    centred: bool = True,
) -> str:
    """What to change when torch refuses a setting that has one value per statistic."""
    con = contract(method, layout, shape, groups, axes, centred)
    if con.group_size > 1:
        return ""
    m = con.method_obj
    pooled = [a for a in con.axes if "/" not in a]
    grow = " or ".join(pooled) if pooled else con.layout_obj.channel
    where = "In training, t" if m.train_eval_differ else "T"
    return (
        f"{where}orch needs at least two values per {m.stat_noun} to estimate a variance "
        f"(one value has variance 0, so the output would be all zeros). Make {grow} "
        "larger than 1"
        + (
            "; in evaluation mode BatchNorm uses its running statistics and accepts any batch."
            if m.train_eval_differ
            else "."
        )
    )


# ---- the contract card ---------------------------------------------------------------


@dataclass(frozen=True)
class ContractCard:
    """The axis contract of a method at one shape, in the terms a student asks about."""

    label: str
    reduces: tuple[str, ...]  # axis names ("C/G" for GroupNorm's pooled channels)
    keeps: tuple[str, ...]  # axes that keep separate statistics ("G": GroupNorm's groups)
    n_stats: int
    per_stat: int  # m
    size_text: str  # "B·T = 24"
    centred: bool
    uses_other_samples: bool
    train_eval_differ: bool

    def rows(self) -> list[tuple[str, str]]:
        """(question, answer) pairs for a two-column card."""
        yn = {True: "yes", False: "no"}
        return [
            ("reduces over", ", ".join(self.reduces)),
            ("keeps separate", ", ".join(self.keeps) or "nothing: one statistic for all"),
            ("number of statistics", f"{self.n_stats:,} means and variances"),
            ("values per statistic", f"m = {self.size_text}"),
            ("subtracts the mean", yn[self.centred]),
            ("depends on other samples in the batch", yn[self.uses_other_samples]),
            ("differs between training and evaluation", yn[self.train_eval_differ]),
        ]


def contract_card(
    method: str,
    layout: str,
    shape: Sequence[int],
    groups: int | None = None,
    axes: AxesArg = None,
    centred: bool = True,
) -> ContractCard:
    """The contract card for `method` at `shape`.

    "Depends on other samples" is read off the contract (does it pool the sample
    axis?); for the named methods that agrees with the registry's flag, and for
    custom axes it is the only source. A custom reduction that pools the batch
    would, like BatchNorm, need running statistics to work on one sample at a time.

    Raises:
        NormConfigError: invalid settings.
    """
    con = contract(method, layout, shape, groups, axes, centred)
    m = con.method_obj
    pools_samples = con.layout_obj.sample in con.reduced
    differ = m.train_eval_differ if method != "custom" else pools_samples
    return ContractCard(
        label=m.label,
        reduces=con.axes,
        keeps=con.kept,
        n_stats=con.n_stats,
        per_stat=con.group_size,
        size_text=con.size_text(),
        centred=con.centred,
        uses_other_samples=pools_samples,
        train_eval_differ=differ,
    )


# ---- custom axes and the classic confusions -----------------------------------------


@dataclass(frozen=True)
class Confusion:
    """A classic mix-up of axes, explained with the current shape's numbers."""

    key: str  # "channels_last", "batchnorm1d", "instance_as_layer"
    title: str
    text: str


@dataclass(frozen=True)
class AxesVerdict:
    """Which method, if any, reduces exactly the chosen axes."""

    axes: tuple[str, ...]
    method: str | None  # a registry key, or None
    text: str


def explain_axes(layout: str, axes: AxesArg, centred: bool = True) -> AxesVerdict:
    """Name the standard method behind `axes` (via identify), or say that none matches.

    Raises:
        NormConfigError: an axis the layout does not have.
    """
    names = parse_axes(layout, axes)
    if not names:
        return AxesVerdict((), None, "Tick at least one axis: a statistic needs values to pool.")
    key = identify(layout, names)
    listed = ", ".join(names)
    if key is not None and not centred and key == "layer":
        key = "rms"  # the same axes without centring is RMSNorm's contract
    if key is None:
        text = (
            f"No standard layer reduces exactly {listed}. This is a custom normalization: "
            "the formula still works, but no torch.nn module computes it for you."
        )
    else:
        label = METHODS[key].label
        text = f"Reducing {listed} is exactly what {label} does: {METHODS[key].summary}."
        if centred != METHODS[key].centred:
            text += (
                " (Its statistics come from the same values, but it "
                + ("subtracts" if METHODS[key].centred else "does not subtract")
                + " the mean.)"
            )
    return AxesVerdict(names, key, text)


def confusions(
    method: str,
    layout: str,
    shape: Sequence[int],
    groups: int | None = None,
    axes: AxesArg = None,
) -> tuple[Confusion, ...]:
    """The classic mix-ups that apply to this setting, with this shape's numbers.

    Raises:
        NormConfigError: invalid settings.
    """
    con = contract(method, layout, shape, groups, axes)
    lay = con.layout_obj
    sizes = dict(zip(lay.axes, con.shape, strict=True))
    reduced = set(con.reduced)
    grouped = con.method_obj.grouped
    out: list[Confusion] = []
    if layout == "NCHW":
        N, C, H, W = (sizes[a] for a in lay.axes)
        if (not grouped and reduced == {"C"}) or (grouped and con.groups == 1):
            out.append(
                Confusion(
                    "channels_last",
                    "Channels-last LayerNorm is not GroupNorm(1, C)",
                    f"LayerNorm over C alone, as ConvNeXt applies it to a channels-last "
                    f"tensor, gives every pixel its own statistics: {N * H * W:,} of them, "
                    f"each from the C = {C} channel values at that pixel. GroupNorm(1, {C}) "
                    f"pools the whole image instead: {N:,} statistics, each from "
                    f"C·H·W = {C * H * W:,} values (the same as LayerNorm(({C}, {H}, {W}))). "
                    "Both are called LayerNorm in papers; they give different outputs.",
                )
            )
        if not grouped and reduced == {"H", "W"}:
            out.append(
                Confusion(
                    "instance_as_layer",
                    "InstanceNorm is LayerNorm over one feature map",
                    f"Treat each of the N·C = {N * C:,} feature maps as one embedding of "
                    f"H·W = {H * W:,} values: LayerNorm over that embedding computes exactly "
                    "InstanceNorm's statistics. In code, nn.LayerNorm(H*W) applied to "
                    "x.reshape(N, C, H*W) matches nn.InstanceNorm2d(C) (without affine "
                    "parameters, which act per channel in one and per position in the other).",
                )
            )
    else:
        B, T, C = (sizes[a] for a in lay.axes)
        if not grouped and reduced == {"B", "T"}:
            out.append(
                Confusion(
                    "batchnorm1d",
                    "BatchNorm1d expects (N, C, L), not (N, L, C)",
                    f"torch's BatchNorm1d wants channels at dim 1. A (B, T, C) = ({B}, {T}, "
                    f"{C}) tensor must be transposed, norm(x.transpose(1, 2)).transpose(1, 2), "
                    f"to get one statistic per feature from B·T = {B * T:,} values. Passed "
                    f"as it is, dim 1 holds the T = {T} tokens: BatchNorm1d({C}) refuses it"
                    + (
                        f" unless T = C (here T = C = {C}, so it runs and silently keeps "
                        "one statistic per token position instead)."
                        if T == C
                        else f", and BatchNorm1d({T}) would pool B and C: one statistic "
                        "per token position, a different method."
                    ),
                )
            )
        if not grouped and reduced == {"B", "C"}:
            out.append(
                Confusion(
                    "batchnorm1d",
                    "This is BatchNorm1d on an untransposed (B, T, C) tensor",
                    f"Pooling B and C keeps one statistic per token position ({T} of them, "
                    f"each from B·C = {B * C:,} values). That is what nn.BatchNorm1d({T}) "
                    "computes when handed x without x.transpose(1, 2): it takes dim 1 as "
                    "the channels. BatchNorm1d expects (N, C, L).",
                )
            )
        if not grouped and reduced == {"T"}:
            out.append(
                Confusion(
                    "instance_as_layer",
                    "InstanceNorm is LayerNorm over one feature's sequence",
                    f"Treat each feature's sequence of T = {T} values as one embedding: "
                    f"LayerNorm over it computes InstanceNorm's statistics ({B * C:,} of "
                    "them). nn.InstanceNorm1d wants (N, C, L): transpose (B, T, C) first.",
                )
            )
    return tuple(out)


# ---- the live check of the generated torch code ---------------------------------------

MATCH_TOL = 1e-4  # normalized outputs are O(1): float32 kernels agree far closer than this


def verification_text(module: str, max_abs_diff: float) -> tuple[bool, str]:
    """(matches?, "matches torch.nn.X, max |Δ| = …") for a codegen.verify() result."""
    name = f"torch.{module}" if module.startswith("nn.") else module
    ok = math.isfinite(max_abs_diff) and max_abs_diff <= MATCH_TOL
    if ok:
        return True, f"matches {name}, max |Δ| = {max_abs_diff:.1e}"
    return False, f"differs from {name}: max |Δ| = {max_abs_diff:.1e} (tolerance {MATCH_TOL:.0e})"


__all__ = [
    "AxesVerdict",
    "Confusion",
    "ContractCard",
    "GroupDetail",
    "cell_from_point",
    "cell_text",
    "clamp_cell",
    "confusions",
    "contract_card",
    "explain_axes",
    "group_slices",
    "refusal_hint",
    "selected_group",
    "verification_text",
]
