"""The Practice page (/practice) under AppTest: every exercise kind answered right and wrong,
the score, "next", links, hostile class codes, and a live class (teacher and students)."""

from __future__ import annotations

import json

import keys
import pytest
from conftest import assert_clean, texts, url_value

from benchmarks.common import app_test
from normviz import practice
from normviz.classroom import Classroom

KINDS = list(practice.MAKERS)


def run_app(page: str, query: dict[str, str]):  # type: ignore[no-untyped-def]
    """AppTest through app.py on every run (a button's click survives the run)."""
    at = app_test(page, query, timeout=120)
    at.run()
    return at


@pytest.fixture(autouse=True)
def db(tmp_path, monkeypatch) -> str:
    url = f"sqlite:///{tmp_path / 'classes.db'}"
    monkeypatch.setenv("NORMVIZ_DB_URL", url)
    return url


def _answer(at, ex: practice.Exercise, tag: str, right: bool) -> None:
    """Fill the exercise's widgets with the right answer, or a wrong one."""
    if ex.form == "cells":
        names = practice.cell_names(ex.case)
        picked = [names[int(i)] for i in ex.truth]
        at.multiselect(key=f"pr_cells_{tag}").set_value(picked if right else picked[:1])
    elif ex.form == "choice":
        wrong = next(k for k, _ in ex.options if k not in ex.truth)
        at.radio(key=f"pr_choice_{tag}").set_value(ex.truth[0] if right else wrong)
    else:
        for field, value, tol in zip(ex.fields, ex.truth, ex.tolerance, strict=True):
            v = float(value) + (0 if right else 10 * tol + 1)
            at.number_input(key=f"pr_num_{tag}_{field}").set_value(int(v) if tol == 0 else v)


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_right_then_wrong(kind: str) -> None:
    at = run_app("practice", {"kind": kind})
    assert_clean(at)
    assert not at.warning, [w.value for w in at.warning]  # kind without class: no warning
    assert url_value(at, "kind") == kind
    ex = practice.exercise(kind, 0)
    assert ex.prompt in texts(at)
    assert at.button(key="pr_check").disabled or ex.form == "cells"
    _answer(at, ex, f"{kind}-0", right=True)
    at.run()
    at.button(key="pr_check").click().run()
    assert_clean(at)
    assert any(s.value.startswith("Correct") for s in at.success), texts(at)
    assert "**Answer:**" in texts(at) and ex.explanation[0] in texts(at)
    assert "1 of 1 right" in texts(at)
    at.button(key="pr_next").click().run()
    assert at.session_state["seed"] == 1 and url_value(at, "seed") == "1"
    ex1 = practice.exercise(kind, 1)
    assert ex1.prompt in texts(at)
    _answer(at, ex1, f"{kind}-1", right=False)
    at.run()
    at.button(key="pr_check").click().run()
    assert_clean(at)
    assert any(e.value.startswith("Not quite") for e in at.error), texts(at)
    assert "1 of 2 right (50 %)" in texts(at)


def test_cells_grade_shows_missed_and_extra() -> None:
    at = run_app("practice", {"kind": "cells"})
    ex = practice.exercise("cells", 0)
    names = practice.cell_names(ex.case)
    outside = next(n for i, n in enumerate(names) if str(i) not in ex.truth)
    marked = practice.cell_name(ex.case.layout, ex.marked)
    group = [names[int(i)] for i in ex.truth if names[int(i)] != marked]
    at.multiselect(key="pr_cells_cells-0").set_value([*group[1:], outside])
    at.run()
    at.button(key="pr_check").click().run()
    assert "Not quite: 1 missed, 1 extra." in [e.value for e in at.error]
    (grid,) = at.get("bidi_component")  # the tensor grid (ui/tensorgrid.py)
    marks = json.loads(grid.proto.json)["marks"]
    assert len(marks["missed"]) == 1 and len(marks["extra"]) == 1


