"""Figures of the BatchNorm lab: pure functions of the lab's results, in the house style.

Steps are drawn with x0/dx instead of an x array and values are rounded to a
few significant digits, so even 2000 steps stay far below the 1 MB budget.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from normviz import style
from normviz.bnlab import (
    AccumResult,
    BesselResult,
    CheckpointResult,
    FreezeResult,
    GapSweep,
    OrderResult,
    RunningTrace,
    ShiftResult,
    SyncResult,
)
from normviz.bnmodel import ModelReport
from normviz.methods import METHODS

BATCH = style.BEFORE  # batch statistics: grey dots
RUNNING = style.PALETTE[0]  # running statistics: blue line
TWIN = style.PALETTE[1]  # the other convention: orange, dotted
TRUTH = style.SELECTED  # the training set's value: black, dashed


def _r(a: np.ndarray | Sequence[float], digits: int = 5) -> list[float | None]:
    """Rounded values for the JSON payload (NaN becomes a gap)."""
    arr = np.asarray(a, dtype=float)
    out = np.round(arr, digits).tolist()
    return [None if v != v else v for v in out]


def _steps_trace(y: np.ndarray, name: str, **kw: object) -> go.Scatter:
    """A per-step series, x = 1, 2, … given as x0/dx (no x array in the payload)."""
    return go.Scatter(y=_r(y), x0=1, dx=1, name=name, **kw)  # type: ignore[arg-type]


def _marker_line(x: float, y0: float, y1: float, label: str, show: bool = True) -> go.Scatter:
    """A dotted vertical line at x (a trace, so log axes place it right)."""
    return go.Scatter(
        x=[x, x],
        y=[y0, y1],
        mode="lines",
        line={"color": style.HIGHLIGHT, "dash": "dot", "width": 2},
        name=label,
        showlegend=show,
        hoverinfo="skip",
    )


def make_running_figure(trace: RunningTrace, channel: int, presenter: bool = False) -> go.Figure:
    """Simulation 1: batch statistics (dots), running statistics (line), truth (dashed)."""
    S = trace.running_mean.shape[0]
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.08,
        subplot_titles=(f"Mean of channel {channel}", f"Variance of channel {channel}"),
    )
    for row, batch, running, twin, truth in (
        (1, trace.batch_mean, trace.running_mean, trace.twin_mean, trace.true_mean),
        (2, trace.batch_var, trace.running_var, trace.twin_var, trace.true_var),
    ):
        first = row == 1
        fig.add_trace(
            _steps_trace(
                batch[:, channel],
                "this batch's statistic" + (" (biased variance)" if not first else ""),
                mode="markers",
                marker={"color": BATCH, "size": 5, "opacity": 0.6},
                legendgroup=f"batch{row}",
            ),
            row,
            1,
        )
        fig.add_trace(
            _steps_trace(
                running[:, channel],
                "running statistic",
                mode="lines",
                line={"color": RUNNING, "width": 3},
                legendgroup="running",
                showlegend=first,
            ),
            row,
            1,
        )
        if twin is not None and trace.twin is not None:
            fig.add_trace(
                _steps_trace(
                    twin[:, channel],
                    f"{trace.twin} convention, momentum {trace.twin_momentum:g}",
                    mode="lines",
                    line={"color": TWIN, "width": 3, "dash": "dot"},
                    legendgroup="twin",
                    showlegend=first,
                ),
                row,
                1,
            )
        fig.add_trace(
            go.Scatter(
                x=[1, S],
                y=[float(truth[channel])] * 2,
                mode="lines",
                line={"color": TRUTH, "dash": "dash", "width": 2},
                name="training set (truth)",
                legendgroup="truth",
                showlegend=first,
                hoverinfo="skip",
            ),
            row,
            1,
        )
    fig.update_xaxes(title_text="training step (batch)", row=2, col=1)
    fig.update_layout(
        title="Running statistics follow the batches", legend={"orientation": "h", "y": -0.15}
    )
    return style.apply(fig, presenter, height=560)


def make_bessel_figure(
    res: BesselResult, current_n: int | None, presenter: bool = False
) -> go.Figure:
    """Simulation 2: average batch variance / σ² against n, biased and unbiased."""
    fig = go.Figure()
    n = res.n
    fig.add_trace(
        go.Scatter(
            x=_r(n),
            y=_r((n - 1) / n),
            mode="lines",
            line={"color": BATCH, "dash": "dash", "width": 2},
            name="(n − 1)/n",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=_r(n),
            y=_r(res.biased),
            mode="markers+lines",
            marker={"size": 10},
            line={"color": style.PALETTE[5], "width": 3},
            name="biased: normalizes the batch",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=_r(n),
            y=_r(res.unbiased),
            mode="markers+lines",
            marker={"size": 10, "symbol": "diamond"},
            line={"color": RUNNING, "width": 3},
            name="unbiased (× n/(n−1)): enters running_var",
        )
    )
    if current_n is not None and current_n >= 2:
        fig.add_trace(_marker_line(current_n, 0.0, 1.15, f"your batch: n = {current_n}"))
    fig.update_xaxes(type="log", title_text="n = values per channel in one batch")
    fig.update_yaxes(title_text="average batch variance / true σ²", range=[0.0, 1.15])
    fig.update_layout(
        title=f"Variance estimates, averaged over {res.repeats:,} batches per n",
        legend={"orientation": "h", "y": -0.25},
    )
    return style.apply(fig, presenter, height=460)


def make_gap_figure(sweep: GapSweep, current_b: int, presenter: bool = False) -> go.Figure:
    """Simulation 3: train/eval gap and evaluation output statistics against batch size."""
    fig = make_subplots(
        rows=1,
        cols=2,
        horizontal_spacing=0.12,
        subplot_titles=("mean |y_train − y_eval|", "evaluation output per channel"),
    )
    b = list(sweep.batch_sizes)
    fig.add_trace(
        go.Scatter(
            x=b,
            y=_r(sweep.gap),
            mode="markers+lines",
            marker={"size": 10},
            line={"color": style.METHOD_COLOURS["batch"], "width": 3},
            name="train/eval gap",
        ),
        1,
        1,
    )
    fig.add_trace(
        go.Scatter(
            x=b,
            y=_r(sweep.eval_var),
            mode="markers+lines",
            marker={"size": 10, "symbol": "diamond"},
            line={"color": style.PALETTE[2], "width": 3},
            name="variance (ideal 1)",
        ),
        1,
        2,
    )
    fig.add_trace(
        go.Scatter(
            x=b,
            y=_r(sweep.eval_mean),
            mode="markers+lines",
            marker={"size": 10, "symbol": "square"},
            line={"color": style.PALETTE[5], "width": 3},
            name="|mean| (ideal 0)",
        ),
        1,
        2,
    )
    tops = (np.nanmax(np.r_[sweep.gap, 0.1]), np.nanmax(np.r_[sweep.eval_var, 1.2]))
    for col, top in zip((1, 2), tops, strict=True):
        line = _marker_line(current_b, 0.0, float(top), f"your batch size: {current_b}", col == 1)
        fig.add_trace(line, 1, col)
        fig.update_xaxes(type="log", title_text="batch size", row=1, col=col)
        fig.update_yaxes(rangemode="tozero", row=1, col=col)
    fig.update_layout(
        title="Small batches: training and evaluation disagree",
        legend={"orientation": "h", "y": -0.3},
    )
    return style.apply(fig, presenter, height=440)


def make_shift_figure(res: ShiftResult, presenter: bool = False) -> go.Figure:
    """Simulation 4: pooled output mean and variance against the evaluation shift, per method."""
    fig = make_subplots(
        rows=1,
        cols=2,
        horizontal_spacing=0.12,
        subplot_titles=(
            f"output mean (scale ×{res.scale:g})",
            f"output variance (scale ×{res.scale:g})",
        ),
    )
    for i, m in enumerate(res.methods):
        label = METHODS[m].label + (" (evaluation mode)" if METHODS[m].train_eval_differ else "")
        if METHODS[m].grouped:
            label += f", G = {res.groups}"
        colour = style.METHOD_COLOURS[m]
        for col, ys, cur in (
            (1, res.mean[i], res.current_mean[i]),
            (2, res.var[i], res.current_var[i]),
        ):
            fig.add_trace(
                go.Scatter(
                    x=_r(res.shifts),
                    y=_r(ys),
                    mode="lines",
                    line={"color": colour, "width": 3, "dash": ("solid", "dash", "dot")[i % 3]},
                    name=label,
                    legendgroup=m,
                    showlegend=col == 1,
                ),
                1,
                col,
            )
            fig.add_trace(
                go.Scatter(
                    x=[res.shift],
                    y=_r([cur]),
                    mode="markers",
                    marker={"color": colour, "size": 13, "line": {"color": "white", "width": 1}},
                    name=label,
                    legendgroup=m,
                    showlegend=False,
                ),
                1,
                col,
            )
    for col in (1, 2):
        fig.add_vline(
            x=res.shift, line={"color": style.HIGHLIGHT, "dash": "dot", "width": 2}, row=1, col=col
        )
        fig.update_xaxes(title_text="shift of the evaluation data (in σ)", row=1, col=col)
    fig.update_yaxes(rangemode="tozero", row=1, col=2)
    fig.update_layout(
        title="Shifted evaluation data through each method", legend={"orientation": "h", "y": -0.3}
    )
    return style.apply(fig, presenter, height=440)


def make_order_figure(res: OrderResult, channel: int, presenter: bool = False) -> go.Figure:
    """Simulation 5: batch means and running mean of one channel, for each batch order."""
    fig = make_subplots(
        rows=len(res.orders),
        cols=1,
        shared_xaxes=True,
        shared_yaxes=True,
        vertical_spacing=0.1,
        subplot_titles=tuple(f"{o}: channel {channel}" for o in res.orders),
    )
    S = res.batch_mean.shape[1]
    for i, _ in enumerate(res.orders):
        row = i + 1
        fig.add_trace(
            _steps_trace(
                res.batch_mean[i, :, channel],
                "batch mean",
                mode="markers",
                marker={"color": BATCH, "size": 5, "opacity": 0.7},
                legendgroup="batch",
                showlegend=i == 0,
            ),
            row,
            1,
        )
        fig.add_trace(
            _steps_trace(
                res.running_mean[i, :, channel],
                "running mean",
                mode="lines",
                line={"color": RUNNING, "width": 3},
                legendgroup="running",
                showlegend=i == 0,
            ),
            row,
            1,
        )
        fig.add_trace(
            go.Scatter(
                x=[1, S],
                y=[float(res.true_mean[channel])] * 2,
                mode="lines",
                line={"color": TRUTH, "dash": "dash", "width": 2},
                name="training set mean",
                legendgroup="truth",
                showlegend=i == 0,
                hoverinfo="skip",
            ),
            row,
            1,
        )
    fig.update_xaxes(title_text="training step (batch)", row=len(res.orders), col=1)
    fig.update_layout(
        title="Sorted data: every batch is one cluster", legend={"orientation": "h", "y": -0.15}
    )
    return style.apply(fig, presenter, height=560)


def make_spread_figure(
    local: np.ndarray,
    pooled: np.ndarray,
    local_label: str,
    pooled_label: str,
    title: str,
    presenter: bool = False,
) -> go.Figure:
    """Simulations 6 and 7: per-channel batch means (in σ from the truth), small vs pooled."""
    k, C = local.shape
    fig = go.Figure()
    channels = np.arange(C)
    for j in range(k):
        fig.add_trace(
            go.Scatter(
                x=_r(channels + (j - (k - 1) / 2) * min(0.6 / max(k, 1), 0.12)),
                y=_r(local[j]),
                mode="markers",
                marker={"color": style.PALETTE[0], "size": 9, "opacity": 0.55},
                name=local_label,
                legendgroup="local",
                showlegend=j == 0,
            )
        )
    fig.add_trace(
        go.Scatter(
            x=channels.tolist(),
            y=_r(pooled),
            mode="markers",
            marker={
                "color": style.PALETTE[5],
                "size": 15,
                "symbol": "diamond",
                "line": {"color": "white", "width": 1},
            },
            name=pooled_label,
        )
    )
    fig.add_hline(y=0, line={"color": TRUTH, "dash": "dash", "width": 2})
    fig.update_xaxes(title_text="channel", tickmode="linear", dtick=max(1, C // 16))
    fig.update_yaxes(title_text="batch mean − true mean (in σ)")
    fig.update_layout(title=title, legend={"orientation": "h", "y": -0.25})
    return style.apply(fig, presenter, height=420)


def make_accumulation_figure(res: AccumResult, presenter: bool = False) -> go.Figure:
    """Simulation 6: the k micro-batch means BatchNorm used, against the k·b batch mean."""
    return make_spread_figure(
        res.micro_dev,
        res.big_dev,
        f"micro-batch of {res.b} (what BatchNorm sees)",
        f"one batch of {res.k * res.b}",
        f"{res.k} accumulated micro-batches of {res.b}: one optimizer step",
        presenter,
    )


def make_sync_figure(res: SyncResult, presenter: bool = False) -> go.Figure:
    """Simulation 7: each device's local batch mean against the synchronized mean."""
    return make_spread_figure(
        res.local_dev,
        res.sync_dev,
        f"one device's local batch of {res.b}",
        f"synchronized over {res.devices} devices",
        f"{res.devices} devices × {res.b} samples: one training step",
        presenter,
    )


