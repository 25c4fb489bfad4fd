"""What every exercise shares: a seeded tensor case, the exercise itself, answers, grading.

An exercise is a frozen value built from a kind and a seed, so a link (`kind`,
`seed`) hands the same question to a whole class. Its answer has one of three
forms: a set of cells, a choice, or a few numbers. Every answer travels as a short
canonical string (what a live class stores), and `grade()` compares it with the
truth the generator computed from the registry (`group_ids`, `normalize`,
`RunningStats`); the tests check that truth against torch.nn.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from scipy.sparse.csgraph import connected_components

from normviz.core import Contract, contract, group_ids
from normviz.errors import NormConfigError
from normviz.layouts import LAYOUTS
from normviz.methods import METHODS, listed

FORMS = ("cells", "choice", "numbers")
PRACTICE = listed("practice")  # the registry's practice list (DyT's "no statistics" too)
# The methods with statistics on it: the exercises that pick, count or compute from a
# statistic's group (and the scenario questions) draw from these. An elementwise method
# pools nothing, so it has no group to pick, no statistic to count and no μ or σ².
STATISTICS = tuple(k for k in PRACTICE if METHODS[k].kind == "statistics")
EVERY_METHOD = (*STATISTICS, "custom")  # ... and custom axes
MAX_ANSWER_CHARS = 2000  # a longer answer string is refused before it is parsed


class AnswerError(NormConfigError):
    """An answer that cannot be read (not a cell list, not an option, not a number)."""


@dataclass(frozen=True)
class Setup:
    """The page's setup: the seed (the shared `seed` URL value) picks the exercise."""

    seed: int = 0


@dataclass(frozen=True)
class Case:
    """A tensor shape and the axis contract applied to it."""

    layout: str
    shape: tuple[int, ...]
    method: str
    groups: int | None = None  # GroupNorm's G
    axes: tuple[str, ...] | None = None  # custom axes
    centred: bool = True

    def contract(self) -> Contract:
        return contract(self.method, self.layout, self.shape, self.groups, self.axes, self.centred)

    def ids(self) -> np.ndarray:
        """Which statistic each element feeds (normviz.group_ids); for an elementwise method,
        the groups its reference module's Jacobian shows (`dependence_ids`)."""
        if METHODS[self.method].kind == "elementwise":
            return dependence_ids(self.method, self.layout, self.shape)
        return group_ids(self.method, self.layout, self.shape, self.groups, self.axes)

    @property
    def group_size(self) -> int:
        """m: the values in each group (1 when nothing is pooled)."""
        return int(np.bincount(self.ids().reshape(-1)).max())

    @property
    def subtracts_mean(self) -> bool:
        """RMSNorm and uncentred custom axes do not."""
        return self.centred if self.method == "custom" else METHODS[self.method].centred

    def norm_kwargs(self) -> dict[str, object]:
        """groups=/axes=/centred= for normviz.normalize."""
        kw: dict[str, object] = {}
        if self.groups is not None:
            kw["groups"] = self.groups
        if self.axes is not None:
            kw |= {"axes": self.axes, "centred": self.centred}
        return kw

    @property
    def label(self) -> str:
        """ "GroupNorm with G = 2", "custom axes (B, C), no mean subtracted", "BatchNorm"."""
        if self.method == "custom":
            centring = "mean subtracted" if self.centred else "no mean subtracted"
            return f"custom axes ({', '.join(self.axes or ())}), {centring}"
        if self.groups is not None:
            return f"{METHODS[self.method].label} with G = {self.groups}"
        return METHODS[self.method].label

    @property
    def shape_text(self) -> str:
        return LAYOUTS[self.layout].shape_text(self.shape)


def dependence_ids(
    method: str, layout: str, shape: tuple[int, ...], groups: int | None = None
) -> np.ndarray:
    """Each cell's group read off the method's reference module: two cells are in one group
    when one's output depends on the other's input (a nonzero Jacobian entry, at a seeded
    input), ids 0, 1, … in flat order of first appearance. For a method with statistics
    these are group_ids' groups (the tests check it); for DyT every cell is its own."""
    m = METHODS[method]
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    mod = m.build(layout, shape, groups).double()
    jac = torch.autograd.functional.jacobian(lambda t: m.apply(t, layout, module=mod), x)
    n = x.numel()
    _, labels = connected_components(jac.reshape(n, n).abs().numpy() > 0, directed=False)
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    return np.argsort(np.argsort(first))[inverse].reshape(shape)


def cell_name(layout: str, cell: Sequence[int]) -> str:
    """`B1 T0 C3`: a cell's name in the flat view and the keyboard list."""
    return " ".join(f"{a}{i}" for a, i in zip(LAYOUTS[layout].axes, cell, strict=True))


def cell_names(case: Case) -> tuple[str, ...]:
    """Every cell's name, in flat (row-major) order."""
    cells = np.stack(np.unravel_index(np.arange(math.prod(case.shape)), case.shape), axis=1)
    return tuple(cell_name(case.layout, c) for c in cells)


