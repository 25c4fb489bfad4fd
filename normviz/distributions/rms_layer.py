"""RMSNorm vs LayerNorm: direction, cost and time.

RMSNorm divides each vector by its root mean square and subtracts nothing, so with
γ = 1 the vector keeps its direction (cosine 1); a learned per-feature γ stretches
some features more than others and turns it. LayerNorm first subtracts the vector's
mean, which turns it unless that mean is 0: cos = σ / sqrt(σ² + μ²) (with γ = 1).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch

from normviz import style
from normviz.core import as_tensor, contract, normalize
from normviz.distributions.histograms import Histogram, Tensorish, bars, histogram
from normviz.distributions.setup import Setup, gated, input_tensor
from normviz.errors import NormConfigError
from normviz.figures.spec import Spec
from normviz.knobs import Value
from normviz.layouts import LAYOUTS
from normviz.methods import METHODS
from normviz.sections import Progress, Section
from normviz.sources import cite

INTRO = (
    f"RMSNorm ({cite('zhang2019')}) divides each vector by its root mean square and "
    "subtracts nothing, so with γ = 1 the vector keeps its direction (cosine 1). A learned "
    "γ is one number per feature: it stretches some features more than others and so can "
    "turn the vector too; the chart's third series puts a random γ in its place, and the "
    "note under the chart says how far that turned this input's vectors. LayerNorm first "
    "subtracts the vector's mean: when that mean is not 0 the vector turns, and the further "
    "from centred it was, the more. In exchange, RMSNorm leaves a shared offset in place."
)
GAMMA_RANGE = (0.5, 1.5)  # the random per-feature γ: uniform in this range (seeded)


@dataclass(frozen=True, eq=False)
class CosineComparison:
    """Per-vector cosine similarity of input and output, LayerNorm vs RMSNorm."""

    layout: str
    vector_axes: tuple[str, ...]  # what one vector spans: ("C",) or ("C", "H", "W")
    layer: np.ndarray  # cos(x, LayerNorm(x)) per vector
    rms: np.ndarray  # cos(x, RMSNorm(x)) per vector
    zero_vectors: int  # all-zero vectors, where the cosine is undefined (left out)
    mean_offset: np.ndarray  # |μ| / RMS per vector: how far from centred each vector is
    rms_gamma: np.ndarray  # cos(x, RMSNorm(x) with the random per-feature γ) per vector
    gamma: np.ndarray  # that γ, (C,)


def random_gamma(C: int, seed: int = 0) -> torch.Tensor:
    """A stand-in for a learned per-feature γ: uniform in GAMMA_RANGE, seeded."""
    g = torch.Generator().manual_seed(seed)
    lo, hi = GAMMA_RANGE
    return lo + (hi - lo) * torch.rand(C, generator=g)


def cosine_per_vector(
    x: Tensorish, layout: str, eps: float = 1e-5, seed: int = 0
) -> CosineComparison:
    """cos(x, y) for each vector RMSNorm normalizes (a token in BTC, a sample in NCHW):
    LayerNorm and RMSNorm with γ = 1, and RMSNorm with a random per-feature γ."""
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
    gamma = random_gamma(x.shape[LAYOUTS[layout].channel_axis], seed)
    rms_g = cos(normalize(x, "rms", layout, eps=eps, weight=gamma).output)
    return CosineComparison(
        layout,
        con.axes,
        layer[nonzero].double().numpy(),
        rmsn[nonzero].double().numpy(),
        int((~nonzero).sum()),
        (mean[nonzero].abs() / rms[nonzero]).double().numpy(),
        rms_g[nonzero].double().numpy(),
        gamma.numpy(),
    )


def cost_table(layout: str, shape: tuple[int, ...]) -> pd.DataFrame:
    """What LayerNorm and RMSNorm compute per vector of m values, and their parameters."""
    rows = []
    for key in ("layer", "rms"):
        con = contract(key, layout, shape)
        c = con.centred
        rows.append(
            {
                "method": METHODS[key].label,
                "statistics per vector": "mean and variance" if c else "mean square",
                "sums over the m values": "Σx, Σ(x − μ)²" if c else "Σx²",
                f"arithmetic (m = {con.group_size:,})": (
                    "≈ 5 per value, +2 for γ, β" if c else "≈ 3 per value, +1 for γ"
                ),
                "learned parameters": "γ and β" if c else "γ only",
                "keeps direction": "only when μ = 0 and γ is uniform"
                if c
                else "only when γ is uniform (e.g. 1)",
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
    where = [i for i, a in enumerate(lay.axes) if a in con.reduced]
    dims = [x.shape[i] for i in where]
    if where != list(range(x.ndim - len(dims), x.ndim)):
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


@dataclass(frozen=True, eq=False)
class RmsVsLayer:
    cosine: CosineComparison
    costs: pd.DataFrame  # index: method
    timing: Timing


@gated
def run(setup: Setup, knobs: Mapping[str, Value], progress: Progress) -> RmsVsLayer:
    x = input_tensor(setup)
    cmp = cosine_per_vector(x, setup.layout, setup.eps)
    progress(0.7, "timing torch's modules")
    return RmsVsLayer(
        cmp, cost_table(setup.layout, setup.shape), time_layer_vs_rms(x, setup.layout)
    )


COSINE_BINS = 40  # bars of the cosine chart


def _series(cmp: CosineComparison) -> tuple[tuple[str, np.ndarray, str], ...]:
    return (
        ("layer", cmp.layer, f"{METHODS['layer'].label}, γ = 1"),
        ("rms", cmp.rms, f"{METHODS['rms'].label}, γ = 1"),
        ("rms_gamma", cmp.rms_gamma, f"{METHODS['rms'].label}, random γ"),
    )


def cosine_histograms(cmp: CosineComparison) -> dict[str, Histogram]:
    """The chart's bars: each series binned on one shared range (key -> histogram)."""
    series = _series(cmp)
    both = np.concatenate([v for _, v, _ in series]) if cmp.layer.size else np.ones(1)
    lo = min(float(np.nanmin(both)), 0.99)
    rng = (lo, 1.0 + 1e-9)
    return {
        k: histogram(np.clip(v, lo, 1.0), bins=COSINE_BINS, value_range_=rng)
        for k, v, _ in series
    }


