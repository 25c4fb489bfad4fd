"""A classroom at once: 8 sessions on one server, each with its own settings.

One server (the `server` fixture), 8 sessions driven concurrently: two in Chromium
contexts (Playwright's async API: the sync one is not thread-safe), six over Streamlit's
websocket as the browser speaks it (benchmarks/classload.py's light client: cross-talk
is the server's, and six more Chromium pages were the test's cost, not its check). Each
session opens a different page (one whose sidebar has the seed) with a different shared
link, then clicks "+" on its seed (a light client sends the value one up) and, where the
page's sidebar shows it, types a new batch size. Every session must end up with exactly
its own values (the URL the server wrote, which also keeps the settings the page hides;
in Chromium also the sidebar widgets its page draws), checked again after all the others
have acted, so cross-talk through caches or module state would show; none may show an
exception, and all must finish.
"""

from __future__ import annotations

import asyncio
import re
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack
from dataclasses import dataclass

import pytest
from conftest import CHROMIUM, CHROMIUM_ARGS

from benchmarks.classload import Client, _connect
from benchmarks.common import DONE_JS, page_ids, url_path
from normviz import METHODS, STANDARD_METHODS
from normviz.layouts import LAYOUTS
from ui.pages import controls

SESSIONS = 8
IN_CHROMIUM = (0, 7)  # /axes (every shared control) and /batchnorm (no batch size)
TIMEOUT = 300_000  # ms; 8 sessions share 2 cores with whatever else is running


@dataclass(frozen=True)
class Student:
    """One session's page, link and the values it should end with."""

    i: int
    page: str
    layout: str
    method: str
    size: int  # batch size (B or N) in the link; then the student types new_size
    new_size: int
    seed: int  # in the link; "+" makes it seed + 1

    @property
    def sample(self) -> str:
        return LAYOUTS[self.layout].sample

    @property
    def shows(self) -> tuple[str, ...]:
        """The shared controls its page's sidebar draws (ui.pages.controls)."""
        return controls(url_path(self.page))

    @property
    def final_size(self) -> int:
        """The batch size at the end: typed in where the sidebar shows it, else the link's."""
        return self.new_size if "batch" in self.shows else self.size

    def link(self, server: str) -> str:
        q = {"layout": self.layout, self.sample: self.size, "method": self.method}
        q |= {"seed": self.seed, "groups": 2}
        qs = "&".join(f"{k}={v}" for k, v in q.items())
        return f"{server}/{url_path(self.page)}?{qs}"

    def expected(self) -> dict[str, str]:
        """URL values at the end."""
        return {
            "layout": self.layout,
            self.sample: str(self.final_size),
            "method": self.method,
            "seed": str(self.seed + 1),
        }


def students() -> list[Student]:
    pages = [p for p in page_ids() if "seed" in controls(url_path(p))]
    return [
        Student(
            i=i,
            page=pages[i % len(pages)],
            layout="BTC" if i % 2 == 0 else "NCHW",
            method=STANDARD_METHODS[i % len(STANDARD_METHODS)],
            size=2 + i,
            new_size=11 + 3 * i,
            seed=100 + 37 * i,
        )
        for i in range(SESSIONS)
    ]


def test_students_differ() -> None:
    """The plan itself: different pages and settings, so cross-talk would be visible."""
    plan = students()
    assert len({s.page for s in plan}) >= 4
    assert any("batch" not in s.shows for s in plan)  # hidden settings stay in the URL too
    assert len({(s.new_size, s.seed) for s in plan}) == SESSIONS
    assert {s.layout for s in plan} == {"BTC", "NCHW"}
    browsers = [plan[i] for i in IN_CHROMIUM]
    assert len({s.page for s in browsers}) == 2 and any("batch" not in s.shows for s in browsers)


# ---- one session -------------------------------------------------------------------


# Streamlit's legacy pages-folder mode ran a page file without app.py: the run has
# finished and the navigation lists file names ("app", "axes", ...), not page titles.
LEGACY_JS = """() => {
    const app = document.querySelector('[data-testid=stApp]');
    return app && app.getAttribute('data-test-script-state') === 'notRunning'
        && [...document.querySelectorAll('[data-testid=stSidebarNavLink]')]
               .some(a => a.innerText.trim() === 'app');
}"""


