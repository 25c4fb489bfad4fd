"""What each method does to the values: histograms, per-group moments, and what it leaves alone.

Every function here reads the axis contract (`contract`, `normalize`) instead
of restating a method's axes: a method's statistic groups are the pooled
dimensions of its contract's expanded view, (…, G, C/G, …).
"""

from __future__ import annotations

import io
import math
import time
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
import torch

from normviz.core import AxesArg, Contract, NormConfigError, as_tensor, contract, normalize
from normviz.layouts import LAYOUTS
from normviz.limits import EPS_CHOICES
from normviz.methods import METHODS, STANDARD_METHODS

HIST_BINS = 60
TABLE_ROWS = 12  # groups listed before the min/max summary
CSV_ROWS = 100_000  # groups written to the downloadable table
MEAN_TOL = 1e-3  # |mean| below this counts as "mean 0"
VAR_TOL = 1e-2  # |variance − 1| below this counts as "variance 1"

Tensorish = torch.Tensor | np.ndarray


# ---- histograms ----------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Histogram:
    """Counts of values in equal bins, computed on the server (the figure gets only these)."""

    edges: np.ndarray  # (bins + 1,)
    counts: np.ndarray  # (bins,)
    n: int  # finite values counted
    n_nonfinite: int  # NaN/inf values (ε = 0 on a constant group), not counted
    mean: float
    std: float

    @property
    def centres(self) -> np.ndarray:
        return (self.edges[:-1] + self.edges[1:]) / 2


def value_range(*xs: Tensorish) -> tuple[float, float]:
    """The smallest and largest finite value over several tensors (a shared bin range)."""
    lo, hi = math.inf, -math.inf
    for x in xs:
        t = as_tensor(x)
        if not t.numel():
            continue
        a, b = (float(v) for v in torch.aminmax(t))
        if not (math.isfinite(a) and math.isfinite(b)):  # NaN/inf present: skip them
            t = t[torch.isfinite(t)]
            if not t.numel():
                continue
            a, b = (float(v) for v in torch.aminmax(t))
        lo, hi = min(lo, a), max(hi, b)
    if lo > hi:
        return -1.0, 1.0
    if lo == hi:  # a constant tensor: a unit-wide range around it
        return lo - 0.5, hi + 0.5
    return lo, hi


def histogram(
    x: Tensorish, bins: int = HIST_BINS, value_range_: tuple[float, float] | None = None
) -> Histogram:
    """Bin the finite values of `x` (all of them, however many) into `bins` equal bins.

    Like np.histogram with a range: values outside it are not counted, the last bin
    includes its right edge. A value within rounding of an inner edge may land in
    either neighbour (np.histogram's own rounding differs from this one's).
    """
    t = as_tensor(x).reshape(-1)
    n_bad = 0
    if t.numel():
        a, b = (float(v) for v in torch.aminmax(t))
        if not (math.isfinite(a) and math.isfinite(b)):  # only then pay for a mask
            finite = torch.isfinite(t)
            n_bad = int((~finite).sum())
            t = t[finite]
    lo, hi = value_range_ if value_range_ is not None else value_range(t)
    edges = np.linspace(lo, hi, bins + 1)
    return Histogram(edges, _bin_counts(t, bins, lo, hi), t.numel(), n_bad, *_mean_std(t))


def _bin_counts(t: torch.Tensor, bins: int, lo: float, hi: float) -> np.ndarray:
    """Counts of the finite 1-D `t` in `bins` equal bins on [lo, hi], in one bincount.

    Three times faster than np.histogram on millions of values: bin indices in the
    tensor's own dtype, truncated to small integers, then torch.bincount.
    """
    if t.numel():
        a, b = (float(v) for v in torch.aminmax(t))
        if a < lo or b > hi:  # a shared range narrower than these values: drop the rest
            t = t[(t >= lo) & (t <= hi)]
    if not t.numel():
        return np.zeros(bins, dtype=np.int64)
    f = (t - lo).mul_(bins / (hi - lo)).clamp_(0, bins - 1)  # t == hi: the last bin
    idx = f.to(torch.uint8 if bins <= 256 else torch.int64)  # truncation = floor (f ≥ 0)
    return torch.bincount(idx, minlength=bins).numpy().astype(np.int64)


