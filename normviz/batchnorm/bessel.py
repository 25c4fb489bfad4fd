"""Biased vs unbiased variance, and a batch with one value per channel."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from normviz import style
from normviz.batchnorm.lab import LabSetup, one_thread
from normviz.batchnorm.plot import BATCH, RUNNING, marker_line, rounded, series
from normviz.batchnorm.running import final_running
from normviz.batchnorm.stream import make_dataset, to_np
from normviz.core import NormConfigError, normalize
from normviz.data import generate
from normviz.figures.spec import Spec, trace
from normviz.knobs import Value
from normviz.layouts import LAYOUTS
from normviz.running import RunningStats
from normviz.sections import Progress, Section

INTRO = (
    "A batch is normalized with its **biased** variance (divide by n), but PyTorch adds "
    "the **unbiased** one (divide by n − 1) to running_var. With few values per channel "
    "the biased estimate is too small on average by the factor (n − 1)/n; the n/(n − 1) "
    "correction removes that bias. Below, each point averages thousands of batches of "
    "standard-normal values, whose true variance is 1."
)
ONE_VALUE_INTRO = (
    "With n = 1 there is nothing to average: the batch variance is 0 and the unbiased one "
    "would divide by zero. So torch refuses to train on it (*Expected more than 1 value "
    "per channel when training*), and so does normviz. Evaluation has no such problem: it "
    "does not look at the batch at all, it uses the running statistics. The table holds the "
    "same single sample in evaluation mode."
)
BESSEL_NS: tuple[int, ...] = (2, 3, 4, 5, 6, 8, 12, 16, 32, 64, 128)
BESSEL_REPEATS = 8192  # independent batches averaged per n


@dataclass(frozen=True)
class BesselResult:
    """How the biased batch variance underestimates σ², and the n/(n−1) fix."""

    n: np.ndarray  # values per channel
    factor: np.ndarray  # n/(n−1)
    biased: np.ndarray  # average biased batch variance / true σ² (≈ (n−1)/n)
    unbiased: np.ndarray  # average of what enters running_var / true σ² (≈ 1)
    repeats: int
    current_n: int | None = None  # the lab's n, marked on the figure


@one_thread()
def bessel(seed: int = 0, ns: Sequence[int] = BESSEL_NS) -> BesselResult:
    """Average batch variances of N(0, 1) values (σ² = 1) for each n.

    Each of BESSEL_REPEATS channels is one independent batch of n values, so one
    normalize() call per n gives thousands of batches; a RunningStats with momentum 1
    holds exactly what PyTorch adds to running_var (the unbiased variance).
    """
    biased, unbiased = [], []
    for n in ns:
        x = generate("normal", "BTC", (n, 1, BESSEL_REPEATS), seed + n)  # (B=n, T=1, C=repeats)
        rs = RunningStats(BESSEL_REPEATS, momentum=1.0)
        res = normalize(x, "batch", "BTC", running=rs)
        biased.append(res.var.double().mean().item())
        unbiased.append(rs.var.double().mean().item())
    n_arr = np.asarray(ns, dtype=float)
    return BesselResult(
        n_arr, n_arr / (n_arr - 1), np.asarray(biased), np.asarray(unbiased), BESSEL_REPEATS
    )


@dataclass(frozen=True)
class OneValue:
    """A batch with one value per channel: refused in training, fine in evaluation."""

    refusal: str  # the core's message (torch: "Expected more than 1 value per channel")
    x: np.ndarray  # (C,) the single sample's values
    eval_output: np.ndarray  # (C,) normalized with the running statistics


@one_thread()
def one_value(setup: LabSetup, running: RunningStats) -> OneValue:
    """A single sample with one position, in training mode (refused) and evaluation mode."""
    ds = make_dataset(setup)
    lay = LAYOUTS[setup.layout]
    one = ds.held_out[:1]
    for ax in range(1, one.ndim):  # keep the first position of every non-channel axis
        if ax != lay.channel_axis:
            one = one.narrow(ax, 0, 1)
    try:
        normalize(one, "batch", setup.layout, eps=setup.eps)
        refusal = ""
    except NormConfigError as e:
        refusal = str(e)
    out = normalize(one, "batch", setup.layout, eps=setup.eps, training=False, running=running)
    return OneValue(refusal, to_np(one.reshape(-1)), to_np(out.output.reshape(-1)))


def run(setup: LabSetup, knobs: Mapping[str, Value], progress: Progress) -> BesselResult:
    """The section: the averages (independent of the lab's batches), and the lab's n."""
    progress(0.0, "Averaging thousands of batch variances…")
    return replace(bessel(setup.seed), current_n=setup.n)


def figure(res: BesselResult, presenter: bool = False) -> go.Figure:
    """Average batch variance / σ² against n, biased and unbiased."""
    current_n = res.current_n
    fig = Spec()
    n = res.n
    fig.add_trace(
        trace(
            "scatter",
            x=rounded(n),
            y=rounded((n - 1) / n),
            mode="lines",
            line={"color": BATCH, "dash": "dash", "width": 2},
            name="(n − 1)/n",
        )
    )
    fig.add_trace(series(n, res.biased, "biased: normalizes the batch", style.PALETTE[5], "circle"))
    label = "unbiased (× n/(n−1)): enters running_var"
    fig.add_trace(series(n, res.unbiased, label, RUNNING, "diamond"))
    if current_n is not None and current_n >= 2:
        fig.add_trace(marker_line(current_n, 0.0, 1.15, f"your batch: n = {current_n}"))
    fig.update_xaxes(style.log_axis(n), title="n = values per channel in one batch")
    fig.update_yaxes(title="average batch variance / true σ²", range=[0.0, 1.15])
    fig.update_layout(
        title=f"Variance estimates, averaged over {res.repeats:,} batches per n",
        legend=style.LEGEND_BELOW,
    )
    return style.apply(fig, presenter, height=460).figure()


def table(res: BesselResult) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "n": res.n.astype(int),
            "n/(n−1)": res.factor,
            "biased / σ²": res.biased,
            "unbiased / σ²": res.unbiased,
        }
    )


def notes(res: BesselResult) -> Sequence[str]:
    i = int(np.argmin(res.n))
    return (
        f"With n = {int(res.n[i])} the biased variance averages {res.biased[i]:.3f} of the "
        f"true σ², the unbiased one {res.unbiased[i]:.3f}.",
    )


def run_one_value(setup: LabSetup, knobs: Mapping[str, Value], progress: Progress) -> OneValue:
    """The part: one sample with one position, with the lab's running statistics."""
    progress(0.0, "Training the running statistics…")
    return one_value(setup, final_running(setup))


def one_value_table(one: OneValue) -> pd.DataFrame:
    return pd.DataFrame(
        {"channel": np.arange(one.x.size), "input": one.x, "evaluation output": one.eval_output}
    )


def one_value_notes(one: OneValue) -> Sequence[str]:
    return (f"normviz, asked to train on it: *{one.refusal}*.",)


SECTION = Section(
    "bessel", "Biased vs unbiased", INTRO, run, figure=figure, table=table, notes=notes
)
ONE_VALUE = Section(
    "one-value",
    "One value per channel",
    ONE_VALUE_INTRO,
    run_one_value,
    table=one_value_table,
    notes=one_value_notes,
)
