"""γ and β: giving the scale back, and recovering the input from BatchNorm.

After standardizing, the output is multiplied by γ and shifted by β, of the shape
torch's module gives them (read off the module: `nn.LayerNorm([C, H, W]).weight` is
(C, H, W), one value per element of a sample; BatchNorm's and GroupNorm's are (C,)).
Under BatchNorm, whose groups are the channels, γ_c = sqrt(σ_c² + ε) and β_c = μ_c
give the input back, but only for the batch whose statistics were used: in training
mode another batch is normalized with its own statistics and does not come back.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch
from torch import nn

from normviz import style
from normviz.core import Contract, as_tensor, contract, normalize
from normviz.data import GENERATORS, generate
from normviz.distributions.histograms import HIST_BINS, Histogram, Tensorish, bars, histogram
from normviz.distributions.moments import channel_moments
from normviz.distributions.setup import Generated, Setup, gated, input_tensor, norm
from normviz.errors import NormConfigError
from normviz.figures.spec import Spec, trace
from normviz.knobs import Knob, Value
from normviz.layouts import LAYOUTS
from normviz.methods import METHODS, STANDARD_METHODS
from normviz.sections import Progress, Section
from normviz.sources import cite

AffineKind = Literal["scalar", "per-channel", "per-element"]

KNOBS = (
    Knob("affine", "scalar", choices=("scalar", "per-channel", "per-element"), label="γ and β are"),
    Knob("gamma", 2.0, lo=0.1, hi=5.0, label="γ"),
    Knob("beta", 1.0, lo=-3.0, hi=3.0, label="β"),
)

INTRO = (
    "After standardizing, the output is multiplied by γ and shifted by β, both learned, "
    "of the shape torch's module gives them: one value per channel for BatchNorm and "
    "GroupNorm (and InstanceNorm with affine=True; its default has none), one per element "
    "of a sample for LayerNorm and RMSNorm over (C, H, W); RMSNorm has no β. The table "
    "below reads the shapes off torch's modules. One value "
    "for every entry stretches and moves the whole histogram. "
    "Under BatchNorm, whose groups are the channels, each channel's mean then lands "
    "exactly on its β and its spread on its γ. Other methods standardized other groups, "
    "so a channel's values need not have mean 0 and spread 1 before γ_c and β_c act: the "
    "notes below say where the channels of this input actually land."
)


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


def torch_ctor(method: str, layout: str, shape: tuple[int, ...], groups: int) -> str:
    """The registry's torch constructor for `method` at `shape`: `nn.GroupNorm(2, 8, eps=1e-05)`."""
    g = groups if METHODS[method].grouped else None
    return METHODS[method].torch_text(layout, shape, g)


def torch_module(method: str, layout: str, shape: tuple[int, ...], groups: int) -> nn.Module:
    """torch's module for `method` at `shape`, built by the registry's factory."""
    return METHODS[method].build(layout, shape, groups if METHODS[method].grouped else None)


def torch_gamma(method: str, layout: str, shape: tuple, groups: int) -> tuple[tuple, bool]:
    """(shape of γ in torch's module for `method`, whether the default module has one):
    InstanceNorm's default has none (affine=False; with affine=True it is (C,)); custom
    axes have no torch module, and normviz's γ is (C,)."""
    C = shape[LAYOUTS[layout].channel_axis]
    if method not in STANDARD_METHODS:
        return (C,), False
    w = getattr(torch_module(method, layout, shape, groups), "weight", None)
    return ((C,), False) if w is None else (tuple(w.shape), True)


def torch_shapes(layout: str, shape: tuple[int, ...], groups: int) -> pd.DataFrame:
    """Every method's torch module at `shape`, with the shapes of its γ (weight) and β (bias)."""
    rows = []
    for key in STANDARD_METHODS:
        row = [METHODS[key].label, torch_ctor(key, layout, shape, groups)]
        try:
            mod = torch_module(key, layout, shape, groups)
        except ValueError as e:  # GroupNorm with C not divisible by G
            rows.append([*row, f"refused: {e}", ""])
            continue
        w, b = (getattr(mod, n, None) for n in ("weight", "bias"))
        none = "none (affine=False)" if w is None else "none"
        rows.append([*row, *(none if p is None else str(tuple(p.shape)) for p in (w, b))])
    return pd.DataFrame(
        rows, columns=["method", "torch module", "γ: .weight.shape", "β: .bias.shape"]
    )


