"""Practice (/practice): exercises generated from the registry, graded by the app.

One section per exercise kind, in page order: same statistics (`cells.py`), name
the method (`naming.py`), count (`count.py`), compute y (`compute.py`), train or
eval (`traineval.py`) and scenario questions (`scenarios.py`). An exercise is a
frozen value of its kind and seed (`common.py`: cases, answers, grading, a class's
tally); `grid.py` draws the clickable tensor and a class's answers. The live
class's database is `normviz.classroom`.
"""

from __future__ import annotations

from normviz.knobs import Knob
from normviz.practice import cells, compute, count, naming, scenarios, traineval
from normviz.practice.common import (
    AnswerError,
    Exercise,
    Setup,
    TallyRow,
    Verdict,
    cell_name,
    cell_names,
    describe,
    grade,
    parse_answer,
    tally,
)
from normviz.practice.grid import grid_alt, make_grid_figure, make_tally_figure
from normviz.practice.show import notes
from normviz.practice.show import table as exercise_table
from normviz.sections import Section, by_slug, slugs

SECTIONS: tuple[Section, ...] = (
    cells.SECTION,
    naming.SECTION,
    count.SECTION,
    compute.SECTION,
    traineval.SECTION,
    scenarios.SECTION,
)
MAKERS = {m.SLUG: m.make for m in (cells, naming, count, compute, traineval, scenarios)}
# The page's own URL parameters (the exercise's seed is the shared `seed`).
KNOBS: tuple[Knob, ...] = (
    Knob("kind", SECTIONS[0].slug, choices=slugs(SECTIONS), label="Exercise"),
    Knob("class", "", label="Class code"),
)


def exercise(kind: str, seed: int) -> Exercise:
    """The exercise of `kind` (a section slug) for `seed`."""
    return MAKERS[kind](int(seed))


def example_setup() -> Setup:
    return Setup(seed=0)


__all__ = [
    "KNOBS",
    "MAKERS",
    "SECTIONS",
    "AnswerError",
    "Exercise",
    "Setup",
    "TallyRow",
    "Verdict",
    "by_slug",
    "cell_name",
    "cell_names",
    "describe",
    "example_setup",
    "exercise",
    "exercise_table",
    "grade",
    "grid_alt",
    "make_grid_figure",
    "make_tally_figure",
    "notes",
    "parse_answer",
    "tally",
]
