"""Feature dimensions by size: the few channels that dwarf the rest, before and after.

Trained transformers carry a few feature dimensions whose values are far larger than
every other's (MiniLM's dimension 99 among them). This section finds them in the
input from the numbers (each channel's root mean square against the median
channel's), and shows each channel's RMS again after LayerNorm, RMSNorm and BatchNorm
on the same tensor: the methods that pool over the channels keep the outliers and
let them set the scale; BatchNorm gives every channel its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
import torch

from normviz import style
from normviz.core import normalize
from normviz.distributions.setup import Setup, gated, input_tensor
from normviz.errors import NormConfigError
from normviz.figures.spec import Spec, trace
from normviz.knobs import Value
from normviz.layouts import LAYOUTS
from normviz.methods import METHODS, listed
from normviz.pretrained import Outliers, outliers
from normviz.sections import Progress, Section

AFTER = listed("outliers")  # the methods compared, in the chart's order (the registry's)

INTRO = (
    "Each channel's root mean square (over every other axis), on a log scale: the input, "
    "then the same tensor after LayerNorm, RMSNorm and BatchNorm. Real transformer "
    "activations have a few feature dimensions far larger than the rest; this shows "
    "which method keeps them and which gives every channel the same scale."
)


@dataclass(frozen=True, eq=False)
class FeatureDims:
    """Per-channel RMS before and after each method, and the input's outliers."""

    layout: str
    found: Outliers  # in the input
    after: dict[str, np.ndarray]  # method -> (C,) per-channel RMS of its output
    refused: dict[str, str]  # method -> why it cannot run on this input
    held: float  # LayerNorm: the share of a sample's variance the outliers hold, averaged
    restored: np.ndarray | None  # (C,) RMS after BatchNorm with γ = each channel's own σ
    restored_all: np.ndarray | None  # (C,) the same with β = each channel's mean as well


def _channel_rms(y: np.ndarray, c: int) -> np.ndarray:
    a = np.moveaxis(np.asarray(y, dtype=np.float64), c, -1).reshape(-1, y.shape[c])
    return np.sqrt((a**2).mean(axis=0))


def _held(x: np.ndarray, layout: str, top: tuple[int, ...]) -> float:
    """The outliers' share of each LayerNorm group's squared deviation, averaged."""
    if not top:
        return 0.0
    c = LAYOUTS[layout].channel_axis
    per = np.moveaxis(x.astype(np.float64), c, 1).reshape(x.shape[0], x.shape[c], -1)
    if layout == "BTC":  # LayerNorm's group is one token: (B, T, C) → (B·T, C, 1)
        per = x.astype(np.float64).reshape(-1, x.shape[-1], 1)
    dev = (per - per.mean(axis=(1, 2), keepdims=True)) ** 2
    total = dev.sum(axis=(1, 2))
    part = dev[:, list(top)].sum(axis=(1, 2))
    ok = total > 0
    return float((part[ok] / total[ok]).mean()) if ok.any() else 0.0


def feature_dims(x: np.ndarray, layout: str, eps: float = 1e-5) -> FeatureDims:
    """The input's outlier channels and every channel's RMS after each method."""
    c = LAYOUTS[layout].channel_axis
    after, refused = {}, {}
    for m in AFTER:
        try:
            after[m] = _channel_rms(output(x, m, layout, eps), c)
        except NormConfigError as e:
            refused[m] = str(e)
    restored = restored_all = None
    if "batch" in after:  # BatchNorm's γ and β are per channel: they can give the size back
        stats = normalize(x, "batch", layout, eps=eps)
        sigma = np.sqrt(stats.var.numpy().reshape(-1) + eps)
        mu = stats.mean.numpy().reshape(-1)  # type: ignore[union-attr]
        y = normalize(x, "batch", layout, eps=eps, weight=sigma).output.numpy()
        restored = _channel_rms(y, c)
        y = normalize(x, "batch", layout, eps=eps, weight=sigma, bias=mu).output.numpy()
        restored_all = _channel_rms(y, c)
    found = outliers(x, layout)
    held = _held(x, layout, found.top)
    return FeatureDims(layout, found, after, refused, held, restored, restored_all)


def output(x: np.ndarray, method: str, layout: str, eps: float = 1e-5) -> np.ndarray:
    """x after a fresh layer of `method` (γ = 1, β = 0): normalize() for a method with
    statistics, the registry's reference module for an elementwise one."""
    if METHODS[method].kind == "elementwise":
        with torch.no_grad():
            return METHODS[method].apply(torch.from_numpy(x), layout, eps=eps).numpy()
    return normalize(x, method, layout, eps=eps).output.numpy()


@gated
def run(setup: Setup, knobs: Mapping[str, Value], progress: Progress) -> FeatureDims:
    return feature_dims(input_tensor(setup).numpy(), setup.layout, setup.eps)