def _mean_std(t: torch.Tensor) -> tuple[float, float]:
    """Mean and population standard deviation, two passes (torch.std_mean is 4× slower)."""
    if not t.numel():
        return math.nan, math.nan
    mean = t.mean()  # cascade summation: accurate to a few ulp at any length
    return float(mean), math.sqrt(float((t - mean).square_().mean()))


def leading_shape(shape: tuple[int, ...], layout: str, limit: int) -> tuple[int, ...]:
    """The shape of the first samples, then first positions (T or H), of a tensor of
    `shape`, so that at most `limit` values remain; every channel is kept.

    `shape` itself when it is within `limit`. Any such slice shows a method's
    properties as well as the whole tensor, at a bounded cost.
    """
    sizes = list(shape)
    lay = LAYOUTS[layout]
    for ax in (0, 2 if lay.channel_first else 1):  # samples, then T or H
        rest = math.prod(sizes) // sizes[ax]
        sizes[ax] = max(1, min(sizes[ax], limit // rest))
    return tuple(sizes)


# ---- one method's statistic groups ---------------------------------------------------


def _expanded_names(con: Contract) -> list[str]:
    """Names of the dimensions of `con.expanded_shape`: (…, G or C, C/G, …)."""
    lay = con.layout_obj
    c = lay.channel_axis
    ch = "G" if con.method_obj.grouped else lay.channel
    return [*lay.axes[:c], ch, f"{lay.channel}/G", *lay.axes[c + 1 :]]


def _reduce(x: torch.Tensor, dims: tuple[int, ...]) -> tuple[torch.Tensor, ...]:
    """(mean, variance, mean square) over `dims`, two passes, flattened to float64.

    Two plain means instead of torch.var_mean: several times faster on strided
    dimensions, and subtracting the mean first keeps the variance exact enough.
    """
    mean = x.mean(dims, keepdim=True)
    var = (x - mean).square_().mean(dims).reshape(-1).double()
    mean = mean.reshape(-1).double()
    return mean, var, var + mean.square()  # E[x²] = σ² + μ², without a third pass


def _moments(x: torch.Tensor, con: Contract) -> tuple[torch.Tensor, ...]:
    """(mean, variance, mean square) of every statistic group, flat, in group-id order."""
    return _reduce(x.reshape(con.expanded_shape), con.reduce_dims)


@dataclass(frozen=True, eq=False)
class GroupTable:
    """Per-group moments before and after one method, and their min/max over all groups."""

    method: str
    layout: str
    axes: tuple[str, ...]  # pooled axes ("C/G" for GroupNorm)
    kept: tuple[str, ...]  # axes that index the groups
    group_size: int  # m
    n_groups: int
    centred: bool
    table: pd.DataFrame  # one row per group (at most CSV_ROWS), kept-axis indices first
    summary: pd.DataFrame  # rows "min" and "max" over every group

    @property
    def head(self) -> pd.DataFrame:
        """The first groups, for the page."""
        return self.table.head(TABLE_ROWS)


def _stat_columns(centred: bool) -> list[str]:
    cols = ["mean before", "variance before", "mean after", "variance after"]
    return cols if centred else [*cols, "mean square after"]


def group_table(
    x: Tensorish,
    method: str,
    layout: str,
    *,
    groups: int | None = None,
    axes: AxesArg = None,
    centred: bool = True,
    eps: float = 1e-5,
) -> GroupTable:
    """Count, mean and variance of every statistic group before and after `method`.

    After a centred method each group has mean 0 and variance σ²/(σ²+ε) ≈ 1; after
    RMSNorm the mean square is ≈ 1 instead.

    Raises:
        NormConfigError: the setting cannot run.
    """
    x = as_tensor(x)
    res = normalize(x, method, layout, groups=groups, axes=axes, eps=eps, centred=centred)
    con = res.contract
    m0, v0, _ = _moments(x, con)
    m1, v1, ms1 = _moments(res.output, con)
    names = _expanded_names(con)
    kept_dims = [d for d, a in enumerate(names) if a in con.kept]
    stat_shape = tuple(con.stat_shape)
    n = min(con.n_stats, CSV_ROWS)
    index = np.unravel_index(np.arange(n), stat_shape)
    data: dict[str, object] = {names[d]: index[d] for d in kept_dims}
    data["count"] = np.full(n, con.group_size)
    cols = {
        "mean before": m0,
        "variance before": v0,
        "mean after": m1,
        "variance after": v1,
        "mean square after": ms1,
    }
    for col in _stat_columns(con.centred):
        data[col] = cols[col][:n].numpy()
    table = pd.DataFrame(data)
    summary = pd.DataFrame(
        {col: _min_max(cols[col].numpy()) for col in _stat_columns(con.centred)},
        index=["min", "max"],
    )
    summary.insert(0, "count", [con.group_size, con.group_size])
    return GroupTable(
        method,
        layout,
        con.axes,
        con.kept,
        con.group_size,
        con.n_stats,
        con.centred,
        table,
        summary,
    )


def _min_max(a: np.ndarray) -> list[float]:
    """[min, max] over the finite entries (NaN groups come from ε = 0 on constant groups)."""
    a = a[np.isfinite(a)]
    return [float(a.min()), float(a.max())] if a.size else [math.nan, math.nan]


# ---- the moments a method does not control -------------------------------------------


def _views(layout: str, shape: tuple[int, ...], groups: int) -> list[tuple[str, Contract]]:
    """Each distinct way the standard methods group values, labelled by its methods."""
    seen: dict[tuple, list[str]] = {}
    cons: dict[tuple, Contract] = {}
    for key in STANDARD_METHODS:
        g = groups if METHODS[key].grouped else None
        if METHODS[key].grouped and (g < 1 or shape[LAYOUTS[layout].channel_axis] % g):
            continue  # this G cannot split C: no GroupNorm view
        con = contract(key, layout, shape, groups=g)
        sig = (con.expanded_shape, con.reduce_dims)  # the grouping itself, not its name
        seen.setdefault(sig, []).append(METHODS[key].label)
        cons.setdefault(sig, con)
    return [(" / ".join(labels), cons[sig]) for sig, labels in seen.items()]


def uncontrolled(
    x: Tensorish,
    method: str,
    layout: str,
    *,
    groups: int | None = None,
    axes: AxesArg = None,
    centred: bool = True,
    eps: float = 1e-5,
    view_groups: int = 2,
) -> pd.DataFrame:
    """The output's moments grouped the way each other method groups values.

    A method standardizes its own groups only: after LayerNorm the per-channel means
    over the batch are not 0; after BatchNorm one token's features are not standardized.
    One row per distinct grouping, with "standardized" judged from the numbers.
    `view_groups` is G for the GroupNorm view when `method` is not GroupNorm.

    Raises:
        NormConfigError: the setting cannot run.
    """
    x = as_tensor(x)
    res = normalize(x, method, layout, groups=groups, axes=axes, eps=eps, centred=centred)
    own = res.contract
    y = res.output
    rows = []
    for label, con in _views(layout, tuple(x.shape), groups or view_groups):
        mean, var, ms = _moments(y, con)
        # NaN (ε = 0 on a constant group) compares False: nothing holds there
        if mean.abs().max() <= MEAN_TOL and (var - 1).abs().max() <= VAR_TOL:
            holds = "mean 0 and variance 1"
        elif (ms - 1).abs().max() <= VAR_TOL:
            holds = "mean square 1"
        else:
            holds = "neither"
        rows.append(
            {
                "grouped like": label,
                "pools": ", ".join(con.axes),
                "one per": ", ".join(con.kept) or "whole tensor",
                "groups": con.n_stats,
                "largest |mean|": float(mean.abs().max()),
                "variance min": float(var.min()),
                "variance max": float(var.max()),
                "what holds": holds,
                "this method": "◀" if _same_groups(con, own) else "",
            }
        )
    return pd.DataFrame(rows).set_index("grouped like")


def _same_groups(a: Contract, b: Contract) -> bool:
    return a.stat_shape == b.stat_shape and a.expanded_shape == b.expanded_shape


# ---- all methods on one input --------------------------------------------------------


@dataclass(frozen=True, eq=False)
class MethodsComparison:
    """The input's histogram and each standard method's, on one shared value range."""

    layout: str
    input: Histogram
    outputs: dict[str, Histogram]  # method key -> histogram, for the methods that ran
    refused: dict[str, str]  # method key -> why it cannot run on this input


def compare_methods(
    x: Tensorish, layout: str, *, groups: int = 2, eps: float = 1e-5, bins: int = HIST_BINS
) -> MethodsComparison:
    """Every standard method on the same input, binned on the same edges."""
    x = as_tensor(x)
    outs: dict[str, torch.Tensor] = {}
    refused: dict[str, str] = {}
    for key in STANDARD_METHODS:
        kw = {"groups": groups} if METHODS[key].grouped else {}
        try:
            outs[key] = normalize(x, key, layout, eps=eps, **kw).output
        except NormConfigError as e:
            refused[key] = str(e)
    rng = value_range(*outs.values())
    return MethodsComparison(
        layout,
        histogram(x, bins),
        {k: histogram(y, bins, rng) for k, y in outs.items()},
        refused,
    )


# ---- γ and β -------------------------------------------------------------------------

AffineKind = Literal["scalar", "per-channel"]


def affine_params(kind: AffineKind, C: int, gamma: float, beta: float) -> tuple[np.ndarray, ...]:
    """γ and β of shape (C,): the same value for every channel, or a ramp across channels.

    "per-channel" spreads γ from 0.5γ to 1.5γ and β from β − 1 to β + 1, so each
    channel visibly gets its own scale and shift.
    """
    if kind == "scalar":
        return np.full(C, float(gamma)), np.full(C, float(beta))
    if kind == "per-channel":
        ramp = np.linspace(-1.0, 1.0, C) if C > 1 else np.zeros(1)
        return float(gamma) * (1 + 0.5 * ramp), float(beta) + ramp
    raise ValueError(f"unknown γ/β kind {kind!r}: choose 'scalar' or 'per-channel'")


def channel_moments(y: Tensorish, layout: str) -> pd.DataFrame:
    """Mean and standard deviation of each channel over every other axis."""
    t = as_tensor(y)
    c = LAYOUTS[layout].channel_axis
    mean, var, _ = _reduce(t, tuple(d for d in range(t.ndim) if d != c))
    return pd.DataFrame({"mean": mean.numpy(), "std": var.sqrt().numpy()}).rename_axis("channel")


@dataclass(frozen=True, eq=False)
class AffineDemo:
    """One method's output with γ and β applied, and what each channel ends up with."""

    weight: np.ndarray  # γ, (C,)
    bias: np.ndarray  # β, (C,)
    before: Histogram  # normalized, γ = 1, β = 0
    after: Histogram  # with γ, β
    channels: pd.DataFrame  # per channel: γ, β, mean and std after


def affine_demo(
    x: Tensorish,
    method: str,
    layout: str,
    kind: AffineKind,
    gamma: float,
    beta: float,
    *,
    groups: int | None = None,
    axes: AxesArg = None,
    centred: bool = True,
    eps: float = 1e-5,
    bins: int = HIST_BINS,
) -> AffineDemo:
    """Normalize, then scale by γ and shift by β per channel: y = γ_c · x̂ + β_c.

    Raises:
        NormConfigError: the setting cannot run.
    """
    x = as_tensor(x)
    kw = {"groups": groups, "axes": axes, "centred": centred, "eps": eps}
    plain = normalize(x, method, layout, **kw).output  # type: ignore[arg-type]
    C = x.shape[LAYOUTS[layout].channel_axis]
    w, b = affine_params(kind, C, gamma, beta)
    y = normalize(x, method, layout, weight=w, bias=b, **kw).output  # type: ignore[arg-type]
    moments = channel_moments(y, layout)
    moments.insert(0, "β", b)
    moments.insert(0, "γ", w)
    return AffineDemo(w, b, histogram(plain, bins), histogram(y, bins), moments)


@dataclass(frozen=True, eq=False)
class Recovery:
    """BatchNorm with γ = σ and β = μ per channel gives back its input."""

    gamma: np.ndarray  # sqrt(σ² + ε) per channel: what the layer divided by
    beta: np.ndarray  # μ per channel
    max_abs_diff: float  # max |y − x| with γ = sqrt(σ² + ε), β = μ
    max_abs_diff_sigma: float  # max |y − x| with γ = σ exactly (ε left out)
    max_abs_x: float


def recover_input(x: Tensorish, layout: str, eps: float = 1e-5, method: str = "batch") -> Recovery:
    """Set γ to the per-channel spread and β to the per-channel mean, and compare y to x.

    Only a method with one statistic per channel can be undone this way, since γ and β
    hold one value per channel.

    Raises:
        NormConfigError: the method's statistics are not one per channel, or it cannot run.
    """
    x = as_tensor(x)
    con = contract(method, layout, tuple(x.shape))
    if not con.per_channel:
        raise NormConfigError(
            f"γ and β hold one value per channel, so they can only undo a method with one "
            f"statistic per channel; {con.method_obj.label} keeps {', '.join(con.kept)} apart"
        )
    xd = x.double()  # float64, so the ε effect is not lost in float32 rounding
    res = normalize(xd, method, layout, eps=eps)
    assert res.mean is not None  # per-channel methods are centred
    mu = res.mean.reshape(-1)
    var = res.var.reshape(-1)
    gamma = torch.sqrt(var + eps)
    y = normalize(xd, method, layout, eps=eps, weight=gamma, bias=mu).output
    y_sigma = normalize(xd, method, layout, eps=eps, weight=var.sqrt(), bias=mu).output
    return Recovery(
        gamma.numpy(),
        mu.numpy(),
        float((y - xd).abs().max()),
        float((y_sigma - xd).abs().max()),
        float(xd.abs().max()),
    )


# ---- ε -------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class EpsSweep:
    """What ε does to one method on one input, for every ε the app offers."""

    method: str
    eps: np.ndarray  # the ε values, ascending (0 first)
    var_after_min: np.ndarray  # per ε: smallest variance after (mean square for RMSNorm)
    var_after_median: np.ndarray
    var_after_max: np.ndarray
    nan_values: np.ndarray  # per ε: output values that are NaN (0/0)
    zero_groups: int  # groups whose values are all equal (σ² = 0)
    smallest_var: float  # the smallest nonzero σ² (or mean square) of a group
    group_size: int


def eps_sweep(
    x: Tensorish,
    method: str,
    layout: str,
    *,
    groups: int | None = None,
    axes: AxesArg = None,
    centred: bool = True,
    eps_values: tuple[float, ...] = EPS_CHOICES,
) -> EpsSweep:
    """The spread after normalization, per ε, from each group's σ²: σ²/(σ² + ε).

    A group of equal values has σ² = 0: its output is 0/sqrt(ε), which is 0 for ε > 0
    and 0/0 = NaN for ε = 0. That is what ε is for.

    Raises:
        NormConfigError: the setting cannot run.
    """
    x = as_tensor(x)
    con = contract(method, layout, tuple(x.shape), groups, axes, centred)
    _, var, ms = _moments(x, con)
    s2 = (var if con.centred else ms).numpy()
    zero = s2 == 0
    live = s2[~zero]
    eps = np.array(sorted(float(e) for e in eps_values))
    after = live[None, :] / (live[None, :] + eps[:, None]) if live.size else np.zeros((eps.size, 0))

    def over_groups(f: np.ufunc) -> np.ndarray:
        return f(after, axis=1) if live.size else np.full(eps.size, math.nan)

    return EpsSweep(
        method,
        eps,
        over_groups(np.min),
        over_groups(np.median),
        over_groups(np.max),
        np.where(eps == 0, int(zero.sum()) * con.group_size, 0),
        int(zero.sum()),
        float(live.min()) if live.size else math.nan,
        con.group_size,
    )


# ---- RMSNorm vs LayerNorm ------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class CosineComparison:
    """Per-vector cosine similarity of input and output, LayerNorm vs RMSNorm."""

    layout: str
    vector_axes: tuple[str, ...]  # what one vector spans: ("C",) or ("C", "H", "W")
    layer: np.ndarray  # cos(x, LayerNorm(x)) per vector
    rms: np.ndarray  # cos(x, RMSNorm(x)) per vector
    zero_vectors: int  # all-zero vectors, where the cosine is undefined (left out)
    mean_offset: np.ndarray  # |μ| / RMS per vector: how far from centred each vector is


def cosine_per_vector(x: Tensorish, layout: str, eps: float = 1e-5) -> CosineComparison:
    """cos(x, y) for each vector RMSNorm normalizes (a token in BTC, a sample in NCHW).

    RMSNorm only rescales a vector, so the cosine is 1; LayerNorm first subtracts the
    vector's mean, which turns it unless that mean is 0: cos = σ / sqrt(σ² + μ²).
    """
    x = as_tensor(x)
    con = contract("rms", layout, tuple(x.shape))
    xv = x.reshape(con.expanded_shape)
    dims = con.reduce_dims
    norm = torch.linalg.vector_norm(xv, dim=dims).reshape(-1)

    def cos(y: torch.Tensor) -> torch.Tensor:
        yv = y.reshape(con.expanded_shape)
        num = (xv * yv).sum(dims).reshape(-1)
        return num / (norm * torch.linalg.vector_norm(yv, dim=dims).reshape(-1))

    nonzero = norm > 0
    mean = xv.mean(dims).reshape(-1)
    rms = norm / math.sqrt(con.group_size)
    layer = cos(normalize(x, "layer", layout, eps=eps).output)
    rmsn = cos(normalize(x, "rms", layout, eps=eps).output)
    return CosineComparison(
        layout,
        con.axes,
        layer[nonzero].double().numpy(),
        rmsn[nonzero].double().numpy(),
        int((~nonzero).sum()),
        (mean[nonzero].abs() / rms[nonzero]).double().numpy(),
    )


def cost_table(layout: str, shape: tuple[int, ...]) -> pd.DataFrame:
    """What LayerNorm and RMSNorm compute per vector of m values, and their parameters."""
    rows = []
    for key in ("layer", "rms"):
        con = contract(key, layout, shape)
        m = con.group_size
        centred = con.centred
        rows.append(
            {
                "method": METHODS[key].label,
                "statistics per vector": "mean and variance" if centred else "mean square",
                "sums over the m values": "Σx, Σ(x − μ)²" if centred else "Σx²",
                f"arithmetic (m = {m:,})": (
                    "≈ 5 per value, +2 for γ, β" if centred else "≈ 3 per value, +1 for γ"
                ),
                "learned parameters": "γ and β" if centred else "γ only",
                "keeps direction": "only when μ = 0" if centred else "always",
            }
        )
    return pd.DataFrame(rows).set_index("method")


@dataclass(frozen=True)
class Timing:
    """Seconds per call of torch's own LayerNorm and RMSNorm modules on one input."""

    layer: float
    rms: float

    @property
    def ratio(self) -> float:
        return self.rms / self.layer if self.layer > 0 else math.nan


def time_layer_vs_rms(x: Tensorish, layout: str, repeats: int = 3) -> Timing:
    """Best-of-`repeats` wall time of nn.LayerNorm and nn.RMSNorm over the same axes."""
    x = as_tensor(x).float()
    lay = LAYOUTS[layout]
    con = contract("layer", layout, tuple(x.shape))
    dims = [x.shape[i] for i, a in enumerate(lay.axes) if a in con.reduced]
    if [i for i, a in enumerate(lay.axes) if a in con.reduced] != list(
        range(x.ndim - len(dims), x.ndim)
    ):
        raise NormConfigError("LayerNorm's axes are not the trailing ones: no torch module")
    out = {}
    with torch.no_grad():
        for name, mod in (
            ("layer", torch.nn.LayerNorm(dims)),
            ("rms", torch.nn.RMSNorm(dims, eps=1e-5)),
        ):
            mod(x)  # warm-up: the first call pays one-off setup costs
            best = math.inf
            for _ in range(repeats):
                t0 = time.perf_counter()
                mod(x)
                best = min(best, time.perf_counter() - t0)
            out[name] = best
    return Timing(out["layer"], out["rms"])


# ---- per-sample scale ----------------------------------------------------------------


def scale_invariance(
    x: Tensorish,
    layout: str,
    *,
    groups: int = 2,
    eps: float = 1e-5,
    factor: float = 10.0,
    sample: int = 0,
) -> pd.DataFrame:
    """Multiply one sample by `factor` and see which outputs change, for every method.

    A method whose statistics stay inside one sample (LayerNorm, InstanceNorm,
    GroupNorm, RMSNorm) gives that sample the same output: the sample's overall scale
    is lost. BatchNorm pools across samples, so the scaled sample moves every output.
    """
    x = as_tensor(x)
    lay = LAYOUTS[layout]
    s_ax = lay.axes.index(lay.sample)
    scaled = x.clone()
    scaled.select(s_ax, sample).mul_(factor)
    others = [i for i in range(x.shape[s_ax]) if i != sample]
    rows = []
    for key in STANDARD_METHODS:
        m = METHODS[key]
        kw = {"groups": groups} if m.grouped else {}
        row: dict[str, object] = {"method": m.label, "uses other samples": _yes(m.batch_dependent)}
        try:
            y0 = normalize(x, key, layout, eps=eps, **kw).output
            y1 = normalize(scaled, key, layout, eps=eps, **kw).output
        except NormConfigError as e:
            row |= {"scaled sample: max |Δy|": math.nan, "other samples: max |Δy|": math.nan}
            row["note"] = f"cannot run: {e}"
            rows.append(row)
            continue
        # largest change per sample, in one pass over the difference
        per_sample = (y1 - y0).abs_().amax(dim=[d for d in range(x.ndim) if d != s_ax])
        row["scaled sample: max |Δy|"] = float(per_sample[sample])
        row["other samples: max |Δy|"] = float(per_sample[others].max()) if others else math.nan
        row["note"] = "" if others else "only one sample"
        rows.append(row)
    return pd.DataFrame(rows).set_index("method")


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def sample_rms(x: Tensorish, y: Tensorish, layout: str) -> pd.DataFrame:
    """Root mean square of each sample before and after (the scale a sample carries)."""
    lay = LAYOUTS[layout]
    s_ax = lay.axes.index(lay.sample)

    def per_sample(t: Tensorish) -> np.ndarray:
        d = as_tensor(t).double().movedim(s_ax, 0)
        return d.reshape(d.shape[0], -1).square().mean(1).sqrt().numpy()

    return pd.DataFrame({"RMS before": per_sample(x), "RMS after": per_sample(y)}).rename_axis(
        lay.sample
    )


# ---- downloads -----------------------------------------------------------------------


def npy_bytes(x: Tensorish) -> bytes:
    """`x` as an .npy file (np.save with allow_pickle=False)."""
    buf = io.BytesIO()
    np.save(buf, as_tensor(x).numpy(), allow_pickle=False)
    return buf.getvalue()


def csv_bytes(table: pd.DataFrame) -> bytes:
    """A table as UTF-8 CSV."""
    return table.to_csv(index=False).encode()


__all__ = [
    "AffineDemo",
    "CosineComparison",
    "EpsSweep",
    "GroupTable",
    "Histogram",
    "MethodsComparison",
    "Recovery",
    "Timing",
    "affine_demo",
    "affine_params",
    "channel_moments",
    "compare_methods",
    "cosine_per_vector",
    "cost_table",
    "csv_bytes",
    "eps_sweep",
    "group_table",
    "histogram",
    "npy_bytes",
    "recover_input",
    "sample_rms",
    "scale_invariance",
    "time_layer_vs_rms",
    "uncontrolled",
    "value_range",
]
