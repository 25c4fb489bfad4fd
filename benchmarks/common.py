"""Helpers the page benchmarks share: the page list, shapes at the element cap,
AppTest runs through app.py, figure sizes, and a streamlit server for Chromium.
"""

from __future__ import annotations

import functools
import itertools
import math
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from streamlit.components.v2.component_manager import BidiComponentManager
from streamlit.runtime.scriptrunner.script_cache import ScriptCache
from streamlit.testing.v1 import AppTest, local_script_runner
from streamlit.testing.v1 import app_test as app_test_module

from normviz.layouts import LAYOUTS
from ui.pages import available
from ui.params import SIZE_LIMITS, max_elements

ROOT = Path(__file__).resolve().parent.parent
ENTRY = Path(__file__).resolve().parent / "apptest_entry.py"  # app.py, as on a warm server
CHROMIUM = os.environ.get("NORMVIZ_CHROMIUM", "/usr/bin/chromium")
# the same flags as tests/conftest.py: no sandbox (root in a container), no GPU
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
HOME = "home"  # our name for the page at "/"
# A finished script run in the browser (docs/architecture.md: platform facts). Before the first
# run starts the app also reports "notRunning", so wait for the sidebar's presenter
# toggle too: app.py draws it on every page, at the start of every run.
DONE_JS = """() => {
    const app = document.querySelector('[data-testid=stApp]');
    return app && app.getAttribute('data-test-connection-state') === 'CONNECTED'
        && app.getAttribute('data-test-script-state') === 'notRunning'
        && document.querySelector('[data-testid=stSidebarUserContent] .st-key-present')
        && document.querySelectorAll('[data-testid*=keleton]').length === 0;
}"""


def page_ids() -> list[str]:
    """Every page that exists now: the home page, then pages/<path>.py in map order."""
    return [HOME, *(p.path for p in available())]


def url_path(page: str) -> str:
    """The page's URL path ("" for home)."""
    return "" if page == HOME else page


# ---- shapes at the element cap ------------------------------------------------------


def _pow2_upto(n: int) -> list[int]:
    return [2**k for k in range(int(math.log2(n)) + 1)]


def cap_shapes(layout: str, cap: int | None = None) -> dict[str, tuple[int, ...]]:
    """The largest shapes the sidebar allows under the cap, by profile.

    "balanced" spreads the elements evenly; "max <axis>" makes that axis as long as
    the sidebar allows and spreads the rest. Sizes are powers of two, so with the
    default cap (2^22) every shape has exactly cap elements.
    """
    cap = cap or max_elements()
    axes = LAYOUTS[layout].axes
    options = [_pow2_upto(min(SIZE_LIMITS[a], cap)) for a in axes]
    best = max(math.prod(c) for c in itertools.product(*options) if math.prod(c) <= cap)
    full = [c for c in itertools.product(*options) if math.prod(c) == best]

    def spread(c: tuple[int, ...]) -> float:
        return max(c) / min(c)

    out = {"balanced": min(full, key=spread)}
    for i, a in enumerate(axes):
        top = max(c[i] for c in full)
        out[f"max {a}"] = min((c for c in full if c[i] == top), key=spread)
    seen: set[tuple[int, ...]] = set()
    return {k: v for k, v in out.items() if not (v in seen or seen.add(v))}


def query_for(layout: str, shape: tuple[int, ...], method: str = "batch") -> dict[str, str]:
    """A full shared link for `shape` (groups=1 keeps GroupNorm valid at any C)."""
    sizes = dict(zip(LAYOUTS[layout].axes, shape, strict=True))
    return {
        "layout": layout,
        **{a: str(v) for a, v in sizes.items()},
        "method": method,
        "groups": "1" if method == "group" and sizes["C"] % 2 else "2",
        "axes": LAYOUTS[layout].channel,
        "centred": "1",
        "eps": "1e-05",
        "seed": "0",
        "data": "channels",
    }


def shape_label(layout: str, shape: tuple[int, ...]) -> str:
    return f"{layout} {'x'.join(map(str, shape))}"


# ---- AppTest -----------------------------------------------------------------------


@functools.cache
def _components() -> BidiComponentManager:
    manager = BidiComponentManager()
    manager.discover_and_register_components(start_file_watching=False)
    return manager


@functools.cache
def _script_cache() -> ScriptCache:
    return ScriptCache()


def share_components(at: AppTest) -> AppTest:
    """Make `at` start like a session of a running server: no per-session setup.

    A new AppTest scans every installed package for Streamlit components on its
    first run (about 0.35 CPU-s here), and every AppTest run compiles the entry
    script and the page anew (0.05 to 0.2 s for a long page). A server scans once at
    start and compiles each script once. Without this, every run we time or test
    would pay for both. One registry and one script cache serve the whole process.

    The one documented shim of Streamlit internals (docs/architecture.md, "The
    AppTest shim"), in test and benchmark code only, never in the app: Streamlit
    1.67's AppTest has no supported way to share either. `AppTest(...)`,
    `from_file`, `from_string` and `from_function` take only the script, a timeout
    and args; `AppTest._run` builds a `ScriptCache()` for its pages manager and
    `LocalScriptRunner` another for its runner, by module-level names, on every run,
    and no config option changes that. So the registry goes into AppTest's own slot
    for it and both names are pointed at one cache. tests/test_apptest_shim.py
    fails if a Streamlit upgrade makes this stop working (a script compiled again
    by a second AppTest, or the packages scanned again).
    """
    at._bidi_component_manager = _components()  # AppTest's own cache slot for it
    # AppTest builds a ScriptCache() per run, by these module-level names
    app_test_module.ScriptCache = _script_cache  # type: ignore[misc, assignment]
    local_script_runner.ScriptCache = _script_cache  # type: ignore[misc, assignment]
    return at