def rng_for(kind: str, seed: int) -> random.Random:
    """One random stream per (kind, seed): the same link gives the same exercise."""
    return random.Random(f"{kind}:{seed}")


def pick(pool: Sequence[str], kind: str, seed: int) -> str:
    """An item of `pool` for `seed`; consecutive seeds never repeat one ("next" varies it).

    Seeds run through shuffled blocks of the pool; a block whose first item equals
    the previous block's last has its first two swapped.
    """
    n = len(pool)

    def block(b: int) -> list[str]:
        order = list(pool)
        random.Random(f"{kind}:block:{b}").shuffle(order)
        return order

    b, i = divmod(seed, n)
    order = block(b)
    if b > 0 and n > 2 and order[0] == block(b - 1)[-1]:
        order[0], order[1] = order[1], order[0]
    return order[i]


def random_case(rng: random.Random, method: str, max_cells: int = 48) -> Case:
    """A small shape (8 to `max_cells` elements, a readable flat view) for `method`."""
    layout = rng.choice(tuple(LAYOUTS))
    for _ in range(500):
        if layout == "BTC":
            shape = (rng.randint(1, 3), rng.randint(2, 4), rng.choice((2, 3, 4, 6)))
        else:
            shape = (rng.randint(1, 2), rng.choice((2, 3, 4)), rng.randint(1, 3), rng.randint(2, 3))
        C = shape[LAYOUTS[layout].channel_axis]
        grouped_ok = not METHODS[method].grouped or C >= 4
        if 8 <= math.prod(shape) <= max_cells and grouped_ok:
            break
    groups = axes = None
    centred = True
    if METHODS[method].grouped:
        groups = rng.choice([g for g in range(2, C) if C % g == 0])
    if method == "custom":
        names = LAYOUTS[layout].axes
        chosen = set(rng.sample(names, rng.randint(1, len(names))))
        axes = tuple(a for a in names if a in chosen)
        centred = rng.random() < 0.75
    return Case(layout, shape, method, groups, axes, centred)


def interesting_case(rng: random.Random, method: str, max_cells: int = 48) -> Case:
    """A random case whose groups hold at least 2 cells, and that has at least 2 groups."""
    for _ in range(200):
        case = random_case(rng, method, max_cells)
        con = case.contract()
        if con.group_size >= 2 and con.n_stats >= 2:
            return case
    return case  # pragma: no cover (never reached for the registry's methods)


# ---- the exercise, its answer and its grade ---------------------------------------------


@dataclass(frozen=True)
class Exercise:
    """One question: what to show, the answer form, the truth and the explanation."""

    kind: str  # the section slug
    seed: int
    prompt: str  # markdown
    form: str  # one of FORMS
    truth: tuple[str, ...]  # accepted option keys | correct cell indices | true numbers
    explanation: tuple[str, ...]  # markdown sentences, computed from the numbers
    link: tuple[str, str]  # (page URL path, title): the page that shows why
    case: Case | None = None
    marked: tuple[int, ...] | None = None  # the marked cell
    colour: str = "none"  # the grid's colouring: "none", "groups" (partition), "values"
    values: tuple[float, ...] = ()  # x, flattened (shown when colour is "values")
    options: tuple[tuple[str, str], ...] = ()  # (key, label), for "choice"
    fields: tuple[str, ...] = ()  # one label per number, for "numbers"
    tolerance: tuple[float, ...] = ()  # absolute tolerance per number
    table: tuple[tuple[str, ...], ...] = ()  # rows of a small table (first row: header)

    @property
    def n_cells(self) -> int:
        return math.prod(self.case.shape) if self.case else 0

    @property
    def answer_text(self) -> str:
        """The right answer in words."""
        if self.form == "choice":
            labels = dict(self.options)
            return " or ".join(f"**{labels[k]}**" for k in self.truth)
        if self.form == "numbers":
            return ", ".join(
                f"{f} **{_num(float(v))}**" for f, v in zip(self.fields, self.truth, strict=True)
            )
        n = len(self.to_pick)
        return (
            f"the {n} other cell{'s' if n != 1 else ''} of the marked cell's group "
            f"({n + 1} with the marked cell, which is given)"
        )

    @property
    def to_pick(self) -> tuple[int, ...]:
        """cells: what a student picks, the marked cell's group without the marked cell
        (it is given: picking it or not changes nothing). One rule for feedback, answer
        and tally."""
        marked = _marked_index(self)
        return tuple(sorted({int(t) for t in self.truth} - {marked}))


def _num(v: float | str) -> str:
    v = float(v)
    return str(int(v)) if v.is_integer() else f"{v:.4g}"


