"""Shared fixtures: AppTest from app.py, and a real server driven by headless Chromium."""

from __future__ import annotations

import ast
import base64
import contextlib
import functools
import os

# Idle OpenMP threads spin; on two shared cores that slows tiny-tensor work 10-30x.
# Set before torch loads here and inherited by the app servers the tests start.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
import pytest
from keys import knob
from streamlit.testing.v1 import AppTest

from benchmarks.common import CHROMIUM, CHROMIUM_ARGS, HOME, app_test
from benchmarks.common import serve as bench_serve
from ui.params import PAGE_PARAMS, fmt
from ui.route import RUN_LOG

ROOT = Path(__file__).resolve().parent.parent
SHOTS = ROOT / "assets" / "screenshots"


def run_app(
    page: str | None = None, query: dict[str, str] | None = None, timeout: float = 60
) -> AppTest:
    """Run app.py through AppTest, on `page` (URL path, e.g. "axes"), with a query string.

    The query string is applied before the first run, as a shared link would be. The
    run starts at benchmarks/apptest_entry.py, which runs app.py as a warm server
    does: no run starts in the pages-folder mode, so none is rerouted (a page's first
    run is app.py's, as in the browser after a server's first session).
    """
    at = app_test(page or HOME, query, timeout=timeout)
    at.run()
    return at


def assert_clean(at: AppTest) -> None:
    """No exception element and no internal-error message on the page."""
    assert not at.exception, [e.value for e in at.exception]
    errors = [e.value for e in at.error]
    assert not any("internal error" in e for e in errors), errors


def unescaped(markdown: str) -> str:
    """Markdown as the reader sees its text: backslash escapes resolved, the invisible
    word joiners of ui.safe.md_text dropped."""
    import re

    from ui.safe import JOINER

    return re.sub(r"\\(.)", r"\1", markdown).replace(JOINER, "")


def texts(at: AppTest) -> str:
    """Everything the page wrote as text (markdown, captions, alerts), joined."""
    parts: list[str] = []
    for group in (
        at.markdown,
        at.caption,
        at.warning,
        at.error,
        at.info,
        at.success,
        at.title,
        at.header,
        at.subheader,
        at.latex,
        at.code,
    ):
        parts += [str(e.value) for e in group]
    return "\n".join(parts)


# ---- the browser mark: every test that starts a server or Chromium carries it ---------

# fixtures that start a server or Chromium, and the calls that do
BROWSER_FIXTURES = frozenset({"server", "browser", "page"})
STARTERS = frozenset(
    {"serve", "bench_serve", "serve_balanced", "sync_playwright", "async_playwright"}
)


@functools.cache
def _starting_functions(path: Path) -> frozenset[str]:
    """The module-level functions (tests, fixtures, helpers) of a test module that start
    a server or Chromium: they call a starter or a function of the module that does,
    or (fixtures) take a browser fixture."""
    tree = ast.parse(path.read_text())
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    calls = {
        f.name: {
            c.func.id
            for c in ast.walk(f)
            if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
        }
        for f in funcs
    }
    needs = {f.name: {a.arg for a in f.args.args} if _is_fixture(f) else set() for f in funcs}
    found = {n for n in calls if calls[n] & STARTERS or needs[n] & BROWSER_FIXTURES}
    while more := {n for n in calls if n not in found and (calls[n] | needs[n]) & found}:
        found |= more
    return frozenset(found)