async def _done(p) -> None:
    """Wait for a finished run with the shared sidebar; fail clearly on a legacy-mode run."""
    for _ in range(3):  # a finished run may be followed by a rerun (a URL write, a widget)
        await p.wait_for_function(
            f"() => ({DONE_JS})() || ({LEGACY_JS})()", timeout=TIMEOUT, polling=100
        )
        if await p.evaluate(f"() => !!({DONE_JS})()"):
            return
        if not await p.evaluate(f"() => !!({LEGACY_JS})()"):
            continue  # a rerun began between the two checks: wait for it to finish
        try:  # the rerun through app.py is on its way (slow when a class arrives at once)
            await p.wait_for_function(DONE_JS, timeout=TIMEOUT, polling=100)
            return
        except Exception:
            nav = await p.locator("[data-testid=stSidebarNavLink]").all_inner_texts()
            raise AssertionError(
                f"{p.url}: the page finished without the shared sidebar: it ran without "
                f"app.py (navigation shows {[n.strip() for n in nav]})"
            ) from None
    await p.wait_for_function(DONE_JS, timeout=TIMEOUT, polling=100)


async def _until_url(p, key: str, value: str) -> None:
    """Wait until the script has written `key=value` to the URL, then for the run to end."""
    pattern = f"[?&]{re.escape(key)}={re.escape(value)}(&|$)"
    await p.wait_for_function(
        "re => new RegExp(re).test(location.search)", arg=pattern, timeout=TIMEOUT, polling=100
    )
    await _done(p)


async def _problems(p) -> list[str]:
    out = []
    if await p.locator("[data-testid=stException]").count():
        out.append("exception element")
    body = await p.inner_text("body")
    out += [w for w in ("Traceback", "internal error") if w in body]
    return out


async def _seen(p, s: Student) -> dict[str, str]:
    """What the sidebar shows and what the URL says, for this student's values."""
    side = "[data-testid=stSidebarUserContent]"
    seen = {"sidebar seed": await p.locator(f"{side} .st-key-seed input").input_value()}
    if "layout" in s.shows:
        layout = p.locator(f"{side} .st-key-layout label:has(input:checked)")
        seen["sidebar layout"] = (await layout.inner_text()).strip()
    if "batch" in s.shows:
        seen["sidebar size"] = await p.locator(f"{side} .st-key-{s.sample} input").input_value()
    if "method" in s.shows:
        seen["sidebar method"] = await p.locator(f"{side} .st-key-method input").input_value()
    url = await p.evaluate("() => location.search")
    q = dict(kv.split("=", 1) for kv in url.lstrip("?").split("&") if "=" in kv)
    return seen | {f"url {k}": q.get(k, "") for k in s.expected()}


def _want_in_url(s: Student) -> dict[str, str]:
    return {f"url {k}": v for k, v in s.expected().items()}


def _want(s: Student) -> dict[str, str]:
    want = {"sidebar seed": str(s.seed + 1)}
    if "layout" in s.shows:
        want["sidebar layout"] = s.layout
    if "batch" in s.shows:
        want["sidebar size"] = str(s.new_size)
    if "method" in s.shows:
        want["sidebar method"] = METHODS[s.method].label
    return want | _want_in_url(s)


async def _student(browser, server: str, s: Student) -> object:
    """Open the link, check it was read, click "+" on the seed, type a size where the
    sidebar shows it; return the page.

    (The size inputs sit in narrow sidebar columns, where Streamlit hides their +/-.)
    """
    ctx = await browser.new_context(viewport={"width": 1400, "height": 900})
    p = await ctx.new_page()
    p.set_default_timeout(TIMEOUT)
    await p.goto(s.link(server))
    await _done(p)
    side = "[data-testid=stSidebarUserContent]"
    first = await p.locator(f"{side} .st-key-seed input").input_value()
    assert first == str(s.seed), f"session {s.i} ({s.page}): link seed {s.seed}, shows {first}"
    await p.locator(f"{side} .st-key-seed [data-testid=stNumberInputStepUp]").click()
    await _until_url(p, "seed", str(s.seed + 1))
    if "batch" in s.shows:
        size = p.locator(f"{side} .st-key-{s.sample} input")
        assert await size.input_value() == str(s.size), f"session {s.i}: link size not read"
        await size.fill(str(s.new_size))
        await size.press("Enter")
        await _until_url(p, s.sample, str(s.new_size))
    return p


