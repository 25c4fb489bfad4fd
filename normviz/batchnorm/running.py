"""Running statistics: batch statistics folded into the running buffers, step by step."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from normviz import style
from normviz.batchnorm.lab import (
    TRAIN_SAMPLES,
    LabSetup,
    check,
    convert_momentum,
    new_running,
    one_thread,
    twin_convention,
)
from normviz.batchnorm.plot import BATCH, RUNNING, TWIN, level, steps_trace
from normviz.batchnorm.stream import Fraction, batch_indices, make_dataset, phase, run_stream, to_np
from normviz.knobs import Value
from normviz.running import RunningStats
from normviz.sections import Progress, Section

INTRO = (
    "In training, BatchNorm normalizes each batch with that batch's own mean and "
    "variance, and folds them into two running buffers. Evaluation later uses only those "
    "buffers, so they should end up near the statistics of the whole training set "
    "(dashed). A larger weight per batch follows the batches faster but also their noise. "
    "Keras 3 writes the same rule with momentum = 1 − m: PyTorch's default m = 0.1 is "
    "Keras' 0.9, and Keras' default 0.99 is PyTorch's 0.01 (a memory of about 100 batches)."
)


@dataclass(frozen=True)
class RunningTrace:
    """Running mean/var step by step against the batch statistics and the truth."""

    batch_mean: np.ndarray  # (S, C)
    batch_var: np.ndarray  # (S, C) biased: what normalized each batch
    running_mean: np.ndarray  # (S, C) after each step
    running_var: np.ndarray  # (S, C)
    twin_mean: np.ndarray | None  # the other convention at the equivalent momentum
    twin_var: np.ndarray | None
    twin: str | None  # "keras" / "pytorch" / None
    twin_momentum: float | None
    true_mean: np.ndarray  # (C,)
    true_var: np.ndarray  # (C,)
    n: int  # values per channel per batch
    final: RunningStats  # the buffers after the last step (a copy)
    channel: int = 0  # the channel the figure and table follow (a view: no rerun)

    @property
    def bessel(self) -> float:
        """n/(n−1): PyTorch's running_var uses the unbiased batch variance."""
        return self.n / (self.n - 1)


@one_thread()
def running_trace(setup: LabSetup, progress: Fraction | None = None) -> RunningTrace:
    """A training stream of `steps` batches into RunningStats (and its twin)."""
    check(setup)
    ds = make_dataset(setup)
    idx = batch_indices(TRAIN_SAMPLES, setup.batch_size, setup.steps, setup.seed)
    rs = new_running(setup.C, setup.momentum, setup.convention)
    twin = twin_convention(setup.convention)
    twin_m = convert_momentum(setup.momentum, setup.convention, twin) if twin else None
    runnings = [rs] + ([new_running(setup.C, twin_m, twin)] if twin and twin_m is not None else [])
    tr = run_stream(ds.train, idx, setup.layout, setup.eps, runnings, progress)
    return RunningTrace(
        batch_mean=to_np(tr.batch_mean),
        batch_var=to_np(tr.batch_var),
        running_mean=to_np(tr.running_mean[0]),
        running_var=to_np(tr.running_var[0]),
        twin_mean=to_np(tr.running_mean[1]) if twin else None,
        twin_var=to_np(tr.running_var[1]) if twin else None,
        twin=twin,
        twin_momentum=twin_m,
        true_mean=to_np(ds.mean),
        true_var=to_np(ds.var),
        n=tr.n,
        final=rs.copy(),
    )


def run(setup: LabSetup, knobs: Mapping[str, Value], progress: Progress) -> RunningTrace:
    """The section: a training stream of `steps` batches."""
    return running_trace(setup, phase(progress, "Feeding the training batches through BatchNorm…"))


def figure(trace: RunningTrace, presenter: bool = False) -> go.Figure:
    """Batch statistics (dots), running statistics (line), truth (dashed) of one channel."""
    channel = trace.channel
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
            steps_trace(
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
            steps_trace(
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
                steps_trace(
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
        fig.add_trace(level(S, truth[channel], "training set (truth)", first), row, 1)
    fig.update_xaxes(title_text="training step (batch)", row=2, col=1)
    fig.update_layout(
        title="Running statistics follow the batches", legend={"orientation": "h", "y": -0.15}
    )
    return style.apply(fig, presenter, height=560)


def table(trace: RunningTrace) -> pd.DataFrame:
    """Last batch, running buffers and truth of the followed channel."""
    c = trace.channel
    rows: list[dict[str, object]] = [
        {
            "statistic": "mean",
            "last batch": trace.batch_mean[-1, c],
            "running (after the last step)": trace.running_mean[-1, c],
            "training set (truth)": trace.true_mean[c],
        },
        {
            "statistic": "variance",
            "last batch": trace.batch_var[-1, c],
            "running (after the last step)": trace.running_var[-1, c],
            "training set (truth)": trace.true_var[c],
        },
    ]
    if trace.twin_mean is not None and trace.twin_var is not None:
        rows[0][f"{trace.twin} rule"] = trace.twin_mean[-1, c]
        rows[1][f"{trace.twin} rule"] = trace.twin_var[-1, c]
    return pd.DataFrame(rows)


def notes(trace: RunningTrace) -> Sequence[str]:
    out = [
        f"num_batches_tracked = {trace.final.num_batches_tracked}; each batch gives channel "
        f"{trace.channel} n = {trace.n} values."
    ]
    if trace.twin is not None:
        out.append(
            f"The dotted orange line is the **{trace.twin}** rule with momentum "
            f"**{trace.twin_momentum:g}**: its running *mean* lies exactly on the blue one. "
            f"The *variances* differ: PyTorch feeds running_var the unbiased batch variance "
            f"(× n/(n−1) = × {trace.bessel:.4g} here), Keras 3 the biased one."
        )
    return out


def final_running(setup: LabSetup) -> RunningStats:
    """The running buffers after the training stream (what evaluation uses)."""
    return running_trace(setup).final


SECTION = Section("running", "Running stats", INTRO, run, figure=figure, table=table, notes=notes)
