"""Batch size: the train/eval gap of the same held-out batches, per batch size."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from normviz import style
from normviz.batchnorm import stream
from normviz.batchnorm.lab import HELD_OUT, TRAIN_SAMPLES, LabSetup, check, new_running, one_thread
from normviz.batchnorm.plot import frame, marker_line, series
from normviz.batchnorm.stream import Fraction, phase
from normviz.core import NormConfigError, check_values, contract, normalize
from normviz.figures.spec import Spec
from normviz.knobs import Value
from normviz.sections import Progress, Section

INTRO = (
    "For every batch size, running statistics are trained for the same number of steps; "
    "then held-out batches go through BatchNorm twice, in training mode (their own "
    "statistics) and in evaluation mode (the running ones). With tiny batches the two "
    "outputs disagree a lot: the network trains on one function and is deployed with "
    "another."
)
BATCH_SWEEP: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256)


@dataclass(frozen=True)
class GapSweep:
    """The same held-out batches in training and in evaluation mode, per batch size."""

    batch_sizes: tuple[int, ...]
    gap: np.ndarray  # mean |y_train − y_eval| (nan where training refuses)
    eval_mean: np.ndarray  # mean over channels of |eval output mean|
    eval_var: np.ndarray  # mean over channels of eval output variance
    running_error: np.ndarray  # mean over channels of |running mean − truth| / σ
    refused: tuple[int, ...]  # batch sizes with one value per channel
    current_b: int = 8  # the lab's batch size, marked on the figure


@one_thread()
def gap_sweep(
    setup: LabSetup,
    sizes: Sequence[int] = BATCH_SWEEP,
    progress: Fraction | None = None,
) -> GapSweep:
    """Train running statistics at each batch size, then compare the modes."""
    check(setup.with_(batch_size=max(sizes)))
    ds = stream.make_dataset(setup)
    gap, e_mean, e_var, r_err, refused = [], [], [], [], []
    for i, b in enumerate(sizes):
        try:
            check_values(contract("batch", setup.layout, setup.batch_shape(b)))
        except NormConfigError:  # one value per channel: training refuses this batch size
            refused.append(b)
            for lst in (gap, e_mean, e_var, r_err):
                lst.append(math.nan)
            continue
        rs = new_running(setup.C, setup.momentum, setup.convention)
        idx = stream.batch_indices(TRAIN_SAMPLES, b, setup.steps, setup.seed)
        stream.run_stream(ds.train, idx, setup.layout, setup.eps, [rs])
        held = ds.held_out[: (HELD_OUT // b) * b]
        y_train = stream.normalize_batches(
            held.reshape(-1, b, *setup.sample_shape), setup.layout, setup.eps
        )
        y_train_flat = y_train.output.reshape(held.shape)
        y_eval = normalize(held, "batch", setup.layout, eps=setup.eps, training=False, running=rs)
        gap.append((y_train_flat - y_eval.output).abs().mean().item())
        stats = normalize(y_eval.output, "batch", setup.layout)  # per-channel mean/var of outputs
        assert stats.mean is not None
        e_mean.append(stats.mean.abs().mean().item())
        e_var.append(stats.var.mean().item())
        r_err.append(((rs.mean - ds.mean).abs() / ds.std).mean().item())
        if progress is not None:
            progress((i + 1) / len(sizes))
    return GapSweep(
        tuple(sizes),
        np.asarray(gap),
        np.asarray(e_mean),
        np.asarray(e_var),
        np.asarray(r_err),
        tuple(refused),
        setup.batch_size,
    )


def run(setup: LabSetup, knobs: Mapping[str, Value], progress: Progress) -> GapSweep:
    """The section: the sweep at the lab's steps and momentum."""
    text = "Training running statistics at every batch size…"
    return gap_sweep(setup, progress=phase(progress, text))


def figure(sweep: GapSweep, presenter: bool = False) -> go.Figure:
    """Train/eval gap and evaluation output statistics against batch size."""
    current_b = sweep.current_b
    fig = Spec.grid(
        1,
        2,
        # two short lines each: half a phone's column holds about 18 characters
        ("mean<br>|y_train − y_eval|", "evaluation output<br>per channel"),
        horizontal_spacing=0.12,
    )
    b = list(sweep.batch_sizes)
    for col, y, name, colour, symbol in (
        (1, sweep.gap, "train/eval gap", style.METHOD_COLOURS["batch"], "circle"),
        (2, sweep.eval_var, "variance (ideal 1)", style.PALETTE[2], "diamond"),
        (2, sweep.eval_mean, "|mean| (ideal 0)", style.PALETTE[5], "square"),
    ):
        fig.add_trace(series(b, y, name, colour, symbol), 1, col)
    tops = (np.nanmax(np.r_[sweep.gap, 0.1]), np.nanmax(np.r_[sweep.eval_var, 1.2]))
    for col, top in zip((1, 2), tops, strict=True):
        line = marker_line(current_b, 0.0, float(top), f"your batch size: {current_b}", col == 1)
        fig.add_trace(line, 1, col)
        fig.update_xaxes(style.log_axis(b), title="batch size", row=1, col=col)
        fig.update_yaxes(rangemode="tozero", row=1, col=col)
    fig.update_layout(
        title="Small batches: training<br>and evaluation disagree",
        legend=style.LEGEND_BELOW,
    )
    style.apply(fig, presenter, height=500)
    fig.update_annotations(font={"size": style.font_size(presenter)})  # the panel titles
    return style.top_room(fig, presenter, below=2).figure()


COLUMNS = (
    ("batch size", "batch_sizes"),
    ("mean |y_train − y_eval|", "gap"),
    ("eval output |mean|", "eval_mean"),
    ("eval output variance", "eval_var"),
    ("running mean error (σ)", "running_error"),
)


def table(sweep: GapSweep) -> pd.DataFrame:
    return frame(sweep, COLUMNS)


def notes(sweep: GapSweep) -> Sequence[str]:
    ok = [i for i, g in enumerate(sweep.gap) if not math.isnan(g)]
    out = []
    if len(ok) >= 2:
        lo, hi = ok[0], ok[-1]
        word = "larger" if sweep.gap[lo] > sweep.gap[hi] else "not larger"
        out.append(
            f"The gap at batch size {sweep.batch_sizes[lo]} ({sweep.gap[lo]:.3g}) is {word} "
            f"than at {sweep.batch_sizes[hi]} ({sweep.gap[hi]:.3g})."
        )
    if sweep.refused:
        out.append(
            f"Batch size {', '.join(map(str, sweep.refused))} has one value per channel with "
            "this shape, which training refuses (see *Biased vs unbiased*)."
        )
    return out


SECTION = Section("batch-size", "Batch size", INTRO, run, figure=figure, table=table, notes=notes)
