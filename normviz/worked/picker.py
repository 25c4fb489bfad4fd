"""The worked example's cell picker: the matrix as the tensor grid (ui/tensorgrid.py).

The grid carries one statistic grouping per method shown (BatchNorm's columns and
LayerNorm's rows, read from their axis contracts through `normviz.group_ids`), each with
its μ and σ² per group. Hovering, focusing or tapping a cell then lights its column and
its row and fills in both formulas in the browser; a pick (click, tap, Enter) comes back
as the cell, which the worked numbers below follow.

    grid = cell_grid(walkthrough, (0, 2))  # row 1, column 3 selected
"""

from __future__ import annotations

import numpy as np

from normviz import style
from normviz.axes.gridview import VALUE_PALETTE, Grid, Grouping, local_groups, value_fill
from normviz.core import group_ids
from normviz.worked.steps import MethodSteps, fmt
from normviz.worked.walkthrough import Walkthrough

DIMS = ("row", "column")


def grouping(steps: MethodSteps) -> Grouping:
    """One method's groups over the (N, C) matrix, from its contract on (N, 1, C) (the
    matrix as a batch, as `method_steps` runs it), with each group's μ and σ²."""
    n, c = steps.output.shape
    ids = group_ids(steps.method, "BTC", (n, 1, c)).reshape(-1)
    group, first = local_groups(ids)
    # each cell's statistic: a column's (BatchNorm) or a row's (LayerNorm)
    own = np.indices((n, c))[1 if steps.pools == "column" else 0].reshape(-1)
    stat = [steps.stats[int(own[i])] for i in first]
    return Grouping(
        group=tuple(int(g) for g in group),
        mean=tuple(s.mean for s in stat),
        var=tuple(s.var for s in stat),
        m=len(steps.stats[0].values),
        name=steps.label,
        noun=steps.pools,
        colour=style.METHOD_COLOURS[steps.method],
    )


def legend(res: Walkthrough) -> str:
    """What the rings mean and what a pick does."""
    rings = [
        f"{'a thin' if k == 0 else 'a thick'} ring marks its {s.label} {s.pools}"
        for k, s in enumerate(res.steps[:2])
    ]
    looks = f" ({'; '.join(rings)})" if rings else ""
    return (
        f"Hover, tap or move with the arrow keys to see any cell's statistics{looks}; click, "
        "tap or press Enter to work that cell out below. ✕ marks the selected cell."
    )


def alt(res: Walkthrough, row: int, col: int) -> tuple[str, ...]:
    """The grid in sentences: its size, the selected cell and its statistics."""
    n, c = res.x.shape
    out = [
        f"The matrix as a grid of {n} × {c} cells coloured by value, each showing its number; "
        f"row {row + 1}, column {col + 1} is selected (x = {fmt(res.x[row, col])})."
    ]
    for s in res.steps:
        stat = s.stats[col if s.pools == "column" else row]
        out.append(
            f"Its {s.label} {s.pools} {stat.index + 1}: μ = {fmt(stat.mean)}, "
            f"σ² = {fmt(stat.var)}, y = {fmt(s.output[row, col])}."
        )
    return tuple(out)


def cell_grid(res: Walkthrough, cell: tuple[int, int]) -> Grid:
    """The matrix as the tensor grid, both methods' groupings shipped, `cell` selected."""
    x = res.x
    row, col = cell
    labels = " and ".join(f"{s.label}'s {s.pools}s" for s in res.steps)
    return Grid(
        layout="",
        dims=DIMS,
        shape=x.shape,
        start=(0, 0),
        size=x.shape,
        palette=VALUE_PALETTE,
        fill=value_fill(x.reshape(-1)),
        label=f"The matrix ({x.shape[0]} × {x.shape[1]})" + (f": {labels}" if labels else ""),
        values=tuple(float(v) for v in x.reshape(-1)),
        text=tuple(fmt(v) for v in x.reshape(-1)),
        groupings=tuple(grouping(s) for s in res.steps),
        eps=res.steps[0].eps if res.steps else 1e-5,
        selected=row * x.shape[1] + col,
        legend=legend(res),
        alt=alt(res, row, col),
    )
