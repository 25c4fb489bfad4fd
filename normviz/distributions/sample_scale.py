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

from normviz.core import as_tensor, normalize
from normviz.data import GENERATORS, sample_scales
from normviz.distributions.histograms import Tensorish
from normviz.distributions.setup import Setup, generated_like, input_tensor
from normviz.errors import NormConfigError
from normviz.knobs import Value
from normviz.layouts import LAYOUTS
from normviz.methods import METHODS, STANDARD_METHODS
from normviz.sections import Progress, Section

FACTOR = 10.0

INTRO = (
    "A method whose groups stay inside one sample cannot tell a sample from ten times "
    "that sample: the output is the same. Below, sample 0 of the current input is "
    "multiplied by 10. Only BatchNorm, which pools across samples, notices, and then "
    "every sample's output moves."
)

RMS_INTRO = (
    "The same point on data made for it: every sample is one pattern at its own size. "
    "LayerNorm gives every sample the same size; only γ and β could bring the scale back."
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


def run(setup: Setup, knobs: Mapping[str, Value], progress: Progress) -> ScaleTable:
    x = input_tensor(setup)
    return ScaleTable(scale_invariance(x, setup.layout, groups=setup.groups, eps=setup.eps))


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
    return out or ["No method could run with one sample."]


SECTION = Section(
    "sample-scale", "Per-sample scale: what LayerNorm forgets", INTRO, run, table=table, notes=notes
)


# ---- the sample-scale data through LayerNorm ---------------------------------------------

RMS_ROWS = 16


@dataclass(frozen=True, eq=False)
class SampleRms:
    scales: np.ndarray  # the generator's factor per sample
    table: pd.DataFrame  # RMS before and after, per sample


def run_rms(setup: Setup, knobs: Mapping[str, Value], progress: Progress) -> SampleRms:
    x = generated_like(setup, "sample_scale")
    y = normalize(x, "layer", setup.layout, eps=setup.eps).output
    return SampleRms(sample_scales(setup.shape[0]), sample_rms(x, y, setup.layout))


def table_rms(res: SampleRms) -> pd.DataFrame:
    return res.table.head(RMS_ROWS).reset_index()


def notes_rms(res: SampleRms) -> Sequence[str]:
    after = res.table["RMS after"]
    return (
        f"With the **{GENERATORS['sample_scale'].label.lower()}** data (one pattern at "
        f"×{res.scales[0]:g} … ×{res.scales[-1]:g}), every sample comes out of LayerNorm with "
        f"an RMS between {after.min():.4g} and {after.max():.4g}: the scale is gone unless "
        "γ and β bring it back.",
    )


RMS_SECTION = Section(
    "sample-rms",
    "Per-sample scale on data made for it",
    RMS_INTRO,
    run_rms,
    table=table_rms,
    notes=notes_rms,
)
