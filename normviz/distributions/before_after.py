"""Before and after: the values before and after the page's method, and every group's moments.

After a centred method each statistic group has mean 0 and variance σ²/(σ²+ε) ≈ 1;
after RMSNorm the mean square is ≈ 1 instead. The histograms count every value of
the input, binned on the server.
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
from normviz.core import Contract, as_tensor
from normviz.distributions.histograms import Histogram, Tensorish, bars, histogram, moments_text
from normviz.distributions.moments import expanded_names, group_moments
from normviz.distributions.setup import Setup, gated, input_tensor, norm
from normviz.figures.spec import Spec
from normviz.knobs import Value
from normviz.methods import METHODS
from normviz.sections import Progress, Section

TABLE_ROWS = 12  # groups listed on the page
CSV_ROWS = 100_000  # groups written to the downloadable table

INTRO = (
    "Each method standardizes the values inside its own statistic groups. The histograms "
    "count every value of the input, binned on the server; the table lists the first "
    "groups with their moments before and after."
)


@dataclass(frozen=True, eq=False)
class GroupTable:
    """Per-group moments before and after one method, and their min/max over all groups."""

    method: str
    layout: str
    axes: tuple[str, ...]  # pooled axes ("C/G" for GroupNorm)
    kept: tuple[str, ...]  # axes that index the groups
    group_size: int  # m
    n_groups: int
    centred: bool
    table: pd.DataFrame  # one row per group (the first `rows`), kept-axis indices first
    summary: pd.DataFrame  # rows "min" and "max" over every group

    @property
    def head(self) -> pd.DataFrame:
        """The first groups, for the page."""
        return self.table.head(TABLE_ROWS)


def stat_columns(centred: bool) -> list[str]:
    cols = ["mean before", "variance before", "mean after", "variance after"]
    return cols if centred else [*cols, "mean square after"]


def group_table(
    x: Tensorish,
    con: Contract,
    eps: float = 1e-5,
    y: torch.Tensor | None = None,
    rows: int | None = None,
) -> GroupTable:
    """Count, mean and variance of every statistic group of `con` before and after.

    `y` is the output when it is already computed (else: normalized here). The table
    keeps the first `rows` groups (default CSV_ROWS, the download's); the summary
    covers every group.

    Raises:
        NormConfigError: the setting cannot run.
    """
    x = as_tensor(x)
    y = norm(x, con, eps) if y is None else y
    m0, v0, _ = group_moments(x, con)
    m1, v1, ms1 = group_moments(y, con)
    names = expanded_names(con)
    kept_dims = [d for d, a in enumerate(names) if a in con.kept]
    n = min(con.n_stats, CSV_ROWS if rows is None else rows)
    index = np.unravel_index(np.arange(n), tuple(con.stat_shape))
    data: dict[str, object] = {names[d]: index[d] for d in kept_dims}
    data["count"] = np.full(n, con.group_size)
    cols = {
        "mean before": m0,
        "variance before": v0,
        "mean after": m1,
        "variance after": v1,
        "mean square after": ms1,
    }
    for col in stat_columns(con.centred):
        data[col] = cols[col][:n].numpy()
    summary = pd.DataFrame(
        {col: _min_max(cols[col].numpy()) for col in stat_columns(con.centred)},
        index=["min", "max"],
    )
    summary.insert(0, "count", [con.group_size, con.group_size])
    return GroupTable(
        con.method,
        con.layout,
        con.axes,
        con.kept,
        con.group_size,
        con.n_stats,
        con.centred,
        pd.DataFrame(data),
        summary,
    )


def _min_max(a: np.ndarray) -> list[float]:
    """[min, max] over the finite entries (NaN groups come from ε = 0 on constant groups)."""
    a = a[np.isfinite(a)]
    return [float(a.min()), float(a.max())] if a.size else [math.nan, math.nan]


# ---- run --------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class BeforeAfter:
    """The page's method on the whole input: both histograms and the group table."""

    method: str
    before: Histogram
    after: Histogram
    groups: GroupTable


@gated
def run(setup: Setup, knobs: Mapping[str, Value], progress: Progress) -> BeforeAfter:
    x = input_tensor(setup)
    progress(0.3, "normalizing")
    y = norm(x, setup.contract, setup.eps)
    progress(0.6, "group moments")
    # the page lists TABLE_ROWS groups: the cached result keeps only those (the download
    # builds its own table when clicked)
    groups = group_table(x, setup.contract, setup.eps, y, rows=TABLE_ROWS)
    return BeforeAfter(setup.method, histogram(x), histogram(y), groups)


# ---- figure, table, notes ----------------------------------------------------------------


def make_before_after_figure(
    before: Histogram,
    after: Histogram,
    method: str,
    presenter: bool = False,
    after_label: str = "after",
) -> go.Figure:
    """The values before and after one method, side by side, each on its own x-range."""
    label = METHODS[method].label
    # name and moments a line each: side by side in one line they meet on a phone
    titles = (f"before<br>{moments_text(before)}", f"{after_label}<br>{moments_text(after)}")
    fig = Spec.grid(1, 2, titles, horizontal_spacing=0.08)
    fig.add_trace(bars(before, style.BEFORE, "before"), 1, 1)
    fig.add_trace(bars(after, style.METHOD_COLOURS[method], after_label), 1, 2)
    fig.update_layout(
        title=f"{label}: values before and {after_label}",
        showlegend=False,
        bargap=0,
    )
    fig.update_yaxes(title="values", row=1, col=1)
    fig.update_xaxes(title="value")
    style.apply(fig, presenter, height=400)
    return style.top_room(fig, presenter, below=max(map(style.lines, titles))).figure()


def figure(res: BeforeAfter, presenter: bool) -> go.Figure:
    return make_before_after_figure(res.before, res.after, res.method, presenter)


def table(res: BeforeAfter) -> pd.DataFrame:
    return res.groups.head


def notes(res: BeforeAfter) -> Sequence[str]:
    t = res.groups
    label = METHODS[res.method].label
    moment = "mean 0 and variance 1" if t.centred else "mean square 1 (no centring)"
    shown = min(len(t.head), t.n_groups)
    col = "variance after" if t.centred else "mean square after"
    lo, hi = (t.summary.loc[r, col] for r in ("min", "max"))
    mlo, mhi = (t.summary.loc[r, "mean after"] for r in ("min", "max"))
    return (
        f"{label} pools **{', '.join(t.axes)}** into one statistic and keeps "
        f"**{', '.join(t.kept) or 'nothing'}** apart: {t.n_groups:,} groups of "
        f"m = {t.group_size:,} values each.",
        f"**Inside every group** the output has {moment}, up to the small shrink ε causes. "
        f"The table lists the first {shown} of the {t.n_groups:,} groups; over all of them "
        f"the mean after runs from {mlo:.3g} to {mhi:.3g} and the {col.replace(' after', '')} "
        f"after from {lo:.6g} to {hi:.6g}.",
    )


SECTION = Section(
    "before-after",
    "Before and after: {method}",
    INTRO,
    run,
    figure=figure,
    table=table,
    notes=notes,
)
