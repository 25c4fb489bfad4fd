"""ε: why it is there. Each group is divided by √(σ² + ε), not by σ.

A group whose values are all equal has σ² = 0: with ε > 0 its output is 0, with
ε = 0 it is 0/0 = NaN. A large ε also shrinks groups whose spread is small next to
it: their variance after is σ²/(σ² + ε), below 1.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from normviz import style
from normviz.core import Contract, as_tensor
from normviz.data import GENERATORS
from normviz.distributions.histograms import Tensorish
from normviz.distributions.moments import group_moments
from normviz.distributions.setup import Setup, gated, generated_like, input_tensor
from normviz.figures.spec import Spec, trace
from normviz.knobs import Knob, Value
from normviz.limits import EPS_CHOICES
from normviz.methods import METHODS
from normviz.sections import Progress, Section

KNOBS = (Knob("edata", "constant", choices=("constant", "current"), label="Data for this section"),)

INTRO = (
    "Each group is divided by √(σ² + ε), not by σ. A group whose values are all equal "
    "has σ² = 0: with ε > 0 its output is 0, with ε = 0 it is 0/0, which is NaN and "
    "poisons everything downstream. A large ε also shrinks groups whose spread is "
    "small next to it: their variance after is σ²/(σ² + ε), below 1."
)


def choice_label(choice: str) -> str:
    """What the `edata` choice means, for its widget."""
    if choice == "constant":
        g = GENERATORS["constant"]
        return f"{g.label}: {g.description}"
    return "the page's current input"


@dataclass(frozen=True, eq=False)
class EpsSweep:
    """What ε does to one method on one input, for every ε the app offers."""

    method: str
    eps: np.ndarray  # the ε values, ascending (0 first)
    var_after_min: np.ndarray  # per ε: smallest variance after (mean square for RMSNorm)
    var_after_median: np.ndarray
    var_after_max: np.ndarray
    nan_values: np.ndarray  # per ε: output values that are NaN (0/0)
    zero_groups: int  # groups whose values are all equal (σ² = 0)
    smallest_var: float  # the smallest nonzero σ² (or mean square) of a group
    group_size: int
    current_eps: float = 1e-5  # the sidebar's ε, marked on the figure


def eps_sweep(
    x: Tensorish,
    con: Contract,
    eps_values: tuple[float, ...] = EPS_CHOICES,
    current_eps: float = 1e-5,
) -> EpsSweep:
    """The spread after normalization, per ε, from each group's σ²: σ²/(σ² + ε).

    A group of equal values has σ² = 0: its output is 0/sqrt(ε), which is 0 for ε > 0
    and 0/0 = NaN for ε = 0. That is what ε is for.
    """
    _, var, ms = group_moments(as_tensor(x), con)
    s2 = (var if con.centred else ms).numpy()
    zero = s2 == 0
    live = s2[~zero]
    eps = np.array(sorted(float(e) for e in eps_values))
    after = live[None, :] / (live[None, :] + eps[:, None]) if live.size else np.zeros((eps.size, 0))

    def over_groups(f: np.ufunc) -> np.ndarray:
        return f(after, axis=1) if live.size else np.full(eps.size, math.nan)

    return EpsSweep(
        con.method,
        eps,
        over_groups(np.min),
        over_groups(np.median),
        over_groups(np.max),
        np.where(eps == 0, int(zero.sum()) * con.group_size, 0),
        int(zero.sum()),
        float(live.min()) if live.size else math.nan,
        con.group_size,
        current_eps,
    )


@gated
def run(setup: Setup, knobs: Mapping[str, Value], progress: Progress) -> EpsSweep:
    x = generated_like(setup, "constant") if knobs["edata"] == "constant" else input_tensor(setup)
    return eps_sweep(x, setup.contract, current_eps=setup.eps)


def make_eps_figure(sweep: EpsSweep, current_eps: float, presenter: bool = False) -> go.Figure:
    """Variance after normalization against ε (log scale), per group: σ²/(σ² + ε)."""
    label = METHODS[sweep.method].label
    pos = sweep.eps > 0
    eps = sweep.eps[pos]
    fig = Spec()
    colour = style.METHOD_COLOURS[sweep.method]
    for values, name, dash in (
        (sweep.var_after_max, "largest", "dot"),
        (sweep.var_after_median, "median group", "solid"),
        (sweep.var_after_min, "smallest", "dash"),
    ):
        line = {"color": colour, "dash": dash}
        fig.add_trace(
            trace("scatter", x=eps, y=values[pos], mode="lines+markers", name=name, line=line)
        )
    if sweep.zero_groups:  # 0/sqrt(ε) = 0 for every ε > 0
        fig.add_trace(
            trace(
                "scatter",
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
    fig.add_annotation(
        text=_zero_note(sweep),
        xref="paper",
        yref="paper",
        x=0.02,
        y=0.5,  # the empty middle: the curves hug 1 and the constant groups sit at 0
        xanchor="left",
        showarrow=False,
        font={"color": style.HIGHLIGHT if sweep.zero_groups else style.BEFORE},
    )
    moment = "variance" if METHODS[sweep.method].centred else "mean square"
    fig.update_xaxes(style.log_axis(eps), title="ε (log scale)")
    # 0 sits clear of the bottom edge, so its label stays off the x axis's first label
    fig.update_yaxes(title=f"{moment} after", range=[-0.12, 1.1])
    # two short lines: one ran past a phone's column
    # the legend under the chart: at its right it left a phone's plot too narrow for the
    # decade labels
    fig.update_layout(
        title=f"{label}: ε shrinks<br>the groups with small spread", legend=style.LEGEND_BELOW
    )
    style.apply(fig, presenter, height=460)
    return style.top_room(fig, presenter).figure()


def _zero_note(sweep: EpsSweep) -> str:
    pos = sweep.eps > 0
    nan0 = int(sweep.nan_values[~pos].sum()) if (~pos).any() else 0
    if sweep.zero_groups:
        # two lines: one ran past a phone's column
        return f"ε = 0: {sweep.zero_groups:,} constant group(s) give 0/0,<br>{nan0:,} NaN values"
    return "ε = 0: no constant group here, so no NaN"


def figure(sweep: EpsSweep, presenter: bool) -> go.Figure:
    return make_eps_figure(sweep, sweep.current_eps, presenter)


def notes(sweep: EpsSweep) -> Sequence[str]:
    if sweep.zero_groups:
        return (
            f"{sweep.zero_groups:,} group(s) of m = {sweep.group_size:,} equal values. "
            "With this data chosen as the sidebar's input and ε = 0, the NaN reach the "
            "histograms and tables above.",
        )
    return (
        f"No group here has σ² = 0; the smallest spread is σ² = {sweep.smallest_var:.3g}, "
        f"which keeps {sweep.var_after_min[-1]:.3g} of its variance at ε = {sweep.eps[-1]:g}.",
    )


SECTION = Section("eps", "ε: why it is there", INTRO, run, KNOBS, figure, notes=notes)