def _is_fixture(f: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any("fixture" in ast.unparse(d) for d in f.decorator_list)


def starts_a_server(
    path: Path, name: str, fixtures: Iterable[str], parametrized: Iterable[str]
) -> bool:
    """Whether test `name` of the module at `path`, which uses `fixtures` (its own
    arguments and the fixtures they need, `parametrized` ones apart), starts a server
    or Chromium."""
    used = set(fixtures) - set(parametrized)
    return bool(used & BROWSER_FIXTURES or ({name} | used) & _starting_functions(path))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark `browser` every test that starts a server or Chromium and is not marked yet,
    so `pytest -m "not browser"` (the fast local loop) starts none."""
    for item in items:
        if item.get_closest_marker("browser") or not isinstance(item, pytest.Function):
            continue
        callspec = getattr(item, "callspec", None)
        parametrized = callspec.params if callspec else {}
        if starts_a_server(item.path, item.originalname, item.fixturenames, parametrized):
            item.add_marker(pytest.mark.browser)


# ---- real browser -------------------------------------------------------------------


def url_value(at: AppTest, name: str) -> str:
    """The query-string value `name` that the last run wrote."""
    v = at.query_params[name]
    return v[-1] if isinstance(v, list) else v


def assert_refused(at: AppTest, page: str, refused: dict[str, str], sent: Iterable[str]) -> None:
    """Each refused page parameter is named in a warning and back at its default, in the
    session and in the URL; the parameters a link leaves out take their defaults quietly."""
    params = {p.name: p for p in PAGE_PARAMS[page]}
    warned = "\n".join(w.value for w in at.warning)
    for name, value in refused.items():
        assert f"`{name}={value}` is not valid" in warned, warned
        assert knob(at, page, name) == params[name].default
        assert url_value(at, name) == fmt(params[name].default)
    for name in (n for n in params if n not in sent):
        assert url_value(at, name) == fmt(params[name].default)
        assert f"`{name}=" not in warned, warned


def plotly_array(arr) -> np.ndarray:
    """A plotly array from a figure's JSON, plain or typed (base64 with a dtype and shape)."""
    if isinstance(arr, dict):
        out = np.frombuffer(base64.b64decode(arr["bdata"]), dtype=np.dtype(arr["dtype"]))
        if "shape" in arr:
            out = out.reshape([int(n) for n in str(arr["shape"]).split(",")])
        return out
    return np.asarray(arr)


@contextlib.contextmanager
def serve(env: dict[str, str] | None = None) -> Iterator[str]:
    """`streamlit run app.py` on a free loopback port (a fresh process); yields its URL."""
    log = ROOT / ".pytest_cache" / f"server-{os.getpid()}-{time.monotonic_ns()}.log"
    with bench_serve(log=log, env=env) as (url, _pid):
        yield url


@pytest.fixture(scope="session")
def counted() -> Iterator[tuple[str, Path]]:
    """One app server for the whole test session (per xdist worker), logging app.py's
    runs (ui.route.RUN_LOG); (URL, log file). Count them with `app_runs(log)`."""
    log = ROOT / ".pytest_cache" / f"app-runs-{os.getpid()}.log"
    log.parent.mkdir(exist_ok=True)
    log.write_text("")
    for old in SESSION_DB.parent.glob(f"{SESSION_DB.name}*"):  # the file, its -wal, -shm
        old.unlink()
    with serve(env={RUN_LOG: str(log), "NORMVIZ_DB_URL": server_db()}) as url:
        yield url, log


SESSION_DB = ROOT / ".pytest_cache" / f"classes-{os.getpid()}.db"


def server_db() -> str:
    """The live classes' database of the session's app server (a fresh SQLite file)."""
    return f"sqlite:///{SESSION_DB}"


@pytest.fixture(scope="session")
def server(counted) -> str:
    """The session's app server's URL."""
    return counted[0]


def app_runs(log: Path) -> int:
    """How many times app.py has run on the server logging to `log`."""
    return len(log.read_text().splitlines())


@pytest.fixture(scope="session")
def browser():
    """One headless system Chromium for the whole session."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser, server):
    """A fresh browser context and page, 1400×900."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    p = ctx.new_page()
    p.set_default_timeout(60_000)
    yield p
    ctx.close()


def wait_done(p, timeout: float = 60_000) -> None:
    """Wait until the app is connected and the script run has finished."""
    p.wait_for_selector("[data-testid=stApp]", timeout=timeout)
    p.wait_for_function(
        """() => {
            const app = document.querySelector('[data-testid=stApp]');
            return app && app.getAttribute('data-test-connection-state') === 'CONNECTED'
                && app.getAttribute('data-test-script-state') === 'notRunning';
        }""",
        timeout=timeout,
    )
    # a rerun can start right after (query-param writes): let it settle, then wait
    # again, and for lazily loaded widgets to replace their skeletons
    p.wait_for_timeout(300)
    # ... and for the shared sidebar (its presenter toggle: every page has it): a
    # server's very first run may render a page alone before
    # ui.route.entry reroutes it through app.py
    p.wait_for_function(
        """() => document.querySelector('[data-testid=stApp]')
                 .getAttribute('data-test-script-state') === 'notRunning'
              && document.querySelectorAll('[data-testid*=keleton]').length === 0
              && document.querySelector('[data-testid=stSidebarUserContent] .st-key-present')""",
        timeout=timeout,
    )


def open_app(p, server: str, path: str = "") -> None:
    """Navigate to `server/path` and wait for the script run to finish."""
    p.goto(f"{server}/{path}")
    wait_done(p)


def assert_no_exception(p) -> None:
    """No exception element, no traceback text, no internal-error message."""
    assert p.locator("[data-testid=stException]").count() == 0
    body = p.inner_text("body")
    assert "Traceback" not in body
    assert "internal error" not in body


def screenshot(p, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    p.screenshot(path=str(SHOTS / f"{name}.png"), full_page=False)
