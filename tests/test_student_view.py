"""A live-class student's page takes the reveal and the next question within its poll
(Chromium): no run of app.py for them.

A reveal used to make every student's page rerun in full at once (the poll saw the change
and called st.rerun()): 300 full runs queued on the processes' run turns (docs/serving.md,
benchmarks/classload.py). The poll now draws the newer view itself (ui/student.py).
Here the session's server logs each run of app.py (ui.route.RUN_LOG, as in
tests/test_fragments.py); the teacher acts through the store, as another browser would.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import assert_no_exception, server_db, wait_done

from normviz import practice
from normviz.classroom import Classroom
from normviz.practice import live

pytestmark = pytest.mark.browser
TEACHER = "test-teacher"  # the opener's browser id: the class's teacher
TIMEOUT = 120_000  # ms


def _runs(log: Path) -> list[str]:
    return log.read_text().splitlines()


def test_the_reveal_and_the_next_question_reach_a_student_without_a_page_run(
    browser, counted
) -> None:
    url, log = counted  # the session's server, its run log and its database
    room = Classroom(server_db())
    code = room.open("choose", 0, TEACHER).info.code
    ex = practice.exercise("choose", 0)
    right = dict(ex.options)[ex.truth[0]]
    before = len(_runs(log))  # the session's server has run other tests' pages
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    p = ctx.new_page()
    p.set_default_timeout(TIMEOUT)
    try:
        p.goto(f"{url}/practice?class={code}")
        p.get_by_text(ex.prompt.split("\n")[0][:40]).first.wait_for()
        wait_done(p, TIMEOUT)
        assert "app practice" in _runs(log)[before:]  # the hook counts: the link ran app.py

        p.locator(f".st-key-pr_choice_{code}-1").get_by_text(right, exact=True).click()
        p.wait_for_function("() => !document.querySelector('.st-key-pr_submit button').disabled")
        p.locator(".st-key-pr_submit button").click()
        p.get_by_text(live.SENT.split(".")[0]).wait_for()
        assert room.answer_of(code, 1, _browser_id(ctx)) == ex.truth[0]
        wait_done(p, TIMEOUT)
        sent = len(_runs(log))  # the page's own widgets ran app.py (as a click does)

        room.reveal(code, TEACHER)
        p.get_by_text("Answer:").first.wait_for()  # within a poll (every 2 s)
        alerts = " ".join(p.locator("[data-testid=stAlert]").all_inner_texts())
        assert "Correct" in alerts, alerts  # graded with this browser's own answer
        assert not p.locator(".st-key-pr_submit").is_visible()  # answers are closed

        room.next(code, TEACHER, "choose", 1)
        p.get_by_text("Question 2").wait_for()
        assert p.locator(f".st-key-pr_choice_{code}-2-live").is_visible()  # open again
        assert not p.get_by_text(live.SENT.split(".")[0]).is_visible()
        p.wait_for_timeout(2500)  # one more poll: nothing asks for a page run
        wait_done(p, TIMEOUT)
        assert_no_exception(p)
        assert _runs(log)[sent:] == []  # no run of app.py since the answer was sent
    finally:
        ctx.close()


def _browser_id(ctx) -> str:  # type: ignore[no-untyped-def]
    """The browser id cookie the app gave this context (ui/browser.py)."""
    (cookie,) = [c for c in ctx.cookies() if c["name"] == "normviz_browser"]
    return cookie["value"]
