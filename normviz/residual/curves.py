"""What the page's figures share: one colour, dash and hover text per placement."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from normviz import style
from normviz.figures.spec import Spec, trace
from normviz.residual.model import PLACEMENT_LABELS

# Colour and dash both differ, so the placements stay apart in grey-scale too.
PLACEMENT_COLOURS: dict[str, str] = {
    "pre": style.PALETTE[0],
    "post": style.PALETTE[5],
    "peri": style.PALETTE[2],
    "deepnorm": style.PALETTE[3],
    "none": style.BEFORE,
}
PLACEMENT_DASH: dict[str, str] = {
    "pre": "solid",
    "post": "dash",
    "peri": "longdash",
    "deepnorm": "dashdot",
    "none": "dot",
}


def rounded(a: np.ndarray | Sequence[float], digits: int = 4) -> list[float | None]:
    """Values rounded to `digits` significant digits; non-finite or ≤ 0 become gaps (log axes)."""
    out: list[float | None] = []
    for v in np.asarray(a, dtype=float).ravel():
        out.append(float(f"{v:.{digits}g}") if np.isfinite(v) and v > 0 else None)
    return out


def rgba(hex_colour: str, alpha: float) -> str:
    h = hex_colour.lstrip("#")
    r, g, b = (int(h[i : i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


def hover(placement: str, x_name: str) -> str:
    return f"{PLACEMENT_LABELS[placement]}<br>{x_name} %{{x}}: %{{y:.3g}}<extra></extra>"


def line(placement: str) -> dict[str, object]:
    """The placement's line style."""
    return {"color": PLACEMENT_COLOURS[placement], "dash": PLACEMENT_DASH[placement], "width": 3}


def median_traces(
    xs: list[int], vals: np.ndarray, placement: str, x_name: str, legend: bool
) -> list[dict[str, object]]:
    """The median over seeds (rows of `vals`) as a line, and their range as a band (2+ seeds)."""
    colour = PLACEMENT_COLOURS[placement]
    name = PLACEMENT_LABELS[placement]
    out = []
    if vals.shape[0] > 1:
        lo, hi = np.min(vals, axis=0), np.max(vals, axis=0)
        out.append(
            trace(
                "scatter",
                x=xs + xs[::-1],
                y=rounded(hi) + rounded(lo)[::-1],
                fill="toself",
                fillcolor=rgba(colour, 0.18),
                line={"width": 0},
                hoverinfo="skip",
                showlegend=False,
                legendgroup=placement,
                name=f"{name} range",
            )
        )
    with np.errstate(invalid="ignore"):
        med = np.median(vals, axis=0)
    out.append(
        trace(
            "scatter",
            x=xs,
            y=rounded(med),
            mode="lines",
            line=line(placement),
            name=name,
            legendgroup=placement,
            showlegend=legend,
            hovertemplate=hover(placement, x_name),
        )
    )
    return out


def finish_panels(fig: Spec, title: str, presenter: bool, height: int) -> go.Figure:
    """Title, legend below, the house style, and room for the title above the panel titles."""
    size = style.font_size(presenter)
    fig.update_layout(
        title={"text": title},
        # the legend at the very bottom, under the x titles (which automargin keeps clear)
        legend=style.LEGEND_BELOW,
        hovermode="closest",
    )
    style.apply(fig, presenter, height=height)
    fig.update_annotations(font={"size": size})  # the panel titles, as large as the rest
    fig.update_layout(margin={"b": round(size * 1.3) + 24})
    # room above the panels for the title and the panel titles (two lines at most)
    panel = max((style.lines(a.get("text")) for a in fig.layout.get("annotations", ())), default=0)
    return style.top_room(fig, presenter, below=panel).figure()
