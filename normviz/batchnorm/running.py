"""Running statistics: batch statistics folded into the running buffers, step by step."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from normviz import style
from normviz.batchnorm.lab import (
    STEPS,
    TRAIN_SAMPLES,
    LabSetup,
    batch_weight,
    check,
    convert_momentum,
    new_running,
    one_thread,
    twin_convention,
)
from normviz.batchnorm.plot import BATCH, RUNNING, TRUTH, TWIN, level, rounded, steps_trace
from normviz.batchnorm.stream import Fraction, batch_indices, make_dataset, phase, run_stream, to_np
from normviz.figures.spec import Spec, trace
from normviz.frames import Column, Frames, Line, series, texts
from normviz.knobs import Knob, Value
from normviz.running import RunningStats
from normviz.sections import Progress, Section
from normviz.style import HIGHLIGHT

INTRO = (
    "In training, BatchNorm normalizes each batch with that batch's own mean and "
    "variance, and folds them into two running buffers. Evaluation later uses only those "
    "buffers, so they should end up near the statistics of the whole training set "
    "(dashed). A larger weight per batch follows the batches faster but also their noise. "
    "Keras 3 writes the same rule with momentum = 1 − m: PyTorch's default m = 0.1 is "
    "Keras' 0.9, and Keras' default 0.99 is PyTorch's 0.01 (a memory of about 100 batches)."
)

# A view of the result (it never reruns the section): the figure stops at this batch and
# shows its own statistics beside the running ones; 0 shows every batch.
STEP = Knob("bn_step", 0, lo=0, hi=STEPS.hi, label="Step through the batches (0: all)")


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
    convention: str = "pytorch"  # the update rule (pytorch | keras | cumulative)
    weight: float | None = 0.1  # a new batch's weight in the update (None: 1/k at step k)
    channel: int = 0  # the channel the figure and table follow (a view: no rerun)
    step: int = 0  # the batch the figure stops at (a view: no rerun); 0: every batch

    @property
    def steps(self) -> int:
        return int(self.running_mean.shape[0])

    @property
    def at(self) -> int:
        """The batch shown (1-based): the chosen step, or the last one."""
        return min(self.step, self.steps) if self.step > 0 else self.steps

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
        convention=setup.convention,
        weight=batch_weight(setup.momentum, setup.convention),
    )


def run(setup: LabSetup, knobs: Mapping[str, Value], progress: Progress) -> RunningTrace:
    """The section: a training stream of `steps` batches."""
    return running_trace(setup, phase(progress, "Feeding the training batches through BatchNorm…"))


def figure(trace: RunningTrace, presenter: bool = False) -> go.Figure:
    """Batch statistics (dots), running statistics (line), truth (dashed) of one channel,
    up to the chosen batch, whose own statistic and running value are ringed."""
    channel, S, k = trace.channel, trace.steps, trace.at
    fig = Spec.grid(
        2,
        1,
        (f"Mean of channel {channel}", f"Variance of channel {channel}"),
        shared_xaxes=True,
        vertical_spacing=0.08,
    )
    for row, batch, running, twin, truth in (
        (1, trace.batch_mean, trace.running_mean, trace.twin_mean, trace.true_mean),
        (2, trace.batch_var, trace.running_var, trace.twin_var, trace.true_var),
    ):
        first = row == 1
        fig.add_trace(
            steps_trace(
                batch[:k, channel],
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
                running[:k, channel],
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
                    twin[:k, channel],
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
        if trace.step > 0:
            fig.add_trace(_ringed(k, batch[k - 1, channel], running[k - 1, channel], first), row, 1)
    fig.update_xaxes(range=[0.5, S + 0.5])  # fixed: stepping never rescales the axis
    fig.update_xaxes(title="training step (batch)", row=2, col=1)
    title = "Running statistics follow the batches"
    if trace.step > 0:
        title = f"Running statistics after batch {k} of {S}"
    fig.update_layout(title=title, legend=style.LEGEND_BELOW)
    return style.apply(fig, presenter, height=560).figure()


def _ringed(k: int, own: float, running: float, show: bool) -> dict[str, Any]:
    """Batch k's own statistic and the running value after it, ringed."""
    return trace(
        "scatter",
        x=[k, k],
        y=rounded([own, running]),
        mode="markers",
        marker={"size": 16, "color": "rgba(0,0,0,0)", "line": {"color": HIGHLIGHT, "width": 3}},
        name=f"batch {k}: its own and the running value",
        legendgroup="step",
        showlegend=show,
    )


