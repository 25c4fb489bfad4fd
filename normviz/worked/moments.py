"""Which moments each method controls: means and variances down columns and along rows.

A method forces mean 0 and variance σ²/(σ² + ε) ≈ 1 only along the axis it pools;
along the other axis its output keeps whatever pattern is left.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from normviz.errors import NormConfigError
from normviz.knobs import Value
from normviz.methods import METHODS
from normviz.sections import Progress, Section
from normviz.worked.steps import (
    EPS,
    METHODS_SHOWN,
    Matrix,
    as_matrix,
    fmt_list,
    method_steps,
    pools,
)

INTRO = (
    "A method forces mean 0 and variance 1 only along the axis it pools. Along the "
    "other axis the output keeps whatever pattern is left, and some information is gone: "
    "on the source's matrix BatchNorm turns each row into a constant, −1 or +1 (only "
    "which sample was larger survives), while LayerNorm makes the two rows identical "
    "(the +2 between them is gone)."
)
NOTE = (
    "Variances are divided by m. After normalization they are σ²/(σ² + ε), "
    "which rounds to 1; a constant column or row comes out as zeros (variance 0)."
)
MOMENTS: tuple[tuple[str, str], ...] = (
    ("column means", "column_mean"),
    ("column variances", "column_var"),
    ("row means", "row_mean"),
    ("row variances", "row_var"),
)


@dataclass(frozen=True)
class Moments:
    """Means and biased variances of a matrix, down its columns and along its rows."""

    column_mean: np.ndarray
    column_var: np.ndarray
    row_mean: np.ndarray
    row_var: np.ndarray

    @classmethod
    def of(cls, x: np.ndarray) -> Moments:
        return cls(x.mean(0), x.var(0), x.mean(1), x.var(1))


@dataclass(frozen=True)
class MomentsView:
    """The moments of the input and of each method's output that could run, by name."""

    frames: tuple[tuple[str, Moments], ...]


def controls(method: str) -> tuple[str, str]:
    """The moments a method pins: mean 0 and variance σ²/(σ² + ε) ≈ 1 per column or row.

    (A constant column or row has σ² = 0 and comes out all zeros, variance 0.)
    """
    along = pools(method)
    return f"{along} means", f"{along} variances"


def moments_view(data: object, eps: float = EPS) -> MomentsView:
    """The input's moments, then each method's output's (a method that refuses is left out)."""
    x = as_matrix(data)
    frames = [("input", Moments.of(x))]
    for key in METHODS_SHOWN:
        try:
            frames.append(
                (f"after {METHODS[key].label}", Moments.of(method_steps(x, key, eps).output))
            )
        except NormConfigError:
            continue  # BatchNorm with a single row: the steps section shows the refusal
    return MomentsView(tuple(frames))


def table(view: MomentsView) -> pd.DataFrame:
    """One row per moment: its values for each frame (rounded to 3 decimals), who pins it."""
    rows = []
    for what, attr in MOMENTS:
        row: dict[str, str] = {"moment": what}
        for name, mom in view.frames:
            row[name] = fmt_list(getattr(mom, attr))
        row["pinned by"] = ", ".join(METHODS[k].label for k in METHODS_SHOWN if what in controls(k))
        rows.append(row)
    return pd.DataFrame(rows).set_index("moment")


def moments_table(data: object, eps: float = EPS) -> pd.DataFrame:
    """Column and row moments of the input and of each method's output, and who controls them.

    Each cell is the list of values, rounded to 3 decimals; the "pinned by" column
    names the method that forces that moment to 0 or 1.
    """
    return table(moments_view(data, eps))


def run(setup: Matrix, knobs: Mapping[str, Value], progress: Progress) -> MomentsView:
    return moments_view(setup)


def notes(view: MomentsView) -> tuple[str, ...]:
    return (NOTE,)


SECTION = Section(
    "moments", "Which moments each method controls", INTRO, run, table=table, notes=notes
)