def app_test(page: str, query: dict[str, str] | None = None, timeout: float = 600) -> AppTest:
    """An AppTest of app.py on `page`, with `query` applied before the first run (not run)."""
    at = share_components(AppTest(ENTRY, default_timeout=timeout))
    for k, v in (query or {}).items():
        at.query_params[k] = v
    if page != HOME:
        at.switch_page(f"../pages/{page}.py")
    return at


def sidebar_drawn(at: AppTest) -> bool:
    """True when app.py drew the shared sidebar (the page ran through the entry point)."""
    return any(t.key == "present" for t in at.sidebar.toggle)


@dataclass(frozen=True)
class FigureSize:
    """One Plotly chart of a run: its widget key (or position) and JSON length."""

    name: str
    chars: int
    traces: int


def figure_sizes(at: AppTest) -> list[FigureSize]:
    """Every Plotly chart the last run sent, with the length of its figure JSON."""
    import json

    out = []
    for i, el in enumerate(at.get("plotly_chart")):
        spec = el.proto.spec
        try:
            fig = json.loads(spec)
            traces = len(fig.get("data", []))
            title = (fig.get("layout", {}).get("title") or {}).get("text") or ""
        except ValueError:
            traces, title = -1, ""
        name = el.key or (title[:30] if title else f"chart {i}")
        out.append(FigureSize(name, len(spec), traces))
    return out


# ---- a real server ------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve(
    log: Path | None = None, env: dict[str, str] | None = None, script: str = "app.py"
) -> Iterator[tuple[str, int]]:
    """`streamlit run <script>` (app.py) on a free loopback port; yields (URL, server pid)."""
    port = free_port()
    log = log or ROOT / ".pytest_cache" / "bench-server.log"
    log.parent.mkdir(exist_ok=True)
    with log.open("w") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "streamlit",
                "run",
                script,
                "--server.port",
                str(port),
                "--server.address",
                "127.0.0.1",
                "--server.headless",
                "true",
            ],
            cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.time() + 120
            while True:
                try:
                    with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                        if r.status == 200:
                            break
                except OSError:
                    if time.time() > deadline or proc.poll() is not None:
                        raise RuntimeError(f"streamlit did not start; see {log}") from None
                    time.sleep(0.3)
            yield url, proc.pid
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds process `pid` has used (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    """Resident memory of process `pid` in MB (VmRSS of /proc/<pid>/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


# ---- several processes behind scripts/serve.sh's nginx --------------------------------


@dataclass(frozen=True)
class Balanced:
    """A running `scripts/serve.sh N`: nginx's URL, its run directory, the app processes."""

    url: str
    run_dir: Path
    apps: tuple[tuple[int, int], ...]  # (port, pid) per app process
    nginx_pid: int

    @property
    def pids(self) -> tuple[int, ...]:
        return tuple(pid for _port, pid in self.apps)

    def backend(self, port: int) -> str:
        return f"127.0.0.1:{port}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


@contextmanager
def serve_balanced(
    n: int, run_dir: Path | None = None, env: dict[str, str] | None = None, timeout: float = 180
) -> Iterator[Balanced]:
    """`scripts/serve.sh n` on a free loopback port: n app processes behind nginx.

    Yields once every process and nginx answer /_stcore/health. On exit stops serve.sh
    (which stops its processes), then ends any of its processes still alive, by pid.
    """
    import shutil
    import tempfile

    if shutil.which(os.environ.get("NGINX", "nginx")) is None:
        raise RuntimeError("no nginx: apt-get install nginx (scripts/test.sh does)")
    own_dir = run_dir is None
    run_dir = run_dir or Path(tempfile.mkdtemp(prefix="normviz-serve-"))
    for stale in ("ready", "apps.tsv", "nginx-master.pid"):  # from an earlier run there
        (run_dir / stale).unlink(missing_ok=True)
    port = free_port()
    out = (run_dir / "serve.out").open("w")
    proc = subprocess.Popen(
        ["bash", str(ROOT / "scripts" / "serve.sh"), str(n), str(port)],
        cwd=ROOT,
        env={
            **os.environ,
            "NORMVIZ_SERVE_DIR": str(run_dir),
            "PYTHON": sys.executable,
            **(env or {}),
        },
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # Ctrl-C in a terminal reaches us, not serve.sh twice
    )
    pids: list[int] = []
    try:
        deadline = time.time() + timeout
        while not (run_dir / "ready").exists():
            if proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(
                    f"serve.sh did not come up: {(run_dir / 'serve.out').read_text()[-2000:]}"
                )
            time.sleep(0.3)
        rows = [line.split("\t") for line in (run_dir / "apps.tsv").read_text().splitlines()]
        apps = tuple((int(p), int(pid)) for _i, p, pid in rows)
        nginx_pid = int((run_dir / "nginx-master.pid").read_text())
        pids = [nginx_pid, *(pid for _p, pid in apps)]
        yield Balanced(f"http://127.0.0.1:{port}", run_dir, apps, nginx_pid)
    finally:
        if not pids and (run_dir / "apps.tsv").exists():
            pids = [
                int(r.split("\t")[2]) for r in (run_dir / "apps.tsv").read_text().split("\n") if r
            ]
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        for pid in pids:
            if _alive(pid):
                os.kill(pid, 9)
        out.close()
        if own_dir:
            shutil.rmtree(run_dir, ignore_errors=True)