# ---- one session over the websocket ---------------------------------------------------


def _shown(w) -> float:  # type: ignore[no-untyped-def]
    """A number input's value as the server sent it: a value it set, else the default."""
    return w.value if w.set_value else w.default


def _number(w, value: int):  # type: ignore[no-untyped-def]
    """What a browser sends for number input `w` holding `value`."""

    def set_state(ws) -> None:  # type: ignore[no-untyped-def]
        ws.id = w.id
        setattr(ws, "int_value" if w.data_type == w.INT else "double_value", value)

    return set_state


@dataclass
class Light:
    """A session over the websocket: its client, and what each of its runs showed."""

    client: Client
    problems: list[str]

    async def run(self, widgets: tuple = ()):  # type: ignore[no-untyped-def,type-arg]
        out = await self.client.run(widgets)
        for _f, el in out.elements:
            if el.WhichOneof("type") == "exception":
                self.problems.append(f"exception: {el.exception.message[:80]}")
        return out

    def url(self) -> dict[str, str]:
        return dict(kv.split("=", 1) for kv in self.client.query.split("&") if "=" in kv)


async def _light(stack: AsyncExitStack, server: str, s: Student) -> Light:
    """The same steps as `_student`, over the websocket: open the link (its seed read),
    the seed one up, the size typed where the sidebar shows it."""
    ws = await stack.enter_async_context(await _connect(server))
    c = Light(Client(ws, page=url_path(s.page)), [])
    c.client.query = s.link(server).split("?", 1)[1]
    first = await c.run()
    seed = first.widget("seed", "number_input")
    assert seed is not None and _shown(seed) == s.seed, f"session {s.i}: link seed not read"
    await c.run((_number(seed, s.seed + 1),))
    assert c.url()["seed"] == str(s.seed + 1), f"session {s.i}: {c.client.query}"
    if "batch" in s.shows:
        size = first.widget(s.sample, "number_input")
        assert size is not None and _shown(size) == s.size, f"session {s.i}: link size not read"
        await c.run((_number(size, s.new_size),))
    return c


async def _seen_light(c: Light, s: Student) -> dict[str, str]:
    """After everyone has acted: a rerun with the values it holds; the URL it wrote."""
    await c.run()
    return {f"url {k}": c.url().get(k, "") for k in s.expected()}


async def _classroom(server: str) -> list[tuple[Student, dict[str, str], list[str]]]:
    from playwright.async_api import async_playwright

    plan = students()
    async with async_playwright() as pw, AsyncExitStack() as stack:
        browser = await pw.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        try:
            sessions = await asyncio.gather(
                *(
                    _student(browser, server, s) if s.i in IN_CHROMIUM else _light(stack, server, s)
                    for s in plan
                )
            )
            # everyone has acted: look at every session again
            seen = await asyncio.gather(
                *(
                    _seen_light(p, s) if isinstance(p, Light) else _seen(p, s)
                    for p, s in zip(sessions, plan, strict=True)
                )
            )
            problems = [
                p.problems if isinstance(p, Light) else await _problems(p) for p in sessions
            ]
        finally:
            await browser.close()
    return list(zip(plan, seen, problems, strict=True))


@pytest.mark.browser
def test_eight_students_at_once(server: str) -> None:
    # its own thread: asyncio.run must not meet the sync API's loop of other tests
    with ThreadPoolExecutor(1) as pool:
        results = pool.submit(asyncio.run, _classroom(server)).result()
    assert len(results) == SESSIONS  # all finished
    for s, seen, problems in results:
        assert not problems, f"session {s.i} on {s.page}: {problems}"
        want = _want(s) if s.i in IN_CHROMIUM else _want_in_url(s)
        assert seen == want, f"session {s.i} on {s.page}: {seen} != {want}"
