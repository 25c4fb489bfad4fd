"""Issue 26 item 6: for every exercise kind, the counts a student reads (the answer, the
explanation, the feedback) agree with the set that is graded and with the class's tally;
the marked cell is given, and picking it is graded as the words say. Torch is the oracle:
a cell belongs to the marked cell's group exactly when it moves the marked cell's output
(autograd through torch.nn)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch
from conftest import assert_clean
from test_core import torch_reference

import normviz
from normviz import practice
from normviz.practice import common, grade

SEEDS = range(25)
KINDS = [s.slug for s in practice.SECTIONS]
CHOICE_KINDS = [k for k in KINDS if practice.exercise(k, 0).form == "choice"]


def _y(case: common.Case, x: torch.Tensor) -> torch.Tensor:
    """torch.nn's output (normviz's for custom axes, which no torch module reduces)."""
    if case.method == "custom":
        return normviz.normalize(x, "custom", case.layout, **case.norm_kwargs()).output
    return torch_reference(case.method, case.layout, x, case.groups, 1e-5, None, None)


def torch_group(case: common.Case, marked: tuple[int, ...]) -> set[int]:
    """The flat indices of the cells whose value moves y at `marked`: nudge each cell in
    turn and see whether torch's output there changes."""
    x = torch.randn(case.shape, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    y0 = _y(case, x)[marked]
    out = set()
    for j in range(x.numel()):
        x2 = x.clone().reshape(-1)
        x2[j] += 0.5
        if abs(float(_y(case, x2.reshape(case.shape))[marked] - y0)) > 1e-9:
            out.add(j)
    return out


def _flat(ex: practice.Exercise) -> int:
    return int(np.ravel_multi_index(ex.marked, ex.case.shape))


def _cells(idx: object) -> str:
    return ",".join(map(str, sorted(idx)))  # type: ignore[call-overload]


def _right_total(ex: practice.Exercise, answers: dict[str, int]) -> int:
    return sum(n for key, n in answers.items() if grade(ex, key).correct)


@pytest.mark.parametrize("seed", SEEDS)
def test_same_statistics_says_graded_and_tallied_the_same_count(seed: int) -> None:
    ex = practice.exercise("cells", seed)
    marked = _flat(ex)
    group = torch_group(ex.case, ex.marked)
    assert marked in group
    others = group - {marked}
    n = len(others)
    assert set(ex.to_pick) == others  # the graded set is torch's group without the marked cell
    # the words: answer, explanation, feedback each state n others (and n + 1 with it)
    assert re.search(rf"\bthe {n} other cells?\b", ex.answer_text), ex.answer_text
    assert f"({n + 1} with the marked cell, which is given)" in ex.answer_text
    assert f"m = {n + 1} cells, the marked cell and the {n} others to pick" in ex.explanation[0]
    plain, with_marked = grade(ex, _cells(others)), grade(ex, _cells(group))
    said = "the 1 other cell" if n == 1 else f"all {n} other cells"
    assert plain.correct and with_marked.correct and said in plain.headline
    assert with_marked.note == common.GIVEN_NOTE  # picking it is said, and changes nothing
    # the marked cell alone is graded as n missed, never as right
    alone = grade(ex, str(marked))
    assert not alone.correct and alone.headline == f"Not quite: {n} missed."
    # one fewer: 1 missed; one outside the group: 1 extra
    outside = next(i for i in range(ex.n_cells) if i not in group)
    assert grade(ex, _cells(sorted(others)[1:])).headline == "Not quite: 1 missed."
    assert grade(ex, _cells(others | {outside})).headline == "Not quite: 1 extra."
    # the tally counts right exactly the answers graded right, in one row
    answers = {_cells(others): 2, _cells(group): 3, _cells(sorted(others)[1:]): 1, str(marked): 1}
    rows = practice.tally(ex, answers)
    assert [r.count for r in rows if r.correct] == [_right_total(ex, answers)] == [5]
    assert sum(r.count for r in rows) == sum(answers.values())
    # the revealed grid's words count the same cells as the answer
    words = practice.grid_alt(ex, ex.to_pick)
    assert any(w.startswith(f"Picked (sky blue, outlined), {n}:") for w in words), words


@pytest.mark.parametrize("seed", SEEDS)
def test_count_says_and_grades_torchs_numbers(seed: int) -> None:
    ex = practice.exercise("count", seed)
    m = len(torch_group(ex.case, (0,) * len(ex.case.shape)))
    n_stats = ex.n_cells // m
    assert re.findall(r"\*\*(\d+)\*\*", ex.answer_text) == [str(n_stats), str(m)]
    assert f"in groups of {m} make {ex.n_cells} / {m} = {n_stats} statistics" in ex.explanation[0]
    assert grade(ex, f"{n_stats};{m}").correct
    assert not grade(ex, f"{n_stats};{m + 1}").correct
    answers = {f"{n_stats}.0;{m}.0": 2, f"{n_stats};{m}": 1, f"{n_stats};{m + 1}": 4}
    rows = practice.tally(ex, answers)
    assert [r.count for r in rows if r.correct] == [_right_total(ex, answers)] == [3]


@pytest.mark.parametrize("seed", SEEDS)
def test_compute_lists_the_group_it_divides_by_and_grades_the_stated_y(seed: int) -> None:
    ex = practice.exercise("compute", seed)
    group = torch_group(ex.case, ex.marked)
    listed = ex.explanation[0].rsplit("holds ", 1)[1].rstrip(".").split(", ")
    assert len(listed) == len(group)
    assert f") / {len(group)} = " in ex.explanation[1]
    assert sorted(float(v) for v in listed) == sorted(ex.values[i] for i in group)
    (stated,) = re.findall(r"\*\*([^*]+)\*\*", ex.answer_text)
    assert grade(ex, stated).correct  # y as the answer writes it is graded right
    answers = {parse(ex, stated): 2, parse(ex, str(float(stated) + 1)): 1}
    rows = practice.tally(ex, answers)
    assert [r.count for r in rows if r.correct] == [_right_total(ex, answers)] == [2]


def parse(ex: practice.Exercise, raw: str) -> str:
    return practice.parse_answer(ex, raw)


@pytest.mark.parametrize("kind", CHOICE_KINDS)
@pytest.mark.parametrize("seed", range(10))
def test_choice_answers_name_exactly_the_options_graded_right(kind: str, seed: int) -> None:
    ex = practice.exercise(kind, seed)
    labels = dict(ex.options)
    named = re.findall(r"\*\*(.+?)\*\*", ex.answer_text)
    assert named == [labels[k] for k in ex.truth]
    assert [k for k in labels if grade(ex, k).correct] == [k for k in labels if k in ex.truth]
    answers = dict.fromkeys(labels, 1) | {ex.truth[0]: 3}
    rows = practice.tally(ex, answers)
    assert [r.count for r in rows if r.correct] == [_right_total(ex, answers)]
    assert {r.label for r in rows if r.correct} == {labels[k] for k in ex.truth}


def test_the_teachers_revealed_grid_picks_the_cells_the_answer_counts(
    tmp_path, monkeypatch
) -> None:
    """After the reveal the projector's grid outlines the n other cells the answer names
    (not the n + 1 of the group with the marked cell)."""
    from benchmarks.common import app_test
    from ui import tensorgrid

    monkeypatch.setenv("NORMVIZ_DB_URL", f"sqlite:///{tmp_path / 'classes.db'}")
    at = app_test("practice", {"kind": "cells"}, timeout=120)
    at.run()
    at.button(key="pr_start").click().run()
    at.button(key="pr_reveal").click().run()
    assert_clean(at)
    ex = practice.exercise("cells", 0)
    (grid,) = [e for e in at.get("bidi_component") if e.proto.component_name == tensorgrid.NAME]
    assert json.loads(grid.proto.json)["picked"] == list(ex.to_pick)  # (ui/tensorgrid.py)
    n = len(ex.to_pick)
    assert f"the {n} other cell" in "\n".join(str(m.value) for m in at.markdown)
