"""All five methods on the same input: the pooled histograms, on one shared x-range.

Every method standardizes its own groups, yet the pooled histograms differ: where
a method pools across channels with different offsets, the offsets are mixed in;
where it keeps them apart, they are removed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import plotly.graph_objects as go
import torch

from normviz import style
from normviz.core import as_tensor, normalize
from normviz.distributions.histograms import (
    HIST_BINS,
    Histogram,
    Tensorish,
    bars,
    histogram,
    value_range,
)
from normviz.distributions.setup import Setup, gated, input_tensor
from normviz.errors import NormConfigError
from normviz.figures.spec import Spec
from normviz.knobs import Value
from normviz.methods import METHODS, STANDARD_METHODS
from normviz.sections import Progress, Section

REFUSED_WRAP = 28  # characters per line of a "cannot run" note in a small panel

INTRO = (
    "Each panel is the same input after a different method, on one shared x-range. "
    "Every method standardizes its own groups, yet the pooled histograms differ: "
    "where a method pools across channels with different offsets, the offsets are "
    "mixed in; where it keeps them apart, they are removed."
)


@dataclass(frozen=True, eq=False)
class MethodsComparison:
    """The input's histogram and each standard method's, on one shared value range."""

    layout: str
    input: Histogram
    outputs: dict[str, Histogram]  # method key -> histogram, for the methods that ran
    refused: dict[str, str]  # method key -> why it cannot run on this input
    groups: int = 2  # GroupNorm's G


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
        groups,
    )


@gated
def run(setup: Setup, knobs: Mapping[str, Value], progress: Progress) -> MethodsComparison:
    return compare_methods(input_tensor(setup), setup.layout, groups=setup.groups, eps=setup.eps)


def make_methods_figure(comp: MethodsComparison, presenter: bool = False) -> go.Figure:
    """The input and all five methods' outputs as small multiples (2D, one figure)."""
    keys = list(STANDARD_METHODS)
    titles = ["input", *(METHODS[k].label for k in keys)]
    cols = 3
    rows = math.ceil(len(titles) / cols)
    fig = Spec.grid(rows, cols, tuple(titles), horizontal_spacing=0.05, vertical_spacing=0.16)
    fig.add_trace(bars(comp.input, style.BEFORE, "input"), 1, 1)
    shared = None
    for i, key in enumerate(keys, start=1):
        r, c = divmod(i, cols)
        if key in comp.outputs:
            h = comp.outputs[key]
            fig.add_trace(bars(h, style.METHOD_COLOURS[key], METHODS[key].label), r + 1, c + 1)
            shared = (float(h.edges[0]), float(h.edges[-1]))
        else:
            # an empty subplot has no axes in the browser, so place the note on the page
            xd = fig.layout[f"xaxis{i + 1}"]["domain"]
            yd = fig.layout[f"yaxis{i + 1}"]["domain"]
            fig.add_annotation(
                text="cannot run:<br>" + _wrap(comp.refused.get(key, ""), REFUSED_WRAP),
                xref="paper",
                yref="paper",
                x=(xd[0] + xd[1]) / 2,
                y=(yd[0] + yd[1]) / 2,
                xanchor="center",  # "auto" anchors left in the left third of the page
                yanchor="middle",
                showarrow=False,
                align="center",
                font={"color": style.HIGHLIGHT},
            )
    # every method on the same x-range, so widths compare (subplot i + 1 is xaxis{i + 1})
    ranges = {
        f"xaxis{i + 1}": {"range": list(shared)}
        for i, key in enumerate(keys, start=1)
        if shared is not None and key in comp.outputs
    }
    fig.update_layout(
        title="The same input under each method<br>(outputs share one x-range)",
        showlegend=False,
        bargap=0,
        **ranges,
    )
    style.apply(fig, presenter, height=300 * rows + 90)
    return style.top_room(fig, presenter, below=1).figure()


def _wrap(text: str, width: int, max_lines: int = 5) -> str:
    """Break `text` into <br>-joined lines for a plotly annotation."""
    lines: list[str] = []
    line = ""
    for w in text.split():
        if line and len(line) + 1 + len(w) > width:
            lines.append(line)
            line = w
        else:
            line = f"{line} {w}".strip()
    if line:
        lines.append(line)
    if len(lines) > max_lines:
        lines = [*lines[: max_lines - 1], lines[max_lines - 1] + " …"]
    return "<br>".join(lines)


def notes(comp: MethodsComparison) -> Sequence[str]:
    out = [f"GroupNorm uses G = {comp.groups}."]
    if comp.refused:
        names = ", ".join(METHODS[k].label for k in comp.refused)
        out.append(f"{names} cannot run on this input: its panel says why.")
    return out


SECTION = Section(
    "all-methods",
    "All five methods on the same input",
    INTRO,
    run,
    figure=make_methods_figure,
    notes=notes,
)
