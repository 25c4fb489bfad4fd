"""Per-sample scale: what LayerNorm forgets.

A method whose groups stay inside one sample cannot tell a sample from ten times
that sample. Only BatchNorm, which pools across samples, notices, and then every
sample's output moves. On the sample-scale data (one pattern at growing sizes),
every sample comes out of LayerNorm with the same size.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from normviz.core import as_tensor, normalize
from normviz.data import GENERATORS, sample_scales
from normviz.distributions.histograms import Tensorish
from normviz.distributions.setup import Setup, gated, generated_like, input_tensor
from normviz.errors import NormConfigError
from normviz.knobs import Value
from normviz.layouts import LAYOUTS
from normviz.methods import METHODS, STANDARD_METHODS
from normviz.sections import Progress, Section
from normviz.sources import cite

FACTOR = 10.0

INTRO = (
    "A method whose groups stay inside one sample cannot tell a sample from ten times "
    "that sample: the output is the same. Below, sample 0 of the current input is "
    "multiplied by 10. Only BatchNorm, which pools across samples, notices, and then "
    "every sample's output moves. Learned γ and β do not help: they are one vector shared "
    "by every sample, so they cannot know which sample was the large one. Below the table, "
    f"LayerNorm ({cite('ba2016')}) with random γ and β runs on the input and on 10 × the "
    "input."
)

RMS_INTRO = (
    "The same point on data made for it: every sample is one pattern at its own size. "
    "LayerNorm gives every sample the same size, and no γ or β can undo that, since they "
    "are the same for every sample. A transformer that needs a token's magnitude keeps "
    "it in the residual stream: with pre-norm, x + F(LN(x)) passes x on untouched."
)


def scale_invariance(
    x: Tensorish,
    layout: str,
    *,
    groups: int = 2,
    eps: float = 1e-5,
    factor: float = FACTOR,
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


@dataclass(frozen=True)
class AffineScale:
    """LayerNorm with random per-feature γ, β on x and on factor · x."""

    factor: float
    max_abs_diff: float  # max |LN(factor · x) − LN(x)|, same γ and β
    max_abs_out: float  # max |LN(x)|: how large the outputs are
    gamma: tuple[float, float]  # the random γ's smallest and largest value
    beta: tuple[float, float]


def layernorm_scale_with_affine(
    x: Tensorish, layout: str, *, eps: float = 1e-5, factor: float = FACTOR, seed: int = 0
) -> AffineScale:
    """LN(x) vs LN(factor · x) with γ ~ N(1, 1), β ~ N(0, 1) per channel (seeded).

    γ and β are shared by every sample, so whatever they are the two outputs differ only
    through ε: the per-sample scale is gone for good.
    """
    x = as_tensor(x).double()  # float64: what is left of the difference is ε, not rounding
    C = x.shape[LAYOUTS[layout].channel_axis]
    g = torch.Generator().manual_seed(seed)
    gamma = 1 + torch.randn(C, generator=g, dtype=torch.float64)
    beta = torch.randn(C, generator=g, dtype=torch.float64)
    y0 = normalize(x, "layer", layout, eps=eps, weight=gamma, bias=beta).output
    y1 = normalize(factor * x, "layer", layout, eps=eps, weight=gamma, bias=beta).output
    return AffineScale(
        factor,
        float((y1 - y0).abs().max()),
        float(y0.abs().max()),
        (float(gamma.min()), float(gamma.max())),
        (float(beta.min()), float(beta.max())),
    )


def affine_scale_note(a: AffineScale) -> str:
    """What LN(x) vs LN(factor · x) with random γ, β showed, from the numbers."""
    head = (
        f"LayerNorm with random γ ({a.gamma[0]:.2f} … {a.gamma[1]:.2f}) and β "
        f"({a.beta[0]:.2f} … {a.beta[1]:.2f}): max |LN({a.factor:g}·x) − LN(x)| = "
        f"**{a.max_abs_diff:.1e}**, while the outputs reach {a.max_abs_out:.3g}. "
    )
    if a.max_abs_diff <= 1e-3 * max(1.0, a.max_abs_out):
        return head + (
            "The two are equal up to ε's effect, whatever γ and β are: the per-sample scale "
            "is gone for good, and a model has to carry it elsewhere (the pre-norm residual "
            "stream keeps x itself)."
        )
    return head + (
        "Here they differ: this input's spread is close to ε, so ε, not γ or β, tells x "
        "from the larger copy."
    )


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


# ---- one sample ×10, every method --------------------------------------------------------


@dataclass(frozen=True, eq=False)
class ScaleTable:
    table: pd.DataFrame  # index: method
    affine: AffineScale  # LayerNorm with random γ, β on x and 10·x


@gated
def run(setup: Setup, knobs: Mapping[str, Value], progress: Progress) -> ScaleTable:
    x = input_tensor(setup)
    table = scale_invariance(x, setup.layout, groups=setup.groups, eps=setup.eps)
    progress(0.7, "LayerNorm with random γ and β")
    return ScaleTable(
        table, layernorm_scale_with_affine(x, setup.layout, eps=setup.eps, seed=setup.seed)
    )


def table(res: ScaleTable) -> pd.DataFrame:
    return res.table.reset_index()


def notes(res: ScaleTable) -> Sequence[str]:
    col = res.table["other samples: max |Δy|"]
    moved = [str(m) for m, d in col.items() if d > 1e-3]
    kept = [str(m) for m, d in col.items() if d <= 1e-3]
    out = []
    if moved:
        out.append(f"Scaling sample 0 moved the other samples' outputs under {', '.join(moved)}.")
    if kept:
        out.append(f"Under {', '.join(kept)} the other samples did not move.")
    if not out:
        out.append("No method could run with one sample.")
    out.append(affine_scale_note(res.affine))
    return out


SECTION = Section(
    "sample-scale", "Per-sample scale: what LayerNorm forgets", INTRO, run, table=table, notes=notes
)


# ---- the sample-scale data through LayerNorm ---------------------------------------------

RMS_ROWS = 16


@dataclass(frozen=True, eq=False)
class SampleRms:
    scales: np.ndarray  # the generator's factor per sample
    table: pd.DataFrame  # RMS before and after, per sample


@gated
def run_rms(setup: Setup, knobs: Mapping[str, Value], progress: Progress) -> SampleRms:
    x = generated_like(setup, "sample_scale")
    y = normalize(x, "layer", setup.layout, eps=setup.eps).output
    return SampleRms(sample_scales(setup.shape[0]), sample_rms(x, y, setup.layout))


def table_rms(res: SampleRms) -> pd.DataFrame:
    return res.table.head(RMS_ROWS).reset_index()


def notes_rms(res: SampleRms) -> Sequence[str]:
    after = res.table["RMS after"]
    ratio = res.scales[-1] / res.scales[0]
    left = float(after.max() / after.min()) if after.min() > 0 else math.inf
    gone = "is gone" if left < 1.01 else f"shrinks to ×{left:.3g} (ε's doing)"
    return (
        f"With the **{GENERATORS['sample_scale'].label.lower()}** data (one pattern at "
        f"×{res.scales[0]:g} … ×{res.scales[-1]:g}), every sample comes out of LayerNorm with "
        f"an RMS between {after.min():.4g} and {after.max():.4g}: the ×{ratio:g} spread of "
        f"sizes {gone}. γ and β cannot bring it back: they are the same for every sample, "
        "so they would scale the small and the large sample alike.",
    )


RMS_SECTION = Section(
    "sample-rms",
    "Per-sample scale on data made for it",
    RMS_INTRO,
    run_rms,
    table=table_rms,
    notes=notes_rms,
)
