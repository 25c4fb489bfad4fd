"""Who is who in a live class, under AppTest through app.py: the teacher key is never on
the page unasked (presenter mode included), "Show teacher key" shows it and it makes
another session a teacher, and one browser opens a limited number of classes.

AppTest sends no cookie, so each AppTest session is its own browser (ui.identity).
"""

from __future__ import annotations

from pathlib import Path

import keys
import pytest
from conftest import assert_clean, run_app, texts

from benchmarks.common import app_test
from normviz.classroom import Limits
from normviz.practice import live


def _everything(at) -> str:  # type: ignore[no-untyped-def]
    """Every element the run sent, as its protobuf text (labels, values, code, help)."""
    out: list[str] = []

    def walk(node) -> None:  # type: ignore[no-untyped-def]
        if (proto := getattr(node, "proto", None)) is not None:
            out.append(str(proto))
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at._tree)
    return "\n".join(out)


def _has(at, key: str) -> bool:  # type: ignore[no-untyped-def]
    return any(b.key == key for b in at.button)


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"sqlite:///{tmp_path / 'classes.db'}"
    monkeypatch.setenv("NORMVIZ_DB_URL", url)
    return url


@pytest.mark.parametrize("present", ["1", "0"])
def test_after_start_the_teacher_key_is_nowhere_on_the_page(db: str, present: str) -> None:
    teacher = run_app("practice", {"kind": "choose", "present": present})
    teacher.button(key="pr_start").click().run()
    assert_clean(teacher)
    code = teacher.session_state[keys.key("practice", "class")]
    key = teacher.session_state["pr_teaching"][code]  # held by the session, to show on request
    assert "Live class, question 1" in texts(teacher)
    page = _everything(teacher)
    assert code in page and key not in page
    assert _has(teacher, "pr_reveal")  # the teacher view, recognised without the key
    teacher.run()  # the next poll's run: still nowhere
    assert key not in _everything(teacher)

    teacher.toggle(key=f"pr_show_key_{code}").set_value(True).run()  # asked for
    assert_clean(teacher)
    assert key in _everything(teacher)
    assert live.TEACHER_KEY in texts(teacher)

    other = run_app("practice", {"class": code})  # another browser: a student ...
    assert not _has(other, "pr_reveal") and not _has(other, "pr_end")
    assert key not in _everything(other)
    other = run_app("practice", {"kind": "choose"})  # ... until it resumes with the key
    other.text_input(key="pr_resume_code").set_value(code)
    other.text_input(key="pr_resume_key").set_value(key)
    other.button(key="pr_resume").click().run()
    assert_clean(other)
    assert _has(other, "pr_reveal")


def test_a_browser_that_lost_the_key_makes_a_new_one(db: str) -> None:
    teacher = run_app("practice", {"kind": "choose"})
    teacher.button(key="pr_start").click().run()
    code = teacher.session_state[keys.key("practice", "class")]
    old = teacher.session_state["pr_teaching"].pop(code)  # as after a reload
    teacher.toggle(key=f"pr_show_key_{code}").set_value(True).run()
    assert live.KEY_GONE in texts(teacher) and old not in _everything(teacher)
    teacher.button(key="pr_rekey").click().run()
    assert_clean(teacher)
    new = teacher.session_state["pr_teaching"][code]
    assert new != old and new in _everything(teacher)


def test_one_browser_opens_a_limited_number_of_classes(db: str) -> None:
    most = Limits().opens_per_client
    teacher = run_app("practice", {"kind": "choose"})
    for _ in range(most):
        teacher.button(key="pr_start").click().run()
        assert _has(teacher, "pr_end")
        teacher.button(key="pr_end").click().run()  # ending one does not give it back
    teacher.button(key="pr_start").click().run()
    assert_clean(teacher)
    errors = [e.value for e in teacher.error]
    assert any(
        f"This browser has opened {most} classes in the last 60 minutes" in e for e in errors
    ), errors
    assert not _has(teacher, "pr_reveal")


def test_a_teacher_back_in_a_new_session_is_told_so_once(db: str) -> None:
    """Another session of the teaching browser (AppTest: the same browser id, as after a
    reload or a move to another process) gets the teacher view and one notice."""
    teacher = run_app("practice", {"kind": "choose"})
    teacher.button(key="pr_start").click().run()
    assert live.BACK not in texts(teacher)  # the session that opened it knows
    code = teacher.session_state[keys.key("practice", "class")]
    browser = teacher.session_state["pr_student"]
    again = app_test("practice", {"class": code})
    again.session_state["pr_student"] = browser  # the same browser, a new session
    again.run()
    assert_clean(again)
    assert _has(again, "pr_reveal") and live.BACK in texts(again)
    again.run()
    assert _has(again, "pr_reveal") and live.BACK not in texts(again)