def affine_tensors(
    kind: AffineKind, shape: tuple[int, ...], gamma: float, beta: float
) -> tuple[np.ndarray, np.ndarray]:
    """γ and β of torch's parameter `shape` ((C,) or (C, H, W)): "per-channel" ramps across
    channels (the same value at every position of a channel), "per-element" across all
    entries in order (for a (C,) parameter, the same as per-channel)."""
    if kind == "per-element":
        w, b = affine_params("per-channel", math.prod(shape), gamma, beta)
        return w.reshape(shape), b.reshape(shape)
    w, b = affine_params(kind, shape[0], gamma, beta)
    full = lambda a: np.broadcast_to(a.reshape(-1, *[1] * (len(shape) - 1)), shape).copy()  # noqa: E731
    return full(w), full(b)


@dataclass(frozen=True, eq=False)
class AffineDemo:
    """One method's output with γ and β applied, and what each channel ends up with."""

    weight: np.ndarray  # γ, of torch's shape: (C,) or (C, H, W)
    bias: np.ndarray  # β, the same shape
    before: Histogram  # normalized, γ = 1, β = 0
    after: Histogram  # with γ, β
    channels: pd.DataFrame  # per channel: γ, β (each channel's mean of them), mean, std after
    torch_default: bool = True  # torch's module for the method has γ by default

    @property
    def per_element(self) -> bool:
        """γ or β takes more than one value inside some channel."""
        flat = [a.reshape(a.shape[0], -1) for a in (self.weight, self.bias)]
        return any(bool((np.ptp(f, axis=1) > 0).any()) for f in flat)


def affine_demo(
    x: Tensorish,
    con: Contract,
    kind: AffineKind,
    gamma: float,
    beta: float,
    eps: float = 1e-5,
    bins: int = HIST_BINS,
) -> AffineDemo:
    """Normalize, then y = γ · x̂ + β with γ, β of torch's parameter shape for the method.

    Raises:
        NormConfigError: the setting cannot run.
    """
    x = as_tensor(x)
    plain = norm(x, con, eps)
    shape, has = torch_gamma(con.method, con.layout, tuple(x.shape), con.groups)
    w, b = affine_tensors(kind, shape, gamma, beta)
    # (C,) acts along the channel axis, (C, H, W) on a sample's trailing axes
    place = shape + (1,) * (x.ndim - con.layout_obj.channel_axis - len(shape))
    tw, tb = (torch.as_tensor(a, dtype=plain.dtype).reshape(place) for a in (w, b))
    y = plain * tw + tb
    moments = channel_moments(y, con.layout)
    mean_c = lambda a: a.reshape(a.shape[0], -1).mean(1)  # noqa: E731
    moments.insert(0, "β", mean_c(b))
    moments.insert(0, "γ", mean_c(w))
    return AffineDemo(w, b, histogram(plain, bins), histogram(y, bins), moments, has)


@dataclass(frozen=True, eq=False)
class Recovery:
    """BatchNorm with γ = sqrt(σ² + ε) and β = μ per channel gives back its input."""

    gamma: np.ndarray  # sqrt(σ² + ε) per channel: what the layer divided by
    beta: np.ndarray  # μ per channel
    max_abs_diff: float  # max |y − x| with γ = sqrt(σ² + ε), β = μ
    max_abs_diff_sigma: float  # max |y − x| with γ = σ exactly (ε left out)
    max_abs_x: float
    # the same γ, β on a second batch, which training mode normalizes with its own
    # statistics: max |y − x₂| (NaN when no second batch was given)
    max_abs_diff_other: float = float("nan")