def table(trace: RunningTrace) -> pd.DataFrame:
    """The shown batch, running buffers after it, and truth of the followed channel."""
    c, k = trace.channel, trace.at
    own = "last batch" if trace.step == 0 else f"batch {k}"
    after = "running (after the last step)" if trace.step == 0 else f"running (after batch {k})"
    rows: list[dict[str, object]] = [
        {
            "statistic": "mean",
            own: trace.batch_mean[k - 1, c],
            after: trace.running_mean[k - 1, c],
            "training set (truth)": trace.true_mean[c],
        },
        {
            "statistic": "variance",
            own: trace.batch_var[k - 1, c],
            after: trace.running_var[k - 1, c],
            "training set (truth)": trace.true_var[c],
        },
    ]
    if trace.twin_mean is not None and trace.twin_var is not None:
        rows[0][f"{trace.twin} rule"] = trace.twin_mean[k - 1, c]
        rows[1][f"{trace.twin} rule"] = trace.twin_var[k - 1, c]
    return pd.DataFrame(rows)


def step_notes(trace: RunningTrace) -> list[str]:
    """The update of the chosen batch, its numbers filled in (none when every batch is shown)."""
    if trace.step <= 0:
        return []
    c, k = trace.channel, trace.at
    w = 1.0 / k if trace.weight is None else trace.weight
    mean, var = trace.batch_mean[k - 1, c], trace.batch_var[k - 1, c]
    prev_m = trace.running_mean[k - 2, c] if k > 1 else 0.0  # the buffers start at 0 and 1
    prev_v = trace.running_var[k - 2, c] if k > 1 else 1.0
    new_m, new_v = trace.running_mean[k - 1, c], trace.running_var[k - 1, c]
    fed = f"{var:.4g}" if trace.convention == "keras" else f"{var:.4g} × {trace.bessel:.4g}"
    which = "biased" if trace.convention == "keras" else "unbiased, × n/(n−1)"
    return [
        f"Batch {k} of {trace.steps}, channel {c}: its own mean is {mean:.4g} and its biased "
        f"variance {var:.4g} (what normalized it). With weight w = {w:.4g} the running mean "
        f"becomes (1 − w)·{prev_m:.4g} + w·{mean:.4g} = {new_m:.4g}, and the running variance "
        f"(fed the {which} batch variance) (1 − w)·{prev_v:.4g} + w·{fed} = {new_v:.4g}."
    ]


def notes(trace: RunningTrace) -> Sequence[str]:
    out = [
        f"num_batches_tracked = {trace.final.num_batches_tracked}; each batch gives channel "
        f"{trace.channel} n = {trace.n} values.",
        *step_notes(trace),
    ]
    if trace.twin is not None:
        out.append(
            f"The dotted orange line is the **{trace.twin}** rule with momentum "
            f"**{trace.twin_momentum:g}**: its running *mean* lies exactly on the blue one. "
            f"The *variances* differ: PyTorch feeds running_var the unbiased batch variance "
            f"(× n/(n−1) = × {trace.bessel:.4g} here), Keras 3 the biased one."
        )
    return out


def step_frames(trace: RunningTrace, channel: int) -> Frames:
    """The stream of one channel, batch by batch, for the step-through player (ui.stepper):
    each batch's own mean and variance beside the running buffers after it."""
    c, S = channel, trace.steps
    own_m, own_v = trace.batch_mean[:, c], trace.batch_var[:, c]
    run_m, run_v = trace.running_mean[:, c], trace.running_var[:, c]
    lines = []
    for panel, own, running, truth in (
        (0, own_m, run_m, trace.true_mean),
        (1, own_v, run_v, trace.true_var),
    ):
        lines += [
            Line("this batch's statistic", series(own), BATCH, panel, dots=True),
            Line("running statistic", series(running), RUNNING, panel),
            Line(
                "training set (truth)",
                series(np.full(S, truth[c])),
                TRUTH,
                panel,
                dash=True,
                whole=True,
            ),
        ]
    return Frames(
        title=f"Channel {c}, batch by batch",
        labels=tuple(f"Batch {k} of {S}" for k in range(1, S + 1)),
        columns=(
            Column("batch mean", texts(own_m)),
            Column("batch variance (biased)", texts(own_v)),
            Column("running mean", texts(run_m)),
            Column("running variance", texts(run_v)),
        ),
        lines=tuple(lines),
        panels=(f"Mean of channel {c}", f"Variance of channel {c}"),
        x_title="training step (batch)",
        summary=(
            f"Two panels over {S} batches of channel {c}: each batch's own mean and variance "
            f"(dots), the running buffers after it (a line) and the training set's values "
            f"(dashed: mean {trace.true_mean[c]:.4g}, variance {trace.true_var[c]:.4g})."
        ),
    )


def final_running(setup: LabSetup) -> RunningStats:
    """The running buffers after the training stream (what evaluation uses)."""
    return running_trace(setup).final


SECTION = Section("running", "Running stats", INTRO, run, figure=figure, table=table, notes=notes)