def make_cosine_figure(cmp: CosineComparison, presenter: bool = False) -> go.Figure:
    """How far each vector turns: cos(x, LayerNorm(x)) vs cos(x, RMSNorm(x))."""
    hists = cosine_histograms(cmp)
    fig = Spec()
    for (key, _, name), hatch in zip(_series(cmp), ("", "/", "x"), strict=False):
        colour = style.METHOD_COLOURS.get(key, style.PALETTE[2])
        fig.add_trace(bars(hists[key], colour, name, 0.7, hatch))  # hatched: not colour alone
    what = _vector_word(cmp)
    fig.update_layout(
        title=f"Cosine similarity of each {what}'s vector<br>before and after",
        barmode="overlay",
        bargap=0,
        legend=style.LEGEND_BELOW,
    )
    fig.update_xaxes(title="cos(x, y): 1 = same direction")
    fig.update_yaxes(title=f"{what}s")
    style.apply(fig, presenter, height=380)
    return style.top_room(fig, presenter).figure()


def _vector_word(cmp: CosineComparison) -> str:
    return "token" if cmp.vector_axes == ("C",) else "sample"


def figure(res: RmsVsLayer, presenter: bool) -> go.Figure:
    return make_cosine_figure(res.cosine, presenter)


def table(res: RmsVsLayer) -> pd.DataFrame:
    return res.costs.reset_index()


def notes(res: RmsVsLayer) -> Sequence[str]:
    cmp, t = res.cosine, res.timing
    out = []
    if cmp.layer.size:
        g_lo, g_hi = float(cmp.gamma.min()), float(cmp.gamma.max())
        turned = float(cmp.rms_gamma.min())
        h = cosine_histograms(cmp)
        width = float(h["rms"].edges[1] - h["rms"].edges[0])
        if np.array_equal(h["rms"].counts, h["rms_gamma"].counts):
            verdict = (
                "a turn too small for the chart: its random-γ bars sit on the γ = 1 bar "
                f"(bins {width:.2g} wide). Direction is kept exactly only when γ is the same "
                "for every feature, as γ = 1 is"
                if turned < 1 - 1e-6
                else "on this input γ does not measurably turn the vectors"
            )
        else:
            verdict = (
                "so a learned γ turns the vector, and the random-γ bars sit apart from the "
                "γ = 1 bar: direction is kept only when γ is the same for every feature, as "
                "γ = 1 is"
            )
        out.append(
            f"Over {cmp.layer.size:,} {_vector_word(cmp)}s, LayerNorm's smallest cosine is "
            f"{float(cmp.layer.min()):.4f}, RMSNorm's {float(cmp.rms.min()):.4f} with γ = 1 "
            f"and **{turned:.4f}** with a random per-feature γ ({g_lo:.2f} … {g_hi:.2f}), "
            f"{verdict}."
        )
    if cmp.zero_vectors:
        out.append(f"{cmp.zero_vectors:,} all-zero vector(s) have no direction: left out.")
    out.append(
        f"The table says what each costs per vector of m values. torch's own modules on this "
        f"input, best of 3 on this server: LayerNorm {t.layer * 1e3:.2f} ms, RMSNorm "
        f"{t.rms * 1e3:.2f} ms. Small tensors measure call overhead more than arithmetic."
    )
    return out


SECTION = Section(
    "rms-vs-layer", "RMSNorm vs LayerNorm", INTRO, run, figure=figure, table=table, notes=notes
)