def figure(res: FeatureDims, presenter: bool) -> go.Figure:
    fig = Spec()
    series = {
        name: np.maximum(rms, 1e-6) for name, rms in {"input": res.found.rms, **res.after}.items()
    }
    for name, rms in series.items():
        label = "input" if name == "input" else f"after {METHODS[name].label}"
        colour = style.BEFORE if name == "input" else style.METHOD_COLOURS[name]
        symbol = style.METHOD_SYMBOLS["none" if name == "input" else name]
        fig.add_trace(
            trace(
                "scatter",
                x=np.arange(rms.size),
                y=rms,
                mode="markers",
                name=label,
                marker={"symbol": symbol, "size": 7, "color": colour},
            )
        )
    fig.update_layout(
        title="Each channel's RMS, before and after",
        xaxis={"title": {"text": "channel (feature dimension)"}},
        yaxis={"title": "RMS (log scale)", **style.log_axis(*series.values())},
        legend=style.LEGEND_BELOW,
    )
    return style.apply(fig, presenter, height=380).figure()


def _ratio(rms: np.ndarray, d: int) -> float:
    med = float(np.median(rms))
    return float(rms[d] / med) if med > 0 else float("inf")


def notes(res: FeatureDims) -> Sequence[str]:
    """What the numbers show: which channels stand out, and what each method did to them."""
    f, C = res.found, res.found.rms.size
    unit = "token" if res.layout == "BTC" else "sample"
    if not f.top:
        biggest = int(np.argmax(f.rms))
        return (
            f"No channel stands out: the largest RMS (channel {biggest}, {f.rms[biggest]:.3g}) "
            f"is {_ratio(f.rms, biggest):.1f}× the median channel's ({f.median:.3g}); an "
            f"outlier here means at least {Outliers.RATIO:g}×.",
        )
    dims = ", ".join(f"{d} (RMS {f.rms[d]:.3g}, {_ratio(f.rms, d):.0f}×)" for d in f.top)
    d = f.top[0]
    out = [
        f"**{len(f.top)} of {C} channels dwarf the rest**: {dims} against the median "
        f"channel's RMS of {f.median:.3g}. Together they hold {f.share:.0%} of the tensor's "
        "squared values."
    ]
    if "layer" in res.after:
        out.append(
            f"**LayerNorm** divides each {unit} by one σ computed over all its channels, and "
            f"the outliers hold {res.held:.0%} of that variance on average: they set the "
            f"scale for every other channel, and stay outliers (channel {d} at "
            f"{_ratio(res.after['layer'], d):.0f}× the median channel afterwards)."
        )
    if "rms" in res.after:
        out.append(
            f"**RMSNorm** does the same without the mean: channel {d} ends at "
            f"{_ratio(res.after['rms'], d):.0f}× the median channel."
        )
    if "batch" in res.after:
        spread = res.after["batch"]
        lo, hi = f"{spread.min():.2f}", f"{spread.max():.2f}"
        rms = f"RMS {lo} (to two decimals)" if lo == hi else f"RMS between {lo} and {hi}"
        back = (
            f" BatchNorm's γ and β are per channel, though, so training can give the size "
            f"back: with γ set to each channel's own σ, channel {d} returns to "
            f"{_ratio(res.restored, d):.0f}× the median; with β at each channel's mean as "
            f"well, to {_ratio(res.restored_all, d):.0f}×, as in the input."
            if res.restored is not None and res.restored_all is not None
            else ""
        )
        out.append(
            f"**BatchNorm** standardizes each channel on its own, so with γ = 1 (a fresh "
            f"layer) every channel leaves with {rms}: channel {d} at {_ratio(spread, d):.1f}× "
            f"the median, the outliers' size gone from the output.{back}"
        )
    for m in (m for m in res.after if METHODS[m].kind == "elementwise"):
        r = _ratio(res.after[m], d)
        how = "squashed" if r < _ratio(f.rms, d) / 1.1 else "not squashed"
        out.append(
            f"**{METHODS[m].label}** computes no statistic: each value goes through its curve "
            f"on its own, so channel {d} is {how}, at {r:.1f}× the median channel afterwards "
            f"({_ratio(f.rms, d):.0f}× in the input), and no other channel is rescaled by it."
        )
    out += [f"**{METHODS[m].label}** cannot run here: {why}." for m, why in res.refused.items()]
    return tuple(out)


def alt(res: FeatureDims) -> Sequence[str]:
    f = res.found
    after = "; ".join(
        f"after {METHODS[m].label}: from {r.min():.3g} to {r.max():.3g}"
        for m, r in res.after.items()
    )
    return (
        f"Each channel's RMS, {f.rms.size} channels on a log scale. Input: median "
        f"{f.median:.3g}, largest {f.rms.max():.3g}; outlier channels: "
        f"{', '.join(map(str, f.top)) or 'none'}.",
        f"RMS per channel {after}.",
    )


SECTION = Section(
    "feature-dims",
    "Feature dimensions: the few that dwarf the rest",
    INTRO,
    run,
    figure=figure,
    notes=notes,
    alt=alt,
)
