"""How every exercise is shown as a page section: its grid, its table, its explained answer.

Each exercise kind is a `Section` whose run() generates the exercise for the
setup's seed, whose figure is the exercise's grid, and whose notes state the
answer with its explanation (computed from the numbers) and the page that shows why.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from normviz.core import Contract
from normviz.knobs import Value
from normviz.practice.common import Exercise, Setup
from normviz.practice.grid import make_grid_figure
from normviz.sections import Progress, Section


def figure(ex: Exercise, presenter: bool = False) -> go.Figure | None:
    """The exercise's grid (no picks, no grade): None when it has no tensor."""
    return make_grid_figure(ex, presenter=presenter) if ex.case is not None else None


def table(ex: Exercise) -> pd.DataFrame | None:
    if not ex.table:
        return None
    head, *rows = ex.table
    return pd.DataFrame(rows, columns=list(head))


def notes(ex: Exercise) -> Sequence[str]:
    """The answer, why, and where the app shows it."""
    path, title = ex.link
    return (
        f"**Answer:** {ex.answer_text}.",
        *ex.explanation,
        f"See why on [{title}](./{path}).",
    )


def section(slug: str, label: str, intro: str, make: Callable[[int], Exercise]) -> Section:
    """An exercise kind as a page section: run() builds the exercise for the setup's seed."""

    def run(setup: Setup, knobs: Mapping[str, Value], progress: Progress) -> Exercise:
        return make(int(setup.seed))

    return Section(slug, label, intro, run, figure=figure, table=table, notes=notes)


def contract_words(con: Contract) -> str:
    """ "pools T and C/G (m = 12 values) and keeps B and G apart"."""
    kept = " and ".join(con.kept) if con.kept else "nothing"
    return (
        f"pools {' and '.join(con.axes)} (m = {con.size_text()} values per statistic) "
        f"and keeps {kept} apart"
    )


def fmt(v: float) -> str:
    """A number as a student would write it: whole numbers bare, else 4 significant digits."""
    v = float(v)
    if abs(v) < 5e-5:
        return "0"
    return str(int(v)) if v.is_integer() else f"{v:.4g}"


def term(v: float) -> str:
    """A number inside a sum: negative ones in parentheses, "(−2)"."""
    return f"({fmt(v)})" if float(v) < 0 else fmt(v)


def same_partition(a: np.ndarray, b: np.ndarray) -> bool:
    """True when `a` and `b` group the elements the same way (labels may differ)."""
    a, b = np.asarray(a).reshape(-1), np.asarray(b).reshape(-1)
    if a.shape != b.shape:
        return False
    pairs = np.unique(np.stack([a, b]), axis=1).shape[1]
    return pairs == len(np.unique(a)) == len(np.unique(b))
