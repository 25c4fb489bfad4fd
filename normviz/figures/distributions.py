"""Histograms of values before and after normalization, and the ε, γ/β and cosine views.

Every figure here draws counts that `normviz.stats` binned on the server, so its
size does not grow with the tensor: a few hundred numbers at most.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from normviz import style
from normviz.methods import METHODS, STANDARD_METHODS
from normviz.stats import (
    AffineDemo,
    CosineComparison,
    EpsSweep,
    Histogram,
    MethodsComparison,
    histogram,
)

REFUSED_WRAP = 28  # characters per line of a "cannot run" note in a small panel


def _bars(h: Histogram, colour: str, name: str, opacity: float = 1.0) -> go.Bar:
    """One histogram as touching bars (the bins were computed on the server)."""
    width = float(h.edges[1] - h.edges[0]) if h.edges.size > 1 else 1.0
    return go.Bar(
        x=np.round(h.centres, 6),
        y=h.counts,
        width=width,
        marker={"color": colour, "line": {"width": 0}},
        opacity=opacity,
        name=name,
        hovertemplate="%{x:.3g}: %{y} values<extra>" + name + "</extra>",
    )


def _moments_text(h: Histogram) -> str:
    """`mean 0.01, std 1.00`, the line under a panel's title."""
    if not h.n:
        return "no finite values"
    text = f"mean {h.mean:.3g}, std {h.std:.3g}"
    return text + (f", {h.n_nonfinite:,} NaN (0/0, left out)" if h.n_nonfinite else "")


def make_before_after_figure(
    before: Histogram,
    after: Histogram,
    method: str,
    presenter: bool = False,
    after_label: str = "after",
) -> go.Figure:
    """The values before and after one method, side by side, each on its own x-range."""
    label = METHODS[method].label
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=(
            f"before: {_moments_text(before)}",
            f"{after_label}: {_moments_text(after)}",
        ),
        horizontal_spacing=0.08,
    )
    fig.add_trace(_bars(before, style.BEFORE, "before"), 1, 1)
    fig.add_trace(_bars(after, style.METHOD_COLOURS[method], after_label), 1, 2)
    fig.update_layout(
        title=f"{label}: values before and {after_label}",
        showlegend=False,
        bargap=0,
    )
    fig.update_yaxes(title_text="values", row=1, col=1)
    fig.update_xaxes(title_text="value")
    return style.apply(fig, presenter, height=380)


def make_methods_figure(comp: MethodsComparison, presenter: bool = False) -> go.Figure:
    """The input and all five methods' outputs as small multiples (2D, one figure)."""
    keys = list(STANDARD_METHODS)
    titles = ["input", *(METHODS[k].label for k in keys)]
    n = len(titles)
    cols = 3
    rows = math.ceil(n / cols)
    fig = make_subplots(
        rows=rows,
        cols=cols,
        subplot_titles=titles,
        horizontal_spacing=0.05,
        vertical_spacing=0.16,
    )
    fig.add_trace(_bars(comp.input, style.BEFORE, "input"), 1, 1)
    shared = None
    for i, key in enumerate(keys, start=1):
        r, c = divmod(i, cols)
        if key in comp.outputs:
            h = comp.outputs[key]
            fig.add_trace(_bars(h, style.METHOD_COLOURS[key], METHODS[key].label), r + 1, c + 1)
            shared = (float(h.edges[0]), float(h.edges[-1]))
        else:
            # an empty subplot has no axes in the browser, so place the note on the page
            n_sub = i + 1
            xd = fig.layout[f"xaxis{n_sub}"].domain
            yd = fig.layout[f"yaxis{n_sub}"].domain
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
        title="The same input under each method (outputs share one x-range)",
        showlegend=False,
        bargap=0,
        **ranges,
    )
    return style.apply(fig, presenter, height=300 * rows + 60)


def _wrap(text: str, width: int, max_lines: int = 5) -> str:
    """Break `text` into <br>-joined lines for a plotly annotation."""
    words, lines, line = text.split(), [], ""
    for w in words:
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


