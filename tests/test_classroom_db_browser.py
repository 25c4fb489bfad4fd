"""A student is one browser: `streamlit run app.py` (app.py's `st.App`) gives each
browser an id cookie (ui/browser.py), and a reload finds that browser's answer again;
a second tab of the same browser is the same student (its answer replaces the first).

One server, one class opened through the store, two Chromium contexts (two browsers).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import CHROMIUM, CHROMIUM_ARGS, ROOT

from benchmarks.common import DONE_JS, free_port
from normviz import practice
from normviz.classroom import Classroom
from normviz.practice import live
from ui.browser import NAME

pytestmark = pytest.mark.browser
TIMEOUT = 120_000  # ms


@contextmanager
def _app_server(db: str, log: Path, port: int | None = None) -> Iterator[str]:
    """`streamlit run app.py` on `port` (default a free one) with NORMVIZ_DB_URL=`db`."""
    port = port or free_port()
    with log.open("w") as out:
        args = ["app.py", "--server.port", str(port), "--server.address", "127.0.0.1"]
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", *args, "--server.headless", "true"],
            cwd=ROOT,
            env={**os.environ, "NORMVIZ_DB_URL": db, "PYTHONUNBUFFERED": "1"},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            for _ in range(240):  # up to two minutes for the imports on busy cores
                try:
                    with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2):
                        break
                except OSError:
                    if proc.poll() is not None:
                        raise RuntimeError(log.read_text()[-2000:]) from None
                    time.sleep(0.5)
            yield url
        finally:
            proc.terminate()
            proc.wait(30)


def _set_cookie(url: str, cookie: str | None = None) -> list[str]:
    req = urllib.request.Request(url, headers={"Cookie": cookie} if cookie else {})
    with urllib.request.urlopen(req, timeout=30) as r:
        return [v for k, v in r.headers.items() if k.lower() == "set-cookie" and NAME in v]


async def _browsers(url: str, code: str, room: Classroom) -> tuple[bool, bool, bool, dict]:
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        one, two = await browser.new_context(), await browser.new_context()
        p = await one.new_page()
        await p.goto(f"{url}/practice?class={code}", timeout=TIMEOUT)
        await p.wait_for_function(DONE_JS, timeout=TIMEOUT, polling=100)
        sent = p.get_by_text(live.SENT)
        before = await sent.count() > 0
        cookie = next(c for c in await one.cookies() if c["name"] == NAME)
        # this browser's answer arrives (as if sent from another tab or process) ...
        ex = practice.exercise("choose", 0)
        room.submit(code, 1, cookie["value"], ex.options[0][0])
        await p.reload(timeout=TIMEOUT)  # ... and a reload finds it
        await p.wait_for_function(DONE_JS, timeout=TIMEOUT, polling=100)
        await sent.wait_for(timeout=TIMEOUT)
        after = await sent.count() > 0
        tab = await one.new_page()  # a second tab of the same browser: another session
        await tab.goto(f"{url}/practice?class={code}", timeout=TIMEOUT)
        await tab.wait_for_function(DONE_JS, timeout=TIMEOUT, polling=100)
        label = ex.options[1][1]
        await tab.locator(f".st-key-pr_choice_{code}-1").get_by_text(label, exact=True).click()
        await tab.wait_for_function(DONE_JS, timeout=TIMEOUT, polling=100)
        await tab.locator(".st-key-pr_submit button").click()
        await tab.get_by_text(live.SENT).wait_for(timeout=TIMEOUT)
        q = await two.new_page()  # another browser is another student
        await q.goto(f"{url}/practice?class={code}", timeout=TIMEOUT)
        await q.wait_for_function(DONE_JS, timeout=TIMEOUT, polling=100)
        other = await q.get_by_text(live.SENT).count() > 0
        await browser.close()
        return before, after, other, cookie


def test_a_reload_keeps_the_browsers_answer(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'classes.db'}"
    room = Classroom(db)
    code = room.open("choose", 0, client="teacher").info.code
    with _app_server(db, tmp_path / "server.log") as url:
        page = f"{url}/practice?class={code}"
        given = _set_cookie(page)
        assert len(given) == 1 and "HttpOnly" in given[0] and "SameSite=Lax" in given[0]
        assert _set_cookie(page, f"{NAME}={'a' * 22}") == []  # a browser keeps its id
        assert _set_cookie(f"{url}/_stcore/health") == []  # only pages hand one out
        with ThreadPoolExecutor(1) as pool:
            before, after, other, cookie = pool.submit(
                asyncio.run, _browsers(url, code, room)
            ).result()
    assert cookie["httpOnly"]
    assert (before, after, other) == (False, True, False)
    ex = practice.exercise("choose", 0)  # the tab's answer replaced the first: one student
    assert room.counts(code, "teacher") == {ex.options[1][0]: 1}
