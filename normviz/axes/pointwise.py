"""No values pooled: under an elementwise method (DyT) every cell is its own "group".

The check is run, not asserted: one input cell is moved by a large amount and each
method's output is compared before and after. Under DyT only that cell's output
moves; under every method with statistics, every output that shares the cell's μ and
σ² moves with it. That is the point of DyT: no value's output depends on any other
value, so there is no batch dependence, no train/eval difference, and an outlier
cannot rescale its neighbours.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch

from normviz import style
from normviz.core import contract, normalize
from normviz.distributions.setup import Generated
from normviz.elementwise import ElementwiseSetup, Named, fresh_output
from normviz.errors import NormConfigError
from normviz.figures.spec import Spec, trace
from normviz.knobs import Value
from normviz.layouts import LAYOUTS
from normviz.methods import METHODS, STANDARD_METHODS
from normviz.sections import Progress, Section

KICK = 10.0  # the moved cell gets this many times the input's largest |value| added

INTRO = (
    "An elementwise method computes **no statistic**: no mean, no variance, nothing pooled. "
    "Every cell is its own group of one. Below, the first cell of the input is moved by a "
    "large amount, and each method's output is compared before and after: the outputs that "
    "move are exactly the ones that share a statistic with that cell."
)


@dataclass(frozen=True, eq=False)
class Pooling:
    """How many outputs moved when one input cell moved, per method."""

    method: str  # the elementwise method on the page
    layout: str
    shape: tuple[int, ...]
    moved: dict[str, int]  # method -> outputs that changed
    group: dict[str, int]  # method -> values sharing one statistic (1 for elementwise)
    refused: dict[str, str]  # method -> why it cannot run on this shape

    @property
    def cells(self) -> int:
        return math.prod(self.shape)


def _output(method: str, x: torch.Tensor, layout: str, groups: int, eps: float) -> torch.Tensor:
    if METHODS[method].kind == "elementwise":
        return fresh_output(method, x, layout)
    g = groups if METHODS[method].grouped else None
    return normalize(x, method, layout, groups=g, eps=eps).output


def pooling(setup: ElementwiseSetup) -> Pooling:
    """Move the first cell and count, per method, the outputs that follow it."""
    x = setup.tensor().double()
    moved_x = x.clone()
    moved_x.view(-1)[0] += KICK * (float(x.abs().max()) + 1.0)
    shape = tuple(x.shape)
    moved, group, refused = {}, {}, {}
    for m in (setup.method, *STANDARD_METHODS):
        try:
            a, b = (_output(m, t, setup.layout, setup.groups, setup.eps) for t in (x, moved_x))
            g = setup.groups if METHODS[m].grouped else None
            size = 1 if m == setup.method else contract(m, setup.layout, shape, g).group_size
        except NormConfigError as e:
            refused[m] = str(e)
            continue
        scale = float(a.abs().max()) + 1.0
        moved[m] = int(((a - b).abs() > 1e-9 * scale).sum())
        group[m] = size
    return Pooling(setup.method, setup.layout, shape, moved, group, refused)


def setup_for(
    method: str, layout: str, shape: tuple[int, ...], data: str, seed: int, real: Named | None
) -> ElementwiseSetup:
    """The page's input (a real source's, else the seeded generator's) for `method`."""
    return ElementwiseSetup(method, layout, real or Generated(data, layout, shape, seed))


def run(setup: ElementwiseSetup, knobs: Mapping[str, Value], progress: Progress) -> Pooling:
    return pooling(setup)


def figure(res: Pooling, presenter: bool) -> go.Figure:
    keys = list(res.moved)
    fig = Spec()
    fig.add_trace(
        trace(
            "bar",
            x=[res.moved[k] for k in keys],
            y=[METHODS[k].label for k in keys],
            orientation="h",
            marker={"color": [style.METHOD_COLOURS[k] for k in keys]},
            text=[f"{res.moved[k]:,}" for k in keys],
            textposition="outside",
            cliponaxis=False,
        )
    )
    moved = np.array(list(res.moved.values()), dtype=float)
    # a count of 0 (a saturated tanh moves nothing) has no place on a log axis
    lo, hi = (float(f(moved[moved > 0])) if (moved > 0).any() else 1.0 for f in (np.min, np.max))
    fig.update_layout(
        # two short lines: one ran off both sides of a phone
        title=f"Outputs that moved when<br>one of {res.cells:,} input cells moved",
        xaxis={
            "title": {"text": "outputs changed (log scale)"},
            **style.log_axis(moved),
            # half a decade past the longest bar holds its number (plotly's own range cut
            # "24" to "2" on a phone)
            "range": [math.log10(lo) - 0.05, math.log10(hi) + 0.5],
        },
        yaxis={"autorange": "reversed"},
        showlegend=False,
    )
    style.apply(fig, presenter, height=140 + 40 * len(keys))
    return style.top_room(fig, presenter).figure()


def table(res: Pooling) -> pd.DataFrame:
    rows = [
        {
            "method": METHODS[k].label,
            "values sharing one statistic": res.group[k],
            "outputs moved by one input": res.moved[k],
        }
        for k in res.moved
    ]
    return pd.DataFrame(rows).set_index("method")


def notes(res: Pooling) -> Sequence[str]:
    m, lay = METHODS[res.method], LAYOUTS[res.layout]
    own = res.moved[res.method]
    others = [k for k in res.moved if k != res.method]
    most = max(others, key=lambda k: res.moved[k]) if others else None
    out = [
        f"**{m.label} pools no values**: each of the {res.cells:,} cells of "
        f"{lay.shape_text(res.shape)} is its own group, and moving the first cell changed "
        f"{own:,} output{'s' if own != 1 else ''}" + (" (its own)." if own == 1 else ".")
    ]
    if most is not None:
        listed = ", ".join(f"{METHODS[k].label} {res.moved[k]:,}" for k in others)
        out.append(
            f"Every method with statistics moved more outputs ({listed}): the cell's change "
            f"shifted the statistics it shares, and with them every value in its group."
            if all(res.moved[k] > own for k in others)
            else f"The methods with statistics moved {listed} outputs."
        )
    out.append(
        "**Why that is the point**: with nothing pooled, a value's output never depends on "
        "another value. There is no batch dependence (a batch of one is fine, and training "
        "and evaluation compute the same thing), and one huge feature cannot change the "
        "other features of its token (under LayerNorm it moves all of them, as counted "
        "above); tanh bounds the feature itself instead. "
        "The price: nothing adapts to the input's scale, so α has to be learned."
    )
    out += [f"{METHODS[k].label} cannot run here: {why}." for k, why in res.refused.items()]
    return tuple(out)


SECTION = Section(
    "no-pooling",
    "No values pooled: every cell is its own group",
    INTRO,
    run,
    figure=figure,
    table=table,
    notes=notes,
)