def make_affine_figure(demo: AffineDemo, method: str, presenter: bool = False) -> go.Figure:
    """Left: values with γ = 1, β = 0 and with γ, β. Right: each channel's mean and std."""
    label = METHODS[method].label
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=("values", "per channel: mean → β, std → γ"),
        horizontal_spacing=0.1,
    )
    fig.add_trace(_bars(demo.before, style.BEFORE, "γ = 1, β = 0", opacity=0.6), 1, 1)
    fig.add_trace(_bars(demo.after, style.METHOD_COLOURS[method], "with γ, β", opacity=0.6), 1, 1)
    ch = demo.channels
    idx = np.arange(len(ch))
    for col, target, colour, sym in (
        ("mean", "β", style.PALETTE[1], "circle"),
        ("std", "γ", style.PALETTE[2], "diamond"),
    ):
        fig.add_trace(
            go.Scatter(
                x=idx,
                y=ch[target].to_numpy(),
                mode="lines",
                line={"color": colour, "dash": "dot"},
                name=target,
            ),
            1,
            2,
        )
        fig.add_trace(
            go.Scatter(
                x=idx,
                y=ch[col].to_numpy(),
                mode="markers",
                marker={"color": colour, "symbol": sym, "size": 9},
                name=f"channel {col}",
            ),
            1,
            2,
        )
    fig.update_xaxes(title_text="value", row=1, col=1)
    fig.update_xaxes(title_text="channel", row=1, col=2)
    fig.update_layout(title=f"{label} with γ and β", barmode="overlay", bargap=0)
    return style.apply(fig, presenter, height=400)


def make_eps_figure(sweep: EpsSweep, current_eps: float, presenter: bool = False) -> go.Figure:
    """Variance after normalization against ε (log scale), per group: σ²/(σ² + ε)."""
    label = METHODS[sweep.method].label
    pos = sweep.eps > 0
    eps = sweep.eps[pos]
    fig = go.Figure()
    for values, name, dash in (
        (sweep.var_after_max, "largest", "dot"),
        (sweep.var_after_median, "median group", "solid"),
        (sweep.var_after_min, "smallest", "dash"),
    ):
        fig.add_trace(
            go.Scatter(
                x=eps,
                y=values[pos],
                mode="lines+markers",
                name=name,
                line={"color": style.METHOD_COLOURS[sweep.method], "dash": dash},
            )
        )
    if sweep.zero_groups:  # 0/sqrt(ε) = 0 for every ε > 0
        fig.add_trace(
            go.Scatter(
                x=eps,
                y=np.zeros(eps.size),
                mode="lines+markers",
                name="constant group (σ² = 0)",
                line={"color": style.HIGHLIGHT, "width": 3},
            )
        )
    if current_eps > 0:
        fig.add_vline(x=current_eps, line={"color": style.SELECTED, "dash": "dash"})
        fig.add_annotation(
            x=math.log10(current_eps), y=1.04, yref="y", text="current ε", showarrow=False
        )
    nan0 = int(sweep.nan_values[~pos].sum()) if (~pos).any() else 0
    note = (
        f"ε = 0: {sweep.zero_groups:,} constant group(s) give 0/0, {nan0:,} NaN values"
        if sweep.zero_groups
        else "ε = 0: no constant group here, so no NaN"
    )
    fig.add_annotation(
        text=note,
        xref="paper",
        yref="paper",
        x=0.02,
        y=0.5,  # the empty middle: the curves hug 1 and the constant groups sit at 0
        xanchor="left",
        showarrow=False,
        font={"color": style.HIGHLIGHT if sweep.zero_groups else style.BEFORE},
    )
    moment = "variance" if METHODS[sweep.method].centred else "mean square"
    fig.update_xaxes(type="log", title_text="ε (log scale)", exponentformat="power")
    fig.update_yaxes(title_text=f"{moment} after", range=[-0.05, 1.1])
    fig.update_layout(title=f"{label}: ε shrinks the groups with small spread")
    return style.apply(fig, presenter, height=380)


def make_cosine_figure(cmp: CosineComparison, presenter: bool = False) -> go.Figure:
    """How far each vector turns: cos(x, LayerNorm(x)) vs cos(x, RMSNorm(x))."""
    both = np.concatenate([cmp.layer, cmp.rms]) if cmp.layer.size else np.ones(1)
    lo = min(float(np.nanmin(both)), 0.99)
    rng = (lo, 1.0 + 1e-9)
    fig = go.Figure()
    for key, values in (("layer", cmp.layer), ("rms", cmp.rms)):
        h = histogram(np.clip(values, lo, 1.0), bins=40, value_range_=rng)
        fig.add_trace(_bars(h, style.METHOD_COLOURS[key], METHODS[key].label, opacity=0.7))
    what = "token" if cmp.vector_axes == ("C",) else "sample"
    fig.update_layout(
        title=f"Cosine similarity of each {what}'s vector before and after",
        barmode="overlay",
        bargap=0,
        legend={"orientation": "h", "y": -0.25},
    )
    fig.update_xaxes(title_text="cos(x, y): 1 = same direction")
    fig.update_yaxes(title_text=f"{what}s")
    return style.apply(fig, presenter, height=360)


__all__ = [
    "make_affine_figure",
    "make_before_after_figure",
    "make_cosine_figure",
    "make_eps_figure",
    "make_methods_figure",
]
