"""Figures of the pre-norm vs post-norm page: statistics against depth, and loss curves."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from normviz import style
from normviz.residual import PLACEMENT_LABELS, InitProfile, TrainRun

# Colour and dash both differ, so the three placements stay apart in grey-scale too.
PLACEMENT_COLOURS: dict[str, str] = {
    "pre": style.PALETTE[0],
    "post": style.PALETTE[5],
    "none": style.BEFORE,
}
PLACEMENT_DASH: dict[str, str] = {"pre": "solid", "post": "dash", "none": "dot"}
PANELS: tuple[tuple[str, str], ...] = (
    ("act_rms", "Activation RMS of the stream"),
    ("grad_norm", "Gradient norm at the block's input"),
    ("skip_grad_norm", "Gradient through the skip paths alone"),
)


def _r(a: np.ndarray | Sequence[float], digits: int = 4) -> list[float | None]:
    """Values rounded to `digits` significant digits; non-finite or ≤ 0 become gaps (log axes)."""
    out: list[float | None] = []
    for v in np.asarray(a, dtype=float).ravel():
        out.append(float(f"{v:.{digits}g}") if np.isfinite(v) and v > 0 else None)
    return out


def _rgba(hex_colour: str, alpha: float) -> str:
    h = hex_colour.lstrip("#")
    r, g, b = (int(h[i : i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


def _hover(placement: str, x_name: str) -> str:
    return f"{PLACEMENT_LABELS[placement]}<br>{x_name} %{{x}}: %{{y:.3g}}<extra></extra>"


def make_depth_figure(profile: InitProfile, presenter: bool = False) -> go.Figure:
    """Three panels against block index: activation RMS, gradient norm, skip-path gradient.

    A line is the median over seeds, the band the range across seeds; y is logarithmic.
    Values that overflowed float32 (inf) leave a gap.
    """
    fig = make_subplots(
        rows=1,
        cols=len(PANELS),
        subplot_titles=[title for _, title in PANELS],
        horizontal_spacing=0.07,
    )
    L = profile.depth
    xs = list(range(L + 1))
    for col, (attr, _) in enumerate(PANELS, start=1):
        data = getattr(profile, attr)
        for i, p in enumerate(profile.placements):
            vals = data[i]  # (seeds, L + 1)
            with np.errstate(invalid="ignore"):
                med = np.median(vals, axis=0)
            colour = PLACEMENT_COLOURS[p]
            if vals.shape[0] > 1:
                lo, hi = np.min(vals, axis=0), np.max(vals, axis=0)
                fig.add_trace(
                    go.Scatter(
                        x=xs + xs[::-1],
                        y=_r(hi) + _r(lo)[::-1],
                        fill="toself",
                        fillcolor=_rgba(colour, 0.18),
                        line={"width": 0},
                        hoverinfo="skip",
                        showlegend=False,
                        legendgroup=p,
                        name=f"{PLACEMENT_LABELS[p]} range",
                    ),
                    row=1,
                    col=col,
                )
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=_r(med),
                    mode="lines",
                    line={"color": colour, "dash": PLACEMENT_DASH[p], "width": 3},
                    name=PLACEMENT_LABELS[p],
                    legendgroup=p,
                    showlegend=col == 1,
                    hovertemplate=_hover(p, "block"),
                ),
                row=1,
                col=col,
            )
        fig.update_yaxes(type="log", exponentformat="power", row=1, col=col)
        fig.update_xaxes(title_text="block l (0 = input)", row=1, col=col)
    cfg = profile.config
    fig.update_layout(
        title_text=(
            f"{cfg.depth} blocks, width {cfg.width}, {cfg.norm_label}: "
            f"median of {len(profile.seeds)} seed(s), band = range"
        ),
        legend={"orientation": "h", "y": -0.25, "x": 0},
        hovermode="closest",
    )
    style.apply(fig, presenter, height=480)
    # room for the figure title above the three panel titles
    fig.update_layout(margin={"t": 100}, title={"y": 0.98, "yanchor": "top"})
    return fig


def make_loss_figure(run: TrainRun, presenter: bool = False) -> go.Figure:
    """Training loss per step for each placement (log y); a cross marks where a run diverged."""
    fig = go.Figure()
    for i, p in enumerate(run.placements):
        losses = run.losses[i]
        colour = PLACEMENT_COLOURS[p]
        fig.add_trace(
            go.Scatter(
                y=_r(losses),
                x0=0,
                dx=1,
                mode="lines",
                line={"color": colour, "dash": PLACEMENT_DASH[p], "width": 3},
                name=PLACEMENT_LABELS[p],
                legendgroup=p,
                hovertemplate=_hover(p, "step"),
            )
        )
        at = run.diverged_at[i]
        if at is not None:
            last = losses[:at][np.isfinite(losses[:at])]
            y = float(last[-1]) if last.size else 1.0
            fig.add_trace(
                go.Scatter(
                    x=[at],
                    y=_r([y]),
                    mode="markers+text",
                    marker={"symbol": "x", "size": 16, "color": colour},
                    text=[f"diverged at step {at}"],
                    textposition="middle right",
                    name=f"{PLACEMENT_LABELS[p]} diverged",
                    legendgroup=p,
                    showlegend=False,
                )
            )
    fig.update_yaxes(type="log", exponentformat="power", title_text="training loss (MSE)")
    fig.update_xaxes(title_text="Adam step")
    cfg = run.config
    fig.update_layout(
        title_text=f"Training {cfg.depth} blocks at learning rate {run.lr:g}",
        legend={"orientation": "h", "y": -0.2, "x": 0},
    )
    return style.apply(fig, presenter, height=420)