def make_freeze_figure(res: FreezeResult, presenter: bool = False) -> go.Figure:
    """Simulation 8: which state entries one optimizer step changed, per setup."""
    rows = [
        f"{'train()' if r.training else 'eval()'}, requires_grad={r.requires_grad}"
        for r in res.rows
    ]
    z = [[1 if c else 0 for c in r.changed] for r in res.rows]
    text = [["changed" if c else "unchanged" for c in r.changed] for r in res.rows]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=list(res.names),
            y=rows,
            text=text,
            texttemplate="%{text}",
            colorscale=[[0, style.MUTED], [1, style.PALETTE[0]]],
            zmin=0,
            zmax=1,
            showscale=False,
            xgap=3,
            ygap=3,
            hovertemplate="%{y}<br>%{x}: %{text}<extra></extra>",
        )
    )
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(title="One optimizer step on a real nn.BatchNorm")
    return style.apply(fig, presenter, height=360)


def make_checkpoint_figure(res: CheckpointResult, presenter: bool = False) -> go.Figure:
    """Simulation 9: per-channel evaluation outputs of the layer and its two reloads."""
    fig = go.Figure()
    C = res.out_mean.shape[1]
    colours = (style.PALETTE[0], style.PALETTE[2], style.PALETTE[5])
    for i, name in enumerate(res.variants):
        fig.add_trace(
            go.Bar(
                x=list(range(C)),
                y=_r(res.out_mean[i]),
                error_y={"type": "data", "array": _r(res.out_std[i]), "visible": True},
                name=name,
                marker={"color": colours[i % len(colours)]},
            )
        )
    fig.update_xaxes(title_text="channel", tickmode="linear", dtick=max(1, C // 16))
    fig.update_yaxes(title_text="evaluation output: mean ± std")
    fig.update_layout(
        barmode="group",
        title="Held-out data through the reloaded layers (evaluation mode)",
        legend={"orientation": "h", "y": -0.25},
    )
    return style.apply(fig, presenter, height=440)


MODEL_SCORES: tuple[tuple[str, str, str], ...] = (
    # (AccuracyRow field, legend label, colour)
    ("train_clean", "training mode", style.PALETTE[4]),
    ("eval_clean", "evaluation mode", style.PALETTE[0]),
    ("train_shifted", "training mode, shifted test data", style.PALETTE[1]),
    ("eval_shifted", "evaluation mode, shifted test data", style.PALETTE[5]),
)


def make_model_figure(report: ModelReport, presenter: bool = False) -> go.Figure:
    """Simulation 10: test accuracy of every run, per mode, on clean and shifted data."""
    runs = [f"{METHODS[r.method].label}, batch {r.batch_size}" for r in report.rows]
    fig = go.Figure()
    for field, label, colour in MODEL_SCORES:
        fig.add_trace(
            go.Bar(
                x=runs,
                y=_r([getattr(r, field) for r in report.rows], 4),
                name=label,
                marker={"color": colour},
                texttemplate="%{y:.0%}",
                textposition="outside",
            )
        )
    fig.add_hline(
        y=report.chance,
        line={"color": TRUTH, "dash": "dash", "width": 2},
        annotation_text="chance",
        annotation_position="bottom right",
    )
    fig.update_yaxes(title_text="test accuracy", range=[0, 1.12], tickformat=".0%")
    fig.update_layout(
        barmode="group",
        title=f"Test accuracy (shifted data: shift {report.shift:g} σ, scale ×{report.scale:g})",
        legend={"orientation": "h", "y": -0.2},
    )
    return style.apply(fig, presenter, height=480)