def recover_input(
    x: Tensorish,
    layout: str,
    eps: float = 1e-5,
    method: str = "batch",
    other: Tensorish | None = None,
) -> Recovery:
    """Set γ to sqrt(σ² + ε) and β to the mean, per channel, and compare y to x.

    Only a method with one statistic per channel can be undone this way, since γ and β
    hold one value per channel. `other`, a second batch of the same shape, goes through
    the same γ and β with its own (training-mode) statistics: it is not given back.

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
    mu, var = res.mean.reshape(-1), res.var.reshape(-1)
    gamma = torch.sqrt(var + eps)
    y = normalize(xd, method, layout, eps=eps, weight=gamma, bias=mu).output
    y_sigma = normalize(xd, method, layout, eps=eps, weight=var.sqrt(), bias=mu).output
    miss = float("nan")
    if other is not None:
        od = as_tensor(other).double()
        y_other = normalize(od, method, layout, eps=eps, weight=gamma, bias=mu).output
        miss = float((y_other - od).abs().max())
    diff = [float((a - xd).abs().max()) for a in (y, y_sigma)]
    return Recovery(gamma.numpy(), mu.numpy(), *diff, float(xd.abs().max()), miss)


# ---- run ------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Affine:
    method: str
    kind: str
    demo: AffineDemo
    recovery: Recovery | None  # None: BatchNorm cannot run on this input
    recovery_refused: str = ""
    other_batch: str = ""  # what the second batch is: "normal data, seed 1"
    centred: bool = True  # the page's method subtracts the mean
    shapes: pd.DataFrame | None = None  # torch_shapes at the input's shape


@gated
def run(setup: Setup, knobs: Mapping[str, Value], progress: Progress) -> Affine:
    x = input_tensor(setup)
    kind, g, b = str(knobs["affine"]), float(knobs["gamma"]), float(knobs["beta"])  # type: ignore[arg-type]
    demo = affine_demo(x, setup.contract, kind, g, b, setup.eps)  # type: ignore[arg-type]
    progress(0.6, "recovering the input from BatchNorm")
    c = setup.contract.centred
    src = setup.source
    data = src.data if isinstance(src, Generated) else "normal"
    other = generate(data, setup.layout, setup.shape, setup.seed + 1)
    what = f"{GENERATORS[data].label.lower()} data, seed {setup.seed + 1}"
    shapes = torch_shapes(setup.layout, tuple(x.shape), setup.groups)  # the shared G
    try:
        rec = recover_input(x, setup.layout, setup.eps, other=other)
        return Affine(setup.method, kind, demo, rec, "", what, c, shapes)
    except NormConfigError as e:
        return Affine(setup.method, kind, demo, None, str(e), centred=c, shapes=shapes)


# ---- figure and notes ------------------------------------------------------------------


def make_affine_figure(demo: AffineDemo, method: str, presenter: bool = False) -> go.Figure:
    """Left: values with γ = 1, β = 0 and with γ, β. Right: each channel's mean and std."""
    titles = ("values", "per channel:<br>mean → β, std → γ")  # two lines fit half a phone
    fig = Spec.grid(1, 2, titles, horizontal_spacing=0.1)
    fig.add_trace(bars(demo.before, style.BEFORE, "γ = 1, β = 0", opacity=0.6), 1, 1)
    fig.add_trace(bars(demo.after, style.METHOD_COLOURS[method], "with γ, β", 0.6, "/"), 1, 1)
    ch = demo.channels
    idx = np.arange(len(ch))
    for col, target, colour, sym, dash in (
        ("mean", "β", style.PALETTE[1], "circle", "dot"),
        ("std", "γ", style.PALETTE[2], "diamond", "dash"),
    ):
        line = {"color": colour, "dash": dash}
        y = ch[target].to_numpy()
        fig.add_trace(trace("scatter", x=idx, y=y, mode="lines", line=line, name=target), 1, 2)
        marker = {"color": colour, "symbol": sym, "size": 9}
        y = ch[col].to_numpy()
        dots = trace("scatter", x=idx, y=y, mode="markers", marker=marker, name=f"channel {col}")
        fig.add_trace(dots, 1, 2)
    fig.update_xaxes(title="value", row=1, col=1)
    fig.update_xaxes(title="channel", row=1, col=2)
    label = METHODS[method].label
    # the legend under the panels (at their right it left a phone's panels too narrow)
    fig.update_layout(title=f"{label} with γ and β", barmode="overlay", legend=style.LEGEND_BELOW)
    fig.update_layout(bargap=0)
    style.apply(fig, presenter, height=500)
    return style.top_room(fig, presenter, below=2).figure()  # room for the panel titles


def figure(res: Affine, presenter: bool) -> go.Figure:
    return make_affine_figure(res.demo, res.method, presenter)


def _span(values: pd.Series) -> str:
    lo, hi = float(values.min()), float(values.max())
    return f"{lo:.3g}" if f"{lo:.3g}" == f"{hi:.3g}" else f"{lo:.3g} … {hi:.3g}"


