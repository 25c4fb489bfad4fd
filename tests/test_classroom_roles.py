"""The live class's roles survive in Chromium: the teacher key is never projected, and the
teacher and the students are their browser (ui/browser.py's cookie) across a reload, a
single-server restart, and a kill -9 of the teacher's process behind `scripts/serve.sh 2`
(on SQLite and on PostgreSQL).

The teacher comes back with the teacher view (Reveal, Next, End) and the notice that it
is back; every student keeps "Your answer is in" and exactly one answer. After a restart
or a process loss the page reconnects by itself and shows what it had, asking for no run
(tests/test_deploy.py), and comes back by itself (ui.comeback): no reload, no click.
"""

from __future__ import annotations

import asyncio
import os
import signal
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import CHROMIUM, CHROMIUM_ARGS
from pgcluster import pg_server  # noqa: F401  (fixture)
from test_classroom_db_browser import _app_server
from test_deploy import _seat

from benchmarks.common import DONE_JS, free_port, serve_balanced
from normviz import practice
from normviz.classroom import Classroom
from normviz.practice import live
from ui.browser import NAME

pytestmark = pytest.mark.browser
TIMEOUT = 180_000  # ms
EX = practice.exercise("choose", 0)
LABELS = dict(EX.options)


def _run(coro):  # type: ignore[no-untyped-def]
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


async def _done(p) -> None:  # type: ignore[no-untyped-def]
    await p.wait_for_timeout(300)
    await p.wait_for_function(DONE_JS, timeout=TIMEOUT, polling=100)


async def _problems(p) -> list[str]:  # type: ignore[no-untyped-def]
    out = ["exception element"] if await p.locator("[data-testid=stException]").count() else []
    body = await p.inner_text("body")
    return out + [w for w in ("Traceback", "internal error") if w in body]


async def _page(ctx, url: str):  # type: ignore[no-untyped-def]
    p = await ctx.new_page()
    p.set_default_timeout(TIMEOUT)
    sockets: list[object] = []
    p.on("websocket", lambda ws: sockets.append(ws))
    await p.goto(url)
    await _done(p)
    return p, sockets


async def _start(p) -> str:  # type: ignore[no-untyped-def]
    """Start a class from the solo view; its code (read off the page)."""
    await p.locator(".st-key-pr_start button").first.click()  # (its help tooltip doubles it)
    await p.locator(".st-key-pr_qr img").wait_for()  # the projector's screen (ui.projector)
    await _done(p)
    return (await p.locator("[data-testid=stMetricValue]").first.inner_text()).strip()


async def _answer(p, code: str, key: str) -> None:  # type: ignore[no-untyped-def]
    await p.locator(f".st-key-pr_choice_{code}-1").get_by_text(LABELS[key], exact=True).click()
    await _done(p)
    await p.locator(".st-key-pr_submit button").click()
    await p.get_by_text(live.SENT).wait_for()


async def _teacher_view(p) -> bool:  # type: ignore[no-untyped-def]
    """Reveal, Next and End are on the page (within a minute: they are drawn last)."""
    from playwright.async_api import TimeoutError as Late

    try:
        for k in ("pr_reveal", "pr_end"):
            button = p.locator(f".st-key-{k} button").first  # a help icon is a button too
            await button.wait_for(state="attached", timeout=60_000)
        # "Next question" opens a popover holding the exercise choice and its button
        await p.get_by_role("button", name="Next question").wait_for(timeout=60_000)
    except Late:
        return False
    return True


async def _reveal_after_loss(p) -> dict:  # type: ignore[no-untyped-def]
    """The teacher's page after its session was lost: it comes back by itself (a full run
    in the new session, ui.comeback) with the teacher view and the notice; then Reveal."""
    await p.get_by_text(live.BACK).wait_for(timeout=TIMEOUT)
    await _done(p)
    back = {"teacher_view": await _teacher_view(p), "problems": await _problems(p)}
    await p.locator(".st-key-pr_reveal button").click()
    await _done(p)
    back["revealed"] = await p.locator(".st-key-pr_reveal button").is_disabled()
    return back


async def _revealed(p, mine: str) -> bool:  # type: ignore[no-untyped-def]
    """The student's page shows the reveal graded with their own answer."""
    await p.get_by_text("Answer:").first.wait_for(timeout=TIMEOUT)
    await _done(p)
    alerts = " ".join(await p.locator("[data-testid=stAlert]").all_inner_texts())
    return (live.NOT_ANSWERED not in alerts) and (("Correct" in alerts) == (mine in EX.truth))


# ---- one server: presenter mode, reloads, a restart ------------------------------------------


