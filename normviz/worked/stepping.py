"""The worked example as frames for the step-through player (ui.stepper): per statistic,
its μ, its σ², the x̂ of its cells and their y = γ·x̂ + β, one frame each.

The matrix drawn at each frame holds the input, the outputs of every statistic done so
far, and the current statistic's cells outlined; the numbers come from `MethodSteps`
(normviz.normalize, checked against torch.nn), with γ = 1 and β = 0 as on the page.
"""

from __future__ import annotations

import math

import numpy as np

from normviz.frames import Column, Frames, Grid
from normviz.worked.steps import MethodSteps, Statistic, fmt, fmt_list

NOT_YET = "not yet"
PHASES = ("μ", "σ²", "x̂", "y")  # what each of a statistic's four frames computes


def _cells(steps: MethodSteps, stat: Statistic) -> tuple[tuple[int, int], ...]:
    """The (row, col) cells one statistic pools: a column (BatchNorm) or a row."""
    n = len(stat.values)
    if steps.pools == "column":
        return tuple((r, stat.index) for r in range(n))
    return tuple((stat.index, c) for c in range(n))


def _x_hat(stat: Statistic, eps: float) -> tuple[float, ...]:
    """(x − μ) / √(σ² + ε) of each of the statistic's values."""
    return tuple((v - stat.mean) / math.sqrt(stat.var + eps) for v in stat.values)


def method_frames(steps: MethodSteps, x: object) -> Frames:
    """Four frames per statistic of one method on matrix `x` (rows, cols): μ, σ², x̂, y."""
    grid = [[fmt(v) for v in row] for row in np.asarray(x, dtype=float)]
    done: list[tuple[int, int]] = []
    labels: list[str] = []
    cols: dict[str, list[str]] = {"values": [], **{p: [] for p in PHASES}}
    grids: list[Grid] = []
    noun, count = steps.pools, len(steps.stats)
    for stat in steps.stats:
        cells = _cells(steps, stat)
        x_hat = _x_hat(stat, steps.eps)
        shown = {
            "μ": fmt(stat.mean),
            "σ²": fmt(stat.var),
            "x̂": fmt_list(x_hat),
            "y": fmt_list(stat.outputs),  # γ = 1, β = 0: y = x̂
        }
        for i, phase in enumerate(PHASES):
            labels.append(f"{noun.capitalize()} {stat.index + 1} of {count}, {phase}")
            cols["values"].append(fmt_list(stat.values))
            for j, p in enumerate(PHASES):
                cols[p].append(shown[p] if j <= i else NOT_YET)
            if phase in ("x̂", "y"):
                new = x_hat if phase == "x̂" else stat.outputs
                for (r, c), v in zip(cells, new, strict=True):
                    grid[r][c] = fmt(v)
            if phase == "y":
                done.extend(cells)
            grids.append(Grid(tuple(tuple(r) for r in grid), cells, tuple(done)))
    return Frames(
        title=f"{steps.label}, one {noun} at a time",
        labels=tuple(labels),
        columns=tuple(Column(name, tuple(text)) for name, text in cols.items()),
        grids=tuple(grids),
        summary=(
            f"The matrix, {count} {noun}s in turn: each {noun}'s μ and σ² over its "
            f"{len(steps.stats[0].values)} values, then x̂ = (x − μ)/√(σ² + ε) and "
            f"y = γ·x̂ + β (γ = 1, β = 0) written into its cells, outlined."
        ),
    )
