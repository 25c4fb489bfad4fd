"""The Practice page when the class's database fails: a clear message, no exception box.

A SQLite file write-locked by another process (a teacher's Reveal, a student's answer)
and a read-only database (a student's answer), under AppTest through app.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import assert_clean, texts, unescaped
from test_classroom_db import LOCKER

from benchmarks.common import app_test
from normviz import practice
from normviz.classroom import Classroom
from normviz.practice import live

EX = practice.exercise("choose", 0)


def _run(query: dict[str, str]):  # type: ignore[no-untyped-def]
    at = app_test("practice", query, timeout=120)
    at.run()
    return at


def _send(code: str):  # type: ignore[no-untyped-def]
    """A student joins and sends an answer; the page after the click."""
    s = _run({"class": code})
    assert_clean(s)
    assert EX.prompt in texts(s)
    s.radio(key=f"pr_choice_{code}-1").set_value(EX.truth[0])
    s.run()
    s.button(key="pr_submit").click().run()
    return s


def _unavailable(at, reason: str) -> None:  # type: ignore[no-untyped-def]
    assert_clean(at)
    errors = [unescaped(e.value) for e in at.error]
    assert any(f"unavailable right now ({reason})" in e for e in errors), errors
    assert not any(live.SENT in m.value for m in at.success)  # not acknowledged


def test_a_locked_database_gives_students_and_teachers_a_clear_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "classes.db"
    monkeypatch.setenv("NORMVIZ_DB_URL", f"sqlite:///{path}")
    opened = Classroom(f"sqlite:///{path}").open("choose", 0, client="teacher")
    code = opened.info.code
    teacher = _run({"kind": "choose"})
    teacher.text_input(key="pr_resume_code").set_value(code)
    teacher.text_input(key="pr_resume_key").set_value(opened.teacher_key)
    teacher.button(key="pr_resume").click().run()
    assert "Live class, question 1" in texts(teacher)
    locker = subprocess.Popen(
        [sys.executable, "-c", LOCKER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert locker.stdout is not None and locker.stdout.readline() == "locked\n"
        _unavailable(_send(code), "its database is busy")
        teacher.button(key="pr_reveal").click().run()
        _unavailable(teacher, "its database is busy")
        assert "Live class, question 1" in texts(teacher)  # still the teacher's view
        assert locker.poll() is None
    finally:
        locker.communicate("go\n", timeout=60)
    assert not Classroom(f"sqlite:///{path}").get(code).revealed


def test_a_read_only_database_gives_students_a_clear_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "classes.db"
    room = Classroom(f"sqlite:///{path}")
    code = room.open("choose", 0, client="teacher").info.code
    room.engine.dispose()
    monkeypatch.setenv("NORMVIZ_DB_URL", f"sqlite:///file:{path}?mode=ro&uri=true")
    _unavailable(_send(code), "its database is read-only")
