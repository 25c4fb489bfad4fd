"""Outliers and int8: one massive scalar sets the scale every other value is rounded to.

A bridge to deployment. Absmax int8 quantization stores `q = round(x / scale)` with
`scale = max|x| / 127` and reads back `q · scale`. On SmolLM2's residual stream the
largest |x| is one feature of the first token, thousands of times the median, so the
step between int8 levels dwarfs most values and they round to 0. Keeping that one
feature aside in float (as LLM.int8() does for its outlier features) and scaling the rest
by their own absmax brings the error on the other features back down.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import plotly.graph_objects as go
import torch

from normviz import style
from normviz.distributions.massive import applies
from normviz.distributions.setup import Setup
from normviz.errors import NormConfigError
from normviz.figures.spec import Spec, trace
from normviz.knobs import Value
from normviz.sections import Progress, Section

INTRO = (
    "Quantize the page's hidden state (every sentence, token and feature) to int8 with "
    "absmax scaling, once with the largest feature included in the scale and once with it "
    "kept aside in float, and measure the error on the other features."
)
WAYS = ("absmax over every feature", "that feature kept aside")


def absmax_int8(x: torch.Tensor) -> tuple[torch.Tensor, float]:
    """x rounded to int8 levels with scale max|x| / 127 (round half to even), read back."""
    scale = float(x.abs().max()) / 127
    if scale == 0:
        return torch.zeros_like(x), 0.0
    return torch.round(x / scale).clamp(-127, 127) * scale, scale


@dataclass(frozen=True)
class Int8:
    layer: str = ""
    dim: int = -1  # the feature of the largest |x|
    largest: float = 0.0
    scale: tuple[float, float] = (0.0, 0.0)  # per way: the int8 step
    error: tuple[float, float] = (0.0, 0.0)  # per way: relative RMS error, other features
    zeros: tuple[float, float] = (0.0, 0.0)  # per way: share of other nonzero values read as 0

    @property
    def ran(self) -> bool:
        return bool(self.layer)


def int8_errors(x: torch.Tensor, layer: str = "") -> Int8:
    """Both ways on x (…, C): the features other than the largest |x|'s are compared."""
    x = x.double().reshape(-1, x.shape[-1])
    d = int(x.abs().max(0).values.argmax())
    other = torch.ones(x.shape[-1], dtype=torch.bool)
    other[d] = False
    rest = x[:, other]
    whole, s1 = absmax_int8(x)
    aside, s2 = absmax_int8(rest)  # feature d stays in float: no error there
    out = []
    for xhat in (whole[:, other], aside):
        err = float((xhat - rest).norm() / rest.norm())
        zero = float(((xhat == 0) & (rest != 0)).sum() / (rest != 0).sum())
        out.append((err, zero))
    return Int8(
        layer, d, float(x.abs().max()), (s1, s2), (out[0][0], out[1][0]), (out[0][1], out[1][1])
    )


def run(setup: Setup, knobs: Mapping[str, Value], progress: Progress) -> Int8:
    if not applies(setup.source):
        return Int8()
    from normviz.pretrained import minilm, smollm2

    src = setup.source
    layer = src.layer or smollm2.DEFAULT_LAYER  # type: ignore[union-attr]
    try:
        x, _ = smollm2.hidden_states(minilm.split_text(src.text), layer, progress)  # type: ignore[union-attr]
    except ValueError as e:
        raise NormConfigError(str(e)) from e
    return int8_errors(torch.from_numpy(x), layer)


def figure(res: Int8, presenter: bool) -> go.Figure | None:
    if not res.ran:
        return None
    fig = Spec.grid(1, 2, ("Relative error, other features", "Share rounded to 0"))
    for col, ys in ((1, res.error), (2, res.zeros)):
        fig.add_trace(
            trace(
                "bar",
                x=list(WAYS),
                y=list(ys),
                showlegend=False,
                marker={
                    "color": [style.PALETTE[5], style.PALETTE[0]],
                    "pattern": {"shape": ["", "/"]},
                },
                text=[f"{v:.1%}" for v in ys],
                textposition="auto",
            ),
            row=1,
            col=col,
        )
    fig.update_yaxes({"tickformat": ".0%", "rangemode": "tozero"})
    return style.apply(fig, presenter, height=360).figure()


def notes(res: Int8) -> Sequence[str]:
    if not res.ran:
        return (
            "This section runs on SmolLM2's residual stream: choose the data source "
            "*SmolLM2 (real text, RMSNorm)* in the sidebar.",
        )
    (s1, s2), (e1, e2), (z1, z2) = res.scale, res.error, res.zeros
    better = e1 / e2 if e2 > 0 else float("inf")
    return (
        f"With the largest |x| ({res.largest:,.0f}, dimension {res.dim}) in the scale, one "
        f"int8 step is {s1:.3g}: the other features come back with a relative RMS error of "
        f"{e1:.1%}, and {z1:.0%} of them read back as 0.",
        f"With dimension {res.dim} kept aside in float, the step is {s2:.3g} and the error on "
        f"the same features {e2:.1%} ({better:,.0f}× {'smaller' if better > 1 else 'larger'}), "
        f"{z2:.0%} read as 0. The one scalar is {res.largest / (s2 * 127):,.0f}× the largest "
        "of the others: with absmax scaling it alone sets the precision of every value.",
    )


SECTION = Section(
    "int8",
    "Outliers and int8: one scalar sets everyone's precision",
    INTRO,
    run,
    figure=figure,
    notes=notes,
)
