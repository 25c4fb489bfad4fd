"""Practice in Chromium: clicking cells, a teacher with 10 students, two servers sharing one
SQLite file, and a restart that keeps a class's answers.

The slow-poll and two-server tests start their own server(s) with NORMVIZ_DB_URL pointing
at a fresh SQLite file (their classes opened through the store). Every person is a
separate browser context driven with Playwright's async API (in its own thread, as
tests/test_classroom.py does), but the ten students of the teacher's class: light
websocket clients (benchmarks/classload.py's), ten more Chromium pages being the cost,
not the check.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import CHROMIUM, CHROMIUM_ARGS, ROOT, SHOTS, serve

from benchmarks.classload import Client, _click, _connect, _pick
from benchmarks.common import DONE_JS
from normviz import practice
from normviz.classroom import Classroom
from normviz.practice import live

pytestmark = pytest.mark.browser
TIMEOUT = 240_000  # ms: 11 sessions share two busy cores
STUDENTS = 10
KIND = "choose"


def _run(coro):  # type: ignore[no-untyped-def]
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


async def _done(p) -> None:
    await p.wait_for_timeout(300)
    await p.wait_for_function(DONE_JS, timeout=TIMEOUT, polling=100)


async def _problems(p) -> list[str]:
    out = ["exception element"] if await p.locator("[data-testid=stException]").count() else []
    body = await p.inner_text("body")
    return out + [w for w in ("Traceback", "internal error") if w in body]


@contextlib.asynccontextmanager
async def _browser():
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        b = await pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            await b.close()


async def _open(b, url: str, width: int = 1280):  # type: ignore[no-untyped-def]
    ctx = await b.new_context(viewport={"width": width, "height": 1000})
    p = await ctx.new_page()
    p.set_default_timeout(TIMEOUT)
    await p.goto(url)
    await _done(p)
    return p


async def _start_class(p) -> str:
    """In a solo view: start a class with the button beside the exercise; returns the code
    (the projected screen shows no teacher key)."""
    await p.locator(".st-key-pr_start button").first.click()  # (its help tooltip doubles it)
    await p.locator(".st-key-pr_qr img").wait_for()
    await _done(p)
    return (await p.locator("[data-testid=stMetricValue]").first.inner_text()).strip()


async def _answer(p, code: str, label: str) -> None:
    """A student picks the option `label` and sends it."""
    await p.locator(f".st-key-pr_choice_{code}-1").get_by_text(label, exact=True).click()
    await _done(p)
    await p.locator(".st-key-pr_submit button").click()
    await p.get_by_text("Your answer is in").wait_for()


async def _tally(p) -> dict[str, int]:
    rows = await p.evaluate(
        """() => [...document.querySelectorAll('[data-testid=stTable] tbody tr')]
                 .map(r => [...r.children].map(c => c.innerText.trim()))"""
    )
    return {r[0]: int(r[1]) for r in rows}


async def _until_tally(p, want: dict[str, int]) -> dict[str, int]:
    """Wait for the teacher's live view (it polls) to show exactly `want`."""
    for _ in range(TIMEOUT // 1000):
        got = await _tally(p)
        if got == want:
            return got
        await p.wait_for_timeout(1000)
    return await _tally(p)


def _plan() -> tuple[practice.Exercise, list[str]]:
    """The class's exercise, and each student's answer (a spread over the options)."""
    ex = practice.exercise(KIND, 0)
    right = dict(ex.options)[ex.truth[0]]
    labels = [right, *(label for _, label in ex.options if label != right)]
    return ex, [labels[i % 3] for i in range(STUDENTS)]


# ---- a teacher and 10 students --------------------------------------------------------------


def _exceptions(run) -> list[str]:  # type: ignore[no-untyped-def]
    return [el.exception.message for _f, el in run.elements if el.WhichOneof("type") == "exception"]


async def _light_student(url: str, code: str, label: str) -> dict:
    """A student over Streamlit's websocket, as the browser speaks it (benchmarks/
    classload.py's client: its own browser-id cookie, held widget values, the page's
    polling fragment on the server's interval): joins, picks `label`, sends it, then
    polls until the reveal arrives. What its runs wrote."""
    async with await _connect(url) as ws:
        c = Client(ws)
        c.query = f"class={code}"
        first = await c.run()
        radio = first.widget(f"pr_choice_{code}-1", "radio")
        runs = [first, await c.run((_pick(radio.id, label),))]
        runs.append(await c.run((_click(first.widget("pr_submit", "button").id),)))
        sent = live.SENT.split(".")[0] in runs[-1].texts()
        for _ in range(TIMEOUT // 1000):
            if "**Answer:**" in runs[-1].texts():
                break
            await asyncio.sleep(c.poll[1])
            runs.append(await c.run(poll=True))
    alerts = [el.alert.body for _f, el in runs[-1].elements if el.WhichOneof("type") == "alert"]
    return {
        "sent": sent,
        "revealed": "**Answer:**" in runs[-1].texts(),
        "verdict": " ".join(alerts),
        "problems": [e for r in runs for e in _exceptions(r)],
    }


async def _class(url: str) -> dict:
    """The teacher in Chromium (its tally, the reveal, the screenshot); the ten students
    on light clients (a student's page in Chromium: the tests below and
    tests/test_classroom_roles.py)."""
    _ex, answers = _plan()
    async with _browser() as b:
        teacher = await _open(b, f"{url}/practice?kind={KIND}", width=1400)
        code = await _start_class(teacher)
        students = [asyncio.create_task(_light_student(url, code, a)) for a in answers]
        seen = await _until_tally(teacher, dict(Counter(answers)))
        await teacher.locator(".st-key-pr_reveal button").click()
        # every student's page polls and reruns on the reveal
        out = await asyncio.gather(*students)
        await _done(teacher)
        await teacher.screenshot(path=str(SHOTS / "practice-class.png"))
        problems = [await _problems(teacher), *(o["problems"] for o in out)]
    return {"seen": seen, "students": out, "problems": problems, "code": code}


def test_a_teacher_and_ten_students(server) -> None:
    ex, answers = _plan()
    out = _run(_class(server))
    assert out["seen"] == dict(Counter(answers))  # exactly the submitted answers
    assert all(s["sent"] for s in out["students"])
    right = dict(ex.options)[ex.truth[0]]
    for answer, student in zip(answers, out["students"], strict=True):
        text = student["verdict"]
        assert student["revealed"] and ("Correct" in text) == (answer == right), (answer, text)
    assert not any(out["problems"]), out["problems"]


# ---- a click while the poll's run is starting (a loaded server) --------------------------------


async def _click_in_poll(url: str, code: str) -> list[dict]:
    """Students pick an answer while their poll's fragment run is starting (slowly: the
    server runs tests/slow_runs); each then sends it. The three students at once, in a
    class opened through the store (a teacher's page would only add slow runs)."""
    _ex, answers = _plan()
    async with _browser() as b:

        async def student(answer: str) -> dict:
            p = await _open(b, f"{url}/practice?class={code}")
            await p.wait_for_timeout(2500)  # the poll's run (2 s apart) is under way
            await p.locator(f".st-key-pr_choice_{code}-1").get_by_text(answer, exact=True).click()
            await _done(p)
            await p.wait_for_timeout(4500)  # two more polls: the server's value is settled
            got = {"disabled": await p.locator(".st-key-pr_submit button").is_disabled()}
            if not got["disabled"]:  # else the answer was lost on the server
                await p.locator(".st-key-pr_submit button").click()
                await p.get_by_text("Your answer is in").wait_for()
            await p.context.close()
            return got

        return list(await asyncio.gather(*(student(a) for a in answers[:3])))


def test_a_click_during_a_slow_poll_keeps_its_value(tmp_path) -> None:
    """Streamlit's fast reruns started the click's run beside the poll's; the poll's older
    widget values (no answer) landed last and "Send my answer" stayed disabled, as in
    CI with 10 students. One run per session (.streamlit/config.toml) keeps the click."""
    path = os.pathsep.join(
        p for p in (str(ROOT / "tests" / "slow_runs"), os.environ.get("PYTHONPATH")) if p
    )
    env = {"NORMVIZ_DB_URL": f"sqlite:///{tmp_path / 'classes.db'}", "PYTHONPATH": path}
    opened = Classroom(env["NORMVIZ_DB_URL"]).open(KIND, 0, "test-teacher")
    with serve(env) as url:
        out = _run(_click_in_poll(url, opened.info.code))
    assert [o["disabled"] for o in out] == [False, False, False], out
    # the three answers, each once, in the class's store
    ex, answers = _plan()
    key = {label: k for k, label in ex.options}
    counts = Classroom(env["NORMVIZ_DB_URL"]).counts(opened.info.code, "test-teacher", 1)
    assert counts == dict(Counter(key[a] for a in answers[:3]))


# ---- two servers, one SQLite file, and a restart ----------------------------------------------


async def _resume_in(p, code: str, key: str) -> None:
    """Take up a class's teacher view with its code and key (the fold at the page's foot)."""
    await p.get_by_text("Resume teaching a class").click()
    for name, value in (("code", code), ("key", key)):
        box = p.locator(f".st-key-pr_resume_{name} input")
        await box.fill(value)
        await box.press("Enter")
        await _done(p)
    await p.locator(".st-key-pr_resume button").click()
    await p.get_by_text("Live class, question 1").wait_for()
    await _done(p)


async def _two_servers(url_a: str, url_b: str, code: str, key: str) -> dict:
    _ex, answers = _plan()
    async with _browser() as b:
        teacher = await _open(b, f"{url_a}/practice", width=1400)
        await _resume_in(teacher, code, key)
        students = [await _open(b, f"{u}/practice?class={code}") for u in (url_b, url_a, url_b)]
        for p, a in zip(students, answers, strict=False):
            await _answer(p, code, a)
        seen = await _until_tally(teacher, dict(Counter(answers[:3])))
        problems = await asyncio.gather(*(_problems(p) for p in [teacher, *students]))
    return {"seen": seen, "problems": problems}


async def _resume(url: str, code: str, key: str) -> dict:
    async with _browser() as b:
        p = await _open(b, f"{url}/practice", width=1400)
        await _resume_in(p, code, key)
        return {"seen": await _until_tally(p, _expected_three()), "problems": await _problems(p)}


def _expected_three() -> dict[str, int]:
    return dict(Counter(_plan()[1][:3]))


def test_two_servers_share_a_class_and_a_restart_keeps_it(tmp_path) -> None:
    """The class is opened through the store (its teacher key is never on the screen) and
    taught from server A; students on A and B; then a fresh server resumes it."""
    env = {"NORMVIZ_DB_URL": f"sqlite:///{tmp_path / 'classes.db'}"}
    opened = Classroom(env["NORMVIZ_DB_URL"]).open(KIND, 0, "test-teacher")
    code, key = opened.info.code, opened.teacher_key
    with serve(env) as url_a, serve(env) as url_b:
        out = _run(_two_servers(url_a, url_b, code, key))
    assert out["seen"] == _expected_three()
    assert not any(out["problems"]), out["problems"]
    with serve(env) as url_c:  # both servers are gone: a fresh process, the same file
        again = _run(_resume(url_c, code, key))
    assert again["seen"] == _expected_three()
    assert not again["problems"]


# ---- clicking cells ---------------------------------------------------------------------------


async def _clicks(url: str) -> dict:
    ex = practice.exercise("cells", 0)
    names = practice.cell_names(ex.case)
    group = [int(i) for i in ex.truth]
    async with _browser() as b:
        p = await _open(b, f"{url}/practice?kind=cells", width=1400)

        async def click(i: int, n: int) -> None:
            """Click cell i on the tensor grid; wait for the multiselect to follow."""
            box = p.locator(".st-key-pr_cells_cells-0")
            want = names[i] not in await box.inner_text()  # the click toggles the cell
            await p.locator(".st-key-pr_grid_cells-0 [role=gridcell]").nth(i).click()
            await p.wait_for_function(
                "([sel, name, want]) => document.querySelector(sel).innerText.includes(name)"
                " === want",
                arg=[".st-key-pr_cells_cells-0", names[i], want],
            )
            await _done(p)

        outside = next(i for i in range(ex.n_cells) if i not in group)
        for n, i in enumerate([outside, *group[:-1], outside]):  # the last click drops `outside`
            await click(i, n)
        picked = await p.locator(".st-key-pr_cells_cells-0").inner_text()
        await p.locator(".st-key-pr_check button").click()
        await p.get_by_text("Answer:").wait_for()
        await _done(p)
        await p.wait_for_timeout(1500)  # plotly draws its SVG after the run
        await p.get_by_text("Which other cells share").evaluate("e => e.scrollIntoView()")
        await p.screenshot(path=str(SHOTS / "practice.png"))
        alerts = await p.locator("[data-testid=stAlert]").all_inner_texts()
        problems = await _problems(p)
    return {"picked": picked, "alerts": alerts, "problems": problems, "names": names}


def test_clicking_cells_picks_and_grades_them(server) -> None:
    ex = practice.exercise("cells", 0)
    marked = practice.cell_name(ex.case.layout, ex.marked)
    out = _run(_clicks(server))
    group = [out["names"][int(i)] for i in ex.truth]
    shown = [n for n in out["names"] if n in out["picked"]]
    assert shown == group[:-1]
    missed = 0 if group[-1] == marked else 1
    want = "Correct" if not missed else "Not quite: 1 missed."
    assert any(want in a for a in out["alerts"]), out["alerts"]
    assert not out["problems"]
