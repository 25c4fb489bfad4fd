"""γ and β: giving the scale back, and recovering the input from BatchNorm.

After standardizing, each channel c is multiplied by γ_c and shifted by β_c. Under
BatchNorm, whose groups are the channels, γ_c = sqrt(σ_c² + ε) and β_c = μ_c give
the input back, but only for the batch whose statistics were used: in training mode
another batch is normalized with its own statistics and does not come back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch

from normviz import style
from normviz.core import Contract, as_tensor, contract, normalize
from normviz.data import GENERATORS, generate
from normviz.distributions.histograms import HIST_BINS, Histogram, Tensorish, bars, histogram
from normviz.distributions.moments import channel_moments
from normviz.distributions.setup import Generated, Setup, gated, input_tensor, norm
from normviz.errors import NormConfigError
from normviz.figures.spec import Spec, trace
from normviz.knobs import Knob, Value
from normviz.methods import METHODS
from normviz.sections import Progress, Section
from normviz.sources import cite

AffineKind = Literal["scalar", "per-channel"]

KNOBS = (
    Knob("affine", "scalar", choices=("scalar", "per-channel"), label="γ and β are"),
    Knob("gamma", 2.0, lo=0.1, hi=5.0, label="γ"),
    Knob("beta", 1.0, lo=-3.0, hi=3.0, label="β"),
)

INTRO = (
    "After standardizing, each channel c is multiplied by γ_c and shifted by β_c, both "
    "learned. One value for every channel stretches and moves the whole histogram. "
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
    con: Contract,
    kind: AffineKind,
    gamma: float,
    beta: float,
    eps: float = 1e-5,
    bins: int = HIST_BINS,
) -> AffineDemo:
    """Normalize, then scale by γ and shift by β per channel: y = γ_c · x̂ + β_c.

    Raises:
        NormConfigError: the setting cannot run.
    """
    x = as_tensor(x)
    plain = norm(x, con, eps)
    w, b = affine_params(kind, x.shape[con.layout_obj.channel_axis], gamma, beta)
    y = norm(x, con, eps, weight=w, bias=b)
    moments = channel_moments(y, con.layout)
    moments.insert(0, "β", b)
    moments.insert(0, "γ", w)
    return AffineDemo(w, b, histogram(plain, bins), histogram(y, bins), moments)


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
    mu = res.mean.reshape(-1)
    var = res.var.reshape(-1)
    gamma = torch.sqrt(var + eps)
    y = normalize(xd, method, layout, eps=eps, weight=gamma, bias=mu).output
    y_sigma = normalize(xd, method, layout, eps=eps, weight=var.sqrt(), bias=mu).output
    miss = float("nan")
    if other is not None:
        od = as_tensor(other).double()
        y_other = normalize(od, method, layout, eps=eps, weight=gamma, bias=mu).output
        miss = float((y_other - od).abs().max())
    return Recovery(
        gamma.numpy(),
        mu.numpy(),
        float((y - xd).abs().max()),
        float((y_sigma - xd).abs().max()),
        float(xd.abs().max()),
        miss,
    )


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


@gated
def run(setup: Setup, knobs: Mapping[str, Value], progress: Progress) -> Affine:
    x = input_tensor(setup)
    kind = str(knobs["affine"])
    demo = affine_demo(
        x,
        setup.contract,
        kind,
        float(knobs["gamma"]),
        float(knobs["beta"]),
        setup.eps,  # type: ignore[arg-type]
    )
    progress(0.6, "recovering the input from BatchNorm")
    c = setup.contract.centred
    src = setup.source
    data = src.data if isinstance(src, Generated) else "normal"
    other = generate(data, setup.layout, setup.shape, setup.seed + 1)
    what = f"{GENERATORS[data].label.lower()} data, seed {setup.seed + 1}"
    try:
        rec = recover_input(x, setup.layout, setup.eps, other=other)
        return Affine(setup.method, kind, demo, rec, other_batch=what, centred=c)
    except NormConfigError as e:
        return Affine(setup.method, kind, demo, None, str(e), centred=c)


# ---- figure and notes ------------------------------------------------------------------


def make_affine_figure(demo: AffineDemo, method: str, presenter: bool = False) -> go.Figure:
    """Left: values with γ = 1, β = 0 and with γ, β. Right: each channel's mean and std."""
    titles = ("values", "per channel: mean → β, std → γ")
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
        fig.add_trace(
            trace("scatter", x=idx, y=ch[target].to_numpy(), mode="lines", line=line, name=target),
            1,
            2,
        )
        marker = {"color": colour, "symbol": sym, "size": 9}
        fig.add_trace(
            trace(
                "scatter",
                x=idx,
                y=ch[col].to_numpy(),
                mode="markers",
                marker=marker,
                name=f"channel {col}",
            ),
            1,
            2,
        )
    fig.update_xaxes(title="value", row=1, col=1)
    fig.update_xaxes(title="channel", row=1, col=2)
    label = METHODS[method].label
    fig.update_layout(title=f"{label} with γ and β", barmode="overlay", bargap=0)
    return style.apply(fig, presenter, height=400).figure()


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
        "the channels, so channel c's values keep a mean m_c and a spread s_c of their own "
        "and come out with mean γ_c·m_c + β_c and spread |γ_c|·s_c: γ and β move the "
        "channels, but not onto β and γ."
        + (
            ""
            if centred
            else " (torch's nn.RMSNorm has no β; it is added here to compare like with like.)"
        )
    )


def notes(res: Affine) -> Sequence[str]:
    out = []
    if res.kind == "per-channel":
        out.append("Per-channel: γ_c runs from 0.5γ to 1.5γ and β_c from β − 1 to β + 1.")
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
    "gamma-beta", "γ and β: giving the scale back", INTRO, run, KNOBS, figure, notes=notes
)
