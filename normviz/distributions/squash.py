"""Before and after an elementwise method (DyT): tanh squashes, nothing is rescaled.

DyT computes no statistic: every value goes through γ·tanh(α·x) + β on its own (a fresh
layer: α = 0.5, γ = 1, β = 0). Small values pass almost linearly (tanh(u) ≈ u), large
ones are bounded near ±γ. This section shows the values before and after, how many
land where tanh saturates, and what happens to the largest channel, beside LayerNorm,
which divides every value of a token by a σ that the large channel itself inflates.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from normviz.core import normalize
from normviz.distributions.before_after import make_before_after_figure
from normviz.distributions.histograms import Histogram, histogram
from normviz.elementwise import ElementwiseSetup, fresh_output
from normviz.knobs import Value
from normviz.methods import METHODS
from normviz.pretrained import Outliers, outliers
from normviz.sections import Progress, Section
from normviz.text import direction

SATURATED = 2.0  # |α·x| beyond this: tanh is past ±0.96, the value is squashed
COMPARED = "layer"  # the statistics method the outlier channel is compared with

INTRO = (
    "No statistics at all: each value goes through tanh(α·x) on its own (a fresh layer, "
    "γ = 1 and β = 0), so large values are **squashed** toward ±1 instead of the whole "
    "group being **rescaled** by a statistic. Try the *outliers* data, or MiniLM's "
    "activations with their dimension 99."
)


@dataclass(frozen=True, eq=False)
class Squash:
    """The values before and after, and the largest channel's size at each step."""

    method: str
    layout: str
    alpha: float | None  # the fresh layer's α (None: the method has none)
    before: Histogram
    after: Histogram
    saturated: float  # share of values with |α·x| > SATURATED
    max_in: float  # largest |x|
    max_out: float  # largest |y|
    channel: int  # the channel with the largest RMS in the input
    ratio_in: float  # its RMS over the median channel's, in the input
    ratio_out: float  # ... after the elementwise method
    ratio_compared: float | None  # ... after COMPARED (None: it cannot run here)


def _ratio(rms: np.ndarray, d: int) -> float:
    med = float(np.median(rms))
    return float(rms[d] / med) if med > 0 else float("inf")


def squash(setup: ElementwiseSetup) -> Squash:
    x = setup.tensor()
    y = fresh_output(setup.method, x, setup.layout)
    mod = METHODS[setup.method].build(setup.layout, tuple(x.shape))
    a = getattr(mod, "alpha", None)
    alpha = None if a is None else float(a.detach().reshape(-1)[0])
    found, after = outliers(x, setup.layout), outliers(y, setup.layout)
    d = int(np.argmax(found.rms))
    try:
        z = normalize(x, COMPARED, setup.layout, eps=setup.eps).output
        compared: float | None = _ratio(outliers(z, setup.layout).rms, d)
    except ValueError:  # NormConfigError: e.g. one value per statistic
        compared = None
    return Squash(
        setup.method,
        setup.layout,
        alpha,
        histogram(x),
        histogram(y),
        float((alpha * x).abs().gt(SATURATED).float().mean()) if alpha is not None else 0.0,
        float(x.abs().max()),
        float(y.abs().max()),
        d,
        _ratio(found.rms, d),
        _ratio(after.rms, d),
        compared,
    )


def run(setup: ElementwiseSetup, knobs: Mapping[str, Value], progress: Progress) -> Squash:
    return squash(setup)


def figure(res: Squash, presenter: bool) -> go.Figure:
    return make_before_after_figure(res.before, res.after, res.method, presenter)


def notes(res: Squash) -> Sequence[str]:
    label = METHODS[res.method].label
    unit = "token" if res.layout == "BTC" else "sample"
    moved = direction(res.ratio_out / res.ratio_in, 1.1) if res.ratio_in > 0 else 0
    verb = {-1: "shrinks it", 0: "leaves it about as large", 1: "makes it larger"}[moved]
    out = [f"**{label} computes no statistic**: each value is transformed on its own."]
    if res.alpha is not None:
        out.append(
            f"With α = {res.alpha:g}, {res.saturated:.1%} of the values have |α·x| > "
            f"{SATURATED:g}, where tanh is already past ±0.96: those are squashed; the rest "
            "pass almost linearly (tanh(u) ≈ u, so y ≈ α·x)."
        )
    tanh_bound = res.alpha is not None and res.max_out <= 1
    bound = ": a fresh layer's outputs never exceed 1 in size" if tanh_bound else ""
    out += [
        f"The largest |x|, {res.max_in:.3g}, comes out as {res.max_out:.3g}{bound}.",
        f"Channel {res.channel}, the largest by RMS ({res.ratio_in:.1f}× the median "
        f"channel's), ends at {res.ratio_out:.1f}× after {label}: the squash {verb} "
        "relative to the others.",
    ]
    if res.ratio_compared is not None:
        big = res.ratio_in >= Outliers.RATIO
        kept = res.ratio_in > 0 and direction(res.ratio_compared / res.ratio_in, 1.1) == 0
        out.append(
            f"After {METHODS[COMPARED].label} the same channel is at {res.ratio_compared:.1f}×: "
            f"it divides every value of a {unit} by one σ"
            + (", which the large channel inflates" if big else "")
            + (
                ", so the ratio between the channels is kept and the others shrink with it."
                if kept
                else "."
            )
        )
    return tuple(out)


def alt(res: Squash) -> Sequence[str]:
    return (
        f"Histograms of the values before (from {res.before.edges[0]:.3g} to "
        f"{res.before.edges[-1]:.3g}) and after {METHODS[res.method].label} (from "
        f"{res.after.edges[0]:.3g} to {res.after.edges[-1]:.3g}).",
    )


SECTION = Section(
    "squash",
    "Before and after: {method}",
    INTRO,
    run,
    figure=figure,
    notes=notes,
    alt=alt,
)