def landing_note(demo: AffineDemo, method: str, centred: bool = True) -> str:
    """Where the channels' means and spreads landed, against their β and γ."""
    label = METHODS[method].label
    ch = demo.channels
    miss_mean = float((ch["mean"] - ch["β"]).abs().max())
    miss_std = float((ch["std"] - ch["γ"].abs()).abs().max())
    scale = max(1.0, float(ch["γ"].abs().max()), float(ch["β"].abs().max()))
    if max(miss_mean, miss_std) <= 1e-3 * scale:
        return (
            f"Under {label} every channel's mean lands on its β_c and its spread on |γ_c| "
            f"(largest miss {max(miss_mean, miss_std):.1e})."
        )
    return (
        f"Under {label} the channel means land at {_span(ch['mean'])} while β is "
        f"{_span(ch['β'])} (largest miss {miss_mean:.3g}), and the spreads at "
        f"{_span(ch['std'])} while γ is {_span(ch['γ'])}. "
        f"{label} {'standardized' if centred else 'only rescaled'} other groups than "
        "the channels, so channel c's values keep a mean m_c and a spread s_c of their own"
        + (
            ", and γ and β vary inside each channel: each position gets its own scale and "
            "shift, so γ and β move the channels, but not onto their mean β and γ."
            if demo.per_element
            else " and come out with mean γ_c·m_c + β_c and spread |γ_c|·s_c: γ and β move "
            "the channels, but not onto β and γ."
        )
        + (
            ""
            if centred
            else " (torch's nn.RMSNorm has no β; it is added here to compare like with like.)"
        )
    )


def shape_note(demo: AffineDemo, method: str, kind: str) -> str:
    """What torch's γ for the method is, and how this demo's γ fills it."""
    label, shape, n = METHODS[method].label, tuple(demo.weight.shape), demo.weight.size
    one = "one per element of a sample" if len(shape) > 1 else "one per channel"
    head = f"{label}'s γ has torch's shape {shape}: {n} values, {one}."
    if method not in STANDARD_METHODS:
        head = f"{label}: no torch module; γ here has shape {shape}, {one}."
    elif not demo.torch_default:
        head = f"torch's {label} has no γ by default (affine=False); with affine=True: {shape}."
    if kind == "per-channel":
        return f"{head} Per-channel: γ_c runs from 0.5γ to 1.5γ and β_c from β − 1 to β + 1."
    if kind == "per-element" and demo.per_element:
        return (
            f"{head} Per-element: γ runs from 0.5γ to 1.5γ and β from β − 1 to β + 1 across "
            f"all {n} entries, so positions of one channel get different scales; the right "
            "panel shows each channel's mean γ and β."
        )
    if kind == "per-element":
        return f"{head} With one value per channel, per-element is per-channel."
    return head


def table(res: Affine) -> pd.DataFrame | None:
    return res.shapes


def notes(res: Affine) -> Sequence[str]:
    out = [shape_note(res.demo, res.method, res.kind)]
    out.append(landing_note(res.demo, res.method, res.centred))
    out.append(
        "**Undoing BatchNorm.** BatchNorm divides channel c by √(σ_c² + ε) after "
        "subtracting μ_c, so γ_c = √(σ_c² + ε) and β_c = μ_c multiply and add exactly that "
        f"back: the network can learn to switch the normalization off ({cite('ioffe2015')} "
        "make this point). The identity holds "
        "for the batch whose μ_c and σ_c² were used; in training mode every batch brings "
        "its own."
    )
    rec = res.recovery
    if rec is None:
        out.append(f"BatchNorm cannot run on this input: {res.recovery_refused}.")
        return out
    out.append(
        f"max |y − x| with γ = √(σ² + ε), β = μ: **{rec.max_abs_diff:.1e}**; "
        f"with γ = σ (ε left out): **{rec.max_abs_diff_sigma:.1e}**. The input's values "
        f"reach {rec.max_abs_x:.3g} in size; the first difference is floating-point "
        "rounding, the second is the part of σ that ε replaced."
    )
    if not np.isnan(rec.max_abs_diff_other):
        back = rec.max_abs_diff_other <= 1e-6 * max(1.0, rec.max_abs_x)
        verdict = (
            "it came back too: its statistics happen to match"
            if back
            else "it does not come back, since training mode normalized it with its own statistics"
        )
        out.append(
            f"The same γ and β on a second batch of the same shape ({res.other_batch}): "
            "max |y − x₂| "
            f"= **{rec.max_abs_diff_other:.3g}**: {verdict}."
        )
    return out


SECTION = Section(
    "gamma-beta", "γ and β: giving the scale back", INTRO, run, KNOBS, figure, table, notes
)
