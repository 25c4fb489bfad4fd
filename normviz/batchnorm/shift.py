"""Shift: evaluation data moved away from the training data, through each method."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from normviz import style
from normviz.batchnorm.lab import LabSetup, check, one_thread
from normviz.batchnorm.plot import rounded
from normviz.batchnorm.running import final_running
from normviz.batchnorm.stream import make_dataset, shifted
from normviz.core import contract, normalize
from normviz.figures.spec import Spec, trace
from normviz.knobs import Knob, Value
from normviz.methods import METHODS
from normviz.running import RunningStats
from normviz.sections import Progress, Section

INTRO = (
    "At inference the data may not look like the training data. Here every channel of "
    "the held-out data is moved by `shift` training standard deviations and its spread "
    "multiplied by `scale`. BatchNorm in evaluation mode still subtracts the *training* "
    "mean, so its output drifts to mean ≈ shift and variance ≈ scale². LayerNorm and "
    "GroupNorm compute fresh statistics from each sample and stay at 0 and 1."
)
SHIFT = Knob("shift", 0.5, lo=-10.0, hi=10.0, label="Shift (σ)")
SCALE = Knob("scale", 1.0, lo=0.1, hi=10.0, label="Scale (×)")
SHIFT_GRID: tuple[float, ...] = tuple(np.round(np.linspace(-3.0, 3.0, 25), 2).tolist())
COMPARED: tuple[str, ...] = ("batch", "layer", "group")  # methods in the shift demo


@dataclass(frozen=True)
class ShiftResult:
    """Pooled output mean and variance of shifted evaluation data, per method."""

    methods: tuple[str, ...]
    shifts: np.ndarray  # (K,) the sweep, at the current scale
    mean: np.ndarray  # (M, K)
    var: np.ndarray  # (M, K)
    shift: float
    scale: float
    current_mean: np.ndarray  # (M,) at the current shift and scale
    current_var: np.ndarray  # (M,)
    groups: int


@one_thread()
def shift_sweep(
    setup: LabSetup,
    running: RunningStats,
    shift: float,
    scale: float,
    groups: int | None = None,
) -> ShiftResult:
    """Evaluation data moved by `shift` σ and scaled; BatchNorm uses `running`.

    BatchNorm normalizes with the running statistics of training; LayerNorm and
    GroupNorm compute fresh statistics from each sample, so the shift cannot reach them.
    GroupNorm uses `groups` (default: the setup's, the sidebar's G).

    Raises:
        NormConfigError: a G that does not divide C (the message names the divisors).
    """
    check(setup)
    G = setup.groups if groups is None else groups
    contract("group", setup.layout, setup.batch_shape(1), groups=G)  # refuses a bad G
    ds = make_dataset(setup)
    mu, sd = ds.channel_view(ds.mean), ds.channel_view(ds.std)

    def stats(sh: float) -> list[tuple[float, float]]:
        """Pooled output mean and variance of each method for one shift."""
        x = shifted(ds.held_out, mu, sd, sh, scale)
        out = []
        for m in COMPARED:
            kw: dict = {"groups": G} if METHODS[m].grouped else {}
            if METHODS[m].train_eval_differ:
                kw |= {"training": False, "running": running}
            y = normalize(x, m, setup.layout, eps=setup.eps, **kw).output.double()
            out.append((y.mean().item(), y.var(correction=0).item()))
        return out

    grid = np.asarray(SHIFT_GRID)
    sweep = np.asarray([stats(float(s)) for s in grid])  # (K, M, 2)
    cur = np.asarray(stats(shift))  # (M, 2)
    return ShiftResult(
        COMPARED, grid, sweep[:, :, 0].T, sweep[:, :, 1].T, shift, scale, cur[:, 0], cur[:, 1], G
    )


def run(setup: LabSetup, knobs: Mapping[str, Value], progress: Progress) -> ShiftResult:
    """The section: the running statistics of the training stream, then the sweep."""
    contract("group", setup.layout, setup.batch_shape(1), groups=setup.groups)  # G first
    progress(0.0, "Training the running statistics, then shifting the held-out data…")
    return shift_sweep(setup, final_running(setup), float(knobs["shift"]), float(knobs["scale"]))


def figure(res: ShiftResult, presenter: bool = False) -> go.Figure:
    """Pooled output mean and variance against the evaluation shift, per method."""
    fig = Spec.grid(
        1,
        2,
        (f"output mean (scale ×{res.scale:g})", f"output variance (scale ×{res.scale:g})"),
        horizontal_spacing=0.12,
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
                trace(
                    "scatter",
                    x=rounded(res.shifts),
                    y=rounded(ys),
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
                trace(
                    "scatter",
                    x=[res.shift],
                    y=rounded([cur]),
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
        fig.update_xaxes(title="shift of the evaluation data (in σ)", row=1, col=col)
    fig.update_yaxes(rangemode="tozero", row=1, col=2)
    fig.update_layout(
        title="Shifted evaluation data through each method", legend=style.LEGEND_BELOW
    )
    return style.apply(fig, presenter, height=440).figure()


def table(res: ShiftResult) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "method": [METHODS[m].label for m in res.methods],
            "statistics from": [
                "training (running)" if METHODS[m].train_eval_differ else "each sample"
                for m in res.methods
            ],
            "output mean": res.current_mean,
            "output variance": res.current_var,
        }
    )


def notes(res: ShiftResult) -> Sequence[str]:
    return (f"GroupNorm uses G = {res.groups} groups (the sidebar's G).",)


SECTION = Section(
    "shift",
    "Shift",
    INTRO,
    run,
    knobs=(SHIFT, SCALE),
    figure=figure,
    table=table,
    notes=notes,
)