def test_name_the_method_shows_and_grades_dyt() -> None:
    """/practice?kind=name at a seed whose pattern is DyT's: every cell a group of its own
    in the grid it ships, DyT among the options, a DyT answer graded right."""
    seed = next(s for s in range(40) if practice.exercise("name", s).truth == ("dyt",))
    ex = practice.exercise("name", seed)
    at = run_app("practice", {"kind": "name", "seed": str(seed)})
    assert_clean(at)
    assert ex.prompt in texts(at)
    (grid,) = at.get("bidi_component")
    shipped = json.loads(grid.proto.json)
    assert sorted(shipped["group"]) == list(range(ex.n_cells)) and shipped["m"] == 1
    assert shipped["mean"] == [] and shipped["var"] == []  # nothing to give away
    assert shipped["text"] == [str(i + 1) for i in range(ex.n_cells)]  # each its own number
    radio = at.radio(key=f"pr_choice_name-{seed}")
    assert "DyT" in radio.options, radio.options  # the labels, as the page shows them
    radio.set_value("dyt")
    at.run()
    at.button(key="pr_check").click().run()
    assert_clean(at)
    assert any(s.value == "Correct." for s in at.success), texts(at)
    assert "**Answer:** **DyT**." in texts(at) and "pools nothing" in texts(at)


@pytest.mark.parametrize("query", [{"kind": "count"}, {"kind": "count", "class": ""}])
def test_a_solo_link_carries_no_class(query: dict[str, str]) -> None:
    """Practising alone, the URL names the exercise and no class (not even `class=`)."""
    at = run_app("practice", query)
    assert_clean(at)
    assert not at.warning, [w.value for w in at.warning]
    assert url_value(at, "kind") == "count" and url_value(at, "seed") == "0"
    assert "class" not in at.query_params
    at.button(key="pr_next").click().run()
    assert url_value(at, "seed") == "1" and "class" not in at.query_params


def test_a_bad_kind_in_a_link_falls_back_with_a_warning() -> None:
    at = run_app("practice", {"kind": "bogus", "class": ""})
    assert_clean(at)
    assert any("`kind=bogus` is not valid" in w.value for w in at.warning)
    assert keys.knob(at, "practice", "kind") == "cells"


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("`**boom**`<script>alert(1)</script>", "That is not a class code"),
        ("AAAAAAAAAA", "No open class has this code"),
        ("x" * 150, "That is not a class code"),
    ],
)
def test_bad_class_codes_get_a_clear_message(code: str, message: str) -> None:
    at = run_app("practice", {"class": code})
    assert_clean(at)
    errors = [e.value for e in at.error]
    assert any(message in e for e in errors), errors
    assert not any("boom" in e or "script" in e for e in errors)
    assert keys.knob(at, "practice", "kind") == "cells"  # practising alone below the message
    assert practice.exercise("cells", 0).prompt in texts(at)


def test_a_live_class_in_apptest(db: str) -> None:
    teacher = run_app("practice", {"kind": "choose"})
    teacher.button(key="pr_start").click().run()
    assert_clean(teacher)
    code = keys.knob(teacher, "practice", "class")
    assert url_value(teacher, "class") == code
    assert any(m.value == code for m in teacher.metric)
    assert "Live class, question 1" in texts(teacher)
    ex = practice.exercise("choose", 0)
    wrong = next(k for k, _ in ex.options if k not in ex.truth)
    students = []
    for answer in (ex.truth[0], wrong, wrong):
        s = run_app("practice", {"class": code})
        assert_clean(s)
        assert not s.warning, [w.value for w in s.warning]
        assert ex.prompt in texts(s)
        assert url_value(s, "kind") == "choose"  # the class's exercise, not the solo default
        s.radio(key=f"pr_choice_{code}-1").set_value(answer)
        s.run()
        s.button(key="pr_submit").click().run()
        assert any("Your answer is in" in m.value for m in s.success)
        students.append(s)
    teacher.run()
    labels = dict(ex.options)
    shown = teacher.table[0].value
    assert dict(zip(shown.index, shown["students"], strict=True)) == {
        labels[wrong]: 2,
        labels[ex.truth[0]]: 1,
    }
    teacher.button(key="pr_reveal").click().run()
    for s, right in zip(students, (True, False, False), strict=True):
        s.run()
        assert "**Answer:**" in texts(s)
        assert any(m.value.startswith("Correct") for m in s.success) == right
    teacher.selectbox(key="pr_next_kind").set_value("count")
    teacher.button(key="pr_push").click().run()
    assert "Live class, question 2" in texts(teacher)
    students[0].run()
    assert practice.exercise("count", 1).prompt in texts(students[0])
    assert url_value(students[0], "kind") == "count"
    room = Classroom(db)
    assert room.get(code).question == 2
    teacher.button(key="pr_end").click().run()
    assert "class" not in teacher.query_params  # the teacher practises alone again
    students[1].run()
    assert any("No open class" in e.value for e in students[1].error)
    assert "class" not in students[1].query_params