async def _one_server(port: int, db: str, log: Path) -> dict:
    from playwright.async_api import async_playwright

    out: dict = {}
    wrong = next(k for k, _ in EX.options if k not in EX.truth)
    async with async_playwright() as pw:
        b = await pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            with _app_server(db, log, port) as url:
                tctx = await b.new_context(viewport={"width": 1280, "height": 720})
                sctx = await b.new_context(viewport={"width": 400, "height": 800})
                t, _ = await _page(tctx, f"{url}/practice?kind=choose&present=1")
                code = await _start(t)
                projected = [await t.inner_text("body"), await t.content()]
                s, _ = await _page(sctx, f"{url}/practice?class={code}")
                await _answer(s, code, wrong)
                await t.locator(f".st-key-pr_show_key_{code} label").click()  # asked for
                await t.locator(".st-key-pr_key_box code").wait_for()
                key = (await t.locator(".st-key-pr_key_box code").inner_text()).strip()
                out["key_projected"] = any(key in text for text in projected)
                out["key_asked"] = key in await t.inner_text("body")
                await t.reload()
                await _done(t)
                out["reload_teacher"] = await _teacher_view(t)
                out["reload_notice"] = await t.get_by_text(live.BACK).count() > 0
                out["reload_key_hidden"] = key not in await t.content()
                await s.reload()
                await _done(s)
                out["reload_student"] = await s.get_by_text(live.SENT).count() > 0
                # the session's next run drops the notice, so that after the restart
                # only the new session's first run can show it again
                await t.locator(f".st-key-pr_show_key_{code} label").click()
                await _done(t)
                out["reload_notice_once"] = await t.get_by_text(live.BACK).count() == 0
            with _app_server(db, log.with_suffix(".2.log"), port):  # a restart, same port
                out["restart"] = await _reveal_after_loss(t)
                out["restart_student"] = await _revealed(s, wrong)
                out["problems"] = await _problems(t) + await _problems(s)
            teacher = next(c["value"] for c in await tctx.cookies() if c["name"] == NAME)
            out["counts"] = Classroom(db).counts(code, teacher)
        finally:
            await b.close()
    return out


def test_reload_and_restart_keep_the_roles_and_the_key_is_not_projected(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'classes.db'}"
    out = _run(_one_server(free_port(), db, tmp_path / "server.log"))
    assert not out["key_projected"] and out["key_asked"]  # presenter view: only on request
    reload = {k: v for k, v in out.items() if k.startswith("reload")}
    assert all(reload.values()), reload
    assert out["reload_student"]
    restart = out["restart"]
    assert restart["teacher_view"] and restart["revealed"] and not restart["problems"], restart
    assert out["restart_student"], "the student's answer, graded, after the restart"
    assert not out["problems"], out["problems"]
    wrong = next(k for k, _ in EX.options if k not in EX.truth)
    assert out["counts"] == {wrong: 1}


# ---- two processes behind nginx: the teacher's process is killed ------------------------------


async def _kill_the_teachers_process(d, db: str) -> dict:  # type: ignore[no-untyped-def]
    from playwright.async_api import async_playwright

    out: dict = {}
    async with async_playwright() as pw:
        b = await pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            seats = await _seat(b, d, 2)  # (context, affinity key, process): 2 per process
            teacher_ctx, _k, victim = seats[0]
            t, t_sockets = await _page(teacher_ctx, f"{d.url}/practice?kind=choose")
            code = await _start(t)
            students = []
            for i, (ctx, _key, backend) in enumerate(seats[1:]):
                p, sockets = await _page(ctx, f"{d.url}/practice?class={code}")
                mine = EX.options[i % len(EX.options)][0]
                await _answer(p, code, mine)
                students.append((p, sockets, backend, mine))
            want = dict(Counter(mine for *_, mine in students))
            pid = next(pid for port, pid in d.apps if d.backend(port) == victim)
            os.kill(pid, signal.SIGKILL)  # a crash, not a clean shutdown
            for _ in range(TIMEOUT // 200):  # the page reconnects, to the other process
                if len(t_sockets) >= 2:
                    break
                await asyncio.sleep(0.2)
            out["reconnected"] = len(t_sockets) >= 2
            await _done(t)
            out["back"] = await _reveal_after_loss(t)
            out["students"] = [
                (backend == victim, await _revealed(p, mine)) for p, _s, backend, mine in students
            ]
            out["problems"] = [await _problems(p) for p, *_ in students]
            teacher = next(c["value"] for c in await teacher_ctx.cookies() if c["name"] == NAME)
            out["counts"], out["want"] = Classroom(db).counts(code, teacher, question=1), want
        finally:
            await b.close()
    return out


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_a_killed_process_behind_nginx_keeps_the_roles(
    database: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    if database == "sqlite":
        db = f"sqlite:///{tmp_path / 'classes.db'}"
    else:
        db = request.getfixturevalue("pg_server")
    run_dir = Path(tempfile.mkdtemp(prefix="normviz-roles-"))
    with serve_balanced(2, run_dir=run_dir, env={"NORMVIZ_DB_URL": db}) as d:
        out = _run(_kill_the_teachers_process(d, db))
    assert out["reconnected"]
    back = out["back"]
    assert back["teacher_view"] and back["revealed"] and not back["problems"], back
    moved = [ok for was_there, ok in out["students"] if was_there]
    assert moved and all(ok for _moved, ok in out["students"]), out["students"]
    assert not any(out["problems"]), out["problems"]
    assert out["counts"] == out["want"]  # one answer per student, none lost or doubled