def parse_answer(ex: Exercise, raw: object) -> str:
    """`raw` (text from a widget, a link or a database) as the canonical answer string.

    cells: sorted flat indices "0,3,7"; choice: the option key; numbers: "a;b".

    Raises:
        AnswerError: unreadable or out of range (the message never repeats the input).
    """
    text = str(raw)
    if len(text) > MAX_ANSWER_CHARS:
        raise AnswerError("the answer is too long")
    text = text.strip()
    if ex.form == "choice":
        if text not in dict(ex.options):
            raise AnswerError("that is not one of the options")
        return text
    parts = [p.strip() for p in text.replace(";", ",").split(",") if p.strip()]
    if ex.form == "cells":
        if not all(p.isascii() and p.isdigit() and len(p) <= 6 for p in parts):
            raise AnswerError("cells are written as whole numbers")
        cells = sorted({int(p) for p in parts})
        if cells and cells[-1] >= ex.n_cells:
            raise AnswerError(f"the tensor has {ex.n_cells} cells")
        return ",".join(map(str, cells))
    try:
        nums = [float(p) for p in parts]
    except ValueError:
        raise AnswerError("expected numbers") from None
    if len(nums) != len(ex.fields) or not all(math.isfinite(v) for v in nums):
        raise AnswerError(f"expected {len(ex.fields)} finite number(s)")
    return ";".join(repr(v) for v in nums)


@dataclass(frozen=True)
class Verdict:
    """The grade of one answer, with the words a student reads."""

    correct: bool
    headline: str
    missed: tuple[int, ...] = ()  # cells: in the group, not picked
    extra: tuple[int, ...] = ()  # cells: picked, not in the group
    note: str = ""  # cells: said when the marked cell was picked too (it is given)

    @property
    def message(self) -> str:
        """What the student reads: the headline, then the note if there is one."""
        return f"{self.headline} {self.note}" if self.note else self.headline


GIVEN_NOTE = "The marked cell itself is given: picking it changes nothing."


def _cells(key: str) -> set[int]:
    return {int(p) for p in key.split(",") if p}


def grade(ex: Exercise, raw: object) -> Verdict:
    """Grade an answer (any readable form: see `parse_answer`).

    Raises:
        AnswerError: the answer cannot be read.
    """
    key = parse_answer(ex, raw)
    if ex.form == "choice":
        ok = key in ex.truth
        return Verdict(ok, "Correct." if ok else f"Not quite: the answer is {ex.answer_text}.")
    if ex.form == "numbers":
        got = [float(v) for v in key.split(";")]
        off = [
            f"{f} is {_num(t)}, not {_num(g)}"
            for f, t, g, tol in zip(ex.fields, ex.truth, got, ex.tolerance, strict=True)
            if not abs(g - float(t)) <= tol
        ]
        return Verdict(not off, "Correct." if not off else "Not quite: " + "; ".join(off) + ".")
    marked = _marked_index(ex)
    want = set(ex.to_pick)
    picked = _cells(key) - {marked}
    given = GIVEN_NOTE if marked in _cells(key) else ""
    missed, extra = tuple(sorted(want - picked)), tuple(sorted(picked - want))
    if not missed and not extra:
        others = f"all {len(want)} other cells" if len(want) != 1 else "the 1 other cell"
        headline = f"Correct: {others} of the marked cell's group, and no other."
        return Verdict(True, headline, note=given)
    parts = [f"{len(missed)} missed" if missed else "", f"{len(extra)} extra" if extra else ""]
    return Verdict(False, f"Not quite: {', '.join(p for p in parts if p)}.", missed, extra, given)


def _marked_index(ex: Exercise) -> int:
    assert ex.case is not None and ex.marked is not None
    return int(np.ravel_multi_index(ex.marked, ex.case.shape))


def describe(ex: Exercise, key: str) -> str:
    """A canonical answer as one short label (a bar of the class's answer chart)."""
    if ex.form == "choice":
        return dict(ex.options).get(key, "?")
    if ex.form == "numbers":
        return ", ".join(_num(float(v)) for v in key.split(";"))
    v = grade(ex, key)
    return "all right" if v.correct else v.headline.removeprefix("Not quite: ").rstrip(".")


@dataclass(frozen=True)
class TallyRow:
    label: str
    count: int
    correct: bool


def tally(ex: Exercise, counts: Mapping[str, int]) -> tuple[TallyRow, ...]:
    """A class's answers (canonical string -> how many) as labelled rows, most first.

    Answers with the same label (cell sets with as many misses) share a row; answers
    that cannot be read are dropped.
    """
    rows: dict[str, list[int | bool]] = {}
    for key, n in counts.items():
        try:
            label, ok = describe(ex, key), grade(ex, key).correct
        except AnswerError:
            continue
        row = rows.setdefault(label, [0, ok])
        row[0] = int(row[0]) + int(n)
    out = [TallyRow(k, int(c), bool(ok)) for k, (c, ok) in rows.items()]
    return tuple(sorted(out, key=lambda r: (-r.count, r.label)))
