"""The balanced deployment: scripts/serve.sh 2 (two app processes, Debian's nginx in front).

One deployment for the module. Through nginx: /_stcore/metrics is refused and health
answers; an upload larger than server.maxUploadSize is refused by nginx, a smaller one
reaches Streamlit. Then four Chromium sessions, two on each process, open deep links;
nginx's access log shows every request of a session, its websocket included, reaching
one process. One process is killed (SIGKILL, a crash): its students' pages reconnect to
the other process; one reloads, the other clicks, and both end with a finished run
there showing the view of their URL. The other students' websockets stay open and
their clicks keep working. The Kubernetes and compose files are only checked for
agreeing with the nginx config (no docker or cluster here).
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import socket
import tempfile
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import pytest
from conftest import CHROMIUM, CHROMIUM_ARGS
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from test_classroom import _done, _problems

from benchmarks.common import Balanced, page_ids, serve_balanced, url_path
from normviz import STANDARD_METHODS
from normviz.layouts import LAYOUTS
from ui.pages import controls

PER_PROCESS = 2  # sessions on each of the two processes
TIMEOUT = 120_000  # ms
CLICK_TIMEOUT = 60_000  # ms
COOKIE = "normviz_affinity"  # deploy/nginx.conf.template
ROOT = Path(__file__).resolve().parent.parent
FINISHED_EARLY = 2  # ForwardMsg.ScriptFinishedStatus.FINISHED_EARLY_FOR_RERUN
LOG_LINE = re.compile(r'^(\S+) (\S+) (\S+) (.+) (\d{3}) "(\S+) (\S*)"$')


@pytest.fixture(scope="module")
def deployment():
    if shutil.which("nginx") is None and not os.environ.get("CI"):
        pytest.skip("no nginx here (scripts/test.sh installs Debian's)")
    run_dir = Path(tempfile.mkdtemp(prefix="normviz-deploy-test-"))
    with serve_balanced(2, run_dir=run_dir) as d:
        yield d
    shutil.rmtree(run_dir, ignore_errors=True)


@dataclass(frozen=True)
class Entry:
    """One line of nginx's access log (log_format affinity)."""

    start: float  # s since the epoch, when nginx got the request
    key: str  # the affinity cookie's value
    upstreams: tuple[str, ...]  # the processes tried, in order
    status: int
    uri: str


def _log(d: Balanced) -> list[Entry]:
    out = []
    for line in (d.run_dir / "access.log").read_text().splitlines():
        m = LOG_LINE.match(line)
        assert m, line
        end, took, key, ups, status, _method, uri = m.groups()
        ups_t = tuple(u.strip() for u in ups.replace(" : ", ", ").split(","))
        out.append(Entry(float(end) - float(took), key, ups_t, int(status), uri))
    return out


def _get(url: str) -> tuple[int, list[str]]:
    """Status and Set-Cookie headers of a GET."""
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.headers.get_all("Set-Cookie") or []
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get_all("Set-Cookie") or []


def _put_status(url: str, length: int, body: bytes = b"") -> int:
    """PUT with a Content-Length header (and `body`, maybe shorter); the status line."""
    u = urlparse(url)
    with socket.create_connection((u.hostname, u.port), timeout=30) as s:
        s.sendall(
            f"PUT /_stcore/upload_file/nosession/nofile HTTP/1.1\r\nHost: {u.netloc}\r\n"
            f"Content-Length: {length}\r\nConnection: close\r\n\r\n".encode()
            + body
        )
        return int(s.recv(4096).split(b" ", 2)[1])


def _metrics_blocked_health_allowed(deployment: Balanced) -> None:
    status, cookies = _get(f"{deployment.url}/_stcore/health")
    assert status == 200
    assert any(c.startswith(f"{COOKIE}=") for c in cookies), cookies
    for path in ("/_stcore/metrics", "/_stcore/metrics/", "//_stcore/metrics?x=1"):
        assert _get(f"{deployment.url}{path}")[0] in (403, 404), path
    port, _pid = deployment.apps[0]
    assert _get(f"http://127.0.0.1:{port}/_stcore/metrics")[0] == 200  # nginx blocks it


def _max_upload_mb() -> int:
    conf = (ROOT / ".streamlit" / "config.toml").read_text()
    return int(re.search(r"^maxUploadSize\s*=\s*(\d+)", conf, re.M).group(1))


def _upload_size_matches_streamlit(deployment: Balanced) -> None:
    mb = _max_upload_mb()
    assert _put_status(deployment.url, (mb + 2) * 2**20) == 413  # nginx: too large
    # within the limit the request reaches Streamlit, which has no such session
    assert _put_status(deployment.url, 1000, b"x" * 1000) != 413


def test_manifests_agree_with_the_nginx_config() -> None:
    """Not run here (no docker, no cluster): the same affinity cookie, upload limit and
    metrics rule in the Kubernetes manifests; compose renders the same nginx config."""
    deploy = ROOT / "deploy"
    template = (deploy / "nginx.conf.template").read_text()
    assert f"$cookie_{COOKIE}" in template and "location ^~ /_stcore/metrics" in template
    ingress = (deploy / "k8s" / "ingress.yaml").read_text()
    assert f"session-cookie-name: {COOKIE}" in ingress
    assert f"proxy-body-size: {_max_upload_mb() + 1}m" in ingress
    assert re.search(r"path: /_stcore/metrics\n", ingress)
    assert "sessionAffinity: ClientIP" in (deploy / "k8s" / "service.yaml").read_text()
    assert "deploy/warm.py" in (deploy / "k8s" / "deployment.yaml").read_text()
    assert "deploy/render-nginx.sh" in (deploy / "compose.yaml").read_text()
    assert "deploy/Dockerfile" in (deploy / "compose.yaml").read_text()


# ---- sessions, stickiness and the loss of a process ------------------------------------


@dataclass
class Student:
    i: int
    link: str
    seed: int
    ctx: object = None
    page: object = None
    key: str = ""
    backend: str = ""
    sockets: list = field(default_factory=list)  # websockets the page opened
    closed: list = field(default_factory=list)  # ... and saw closed
    runs: list = field(default_factory=list)  # finished script runs, per websocket


def _links(url: str, n: int) -> list[tuple[str, int]]:
    # pages whose sidebar has the seed (ui.pages.controls): the students click its "+"
    pages = [p for p in page_ids() if url_path(p) and "seed" in controls(url_path(p))]
    out = []
    for i in range(n):
        layout = "BTC" if i % 2 == 0 else "NCHW"
        sample, seed = LAYOUTS[layout].sample, 500 + 11 * i
        method = STANDARD_METHODS[i % len(STANDARD_METHODS)]
        q = f"layout={layout}&{sample}={3 + i}&method={method}&seed={seed}"
        out.append((f"{url}/{pages[i % len(pages)]}?{q}", seed))
    return out


async def _backend_of(d: Balanced, key: str) -> str:
    for _ in range(50):  # nginx writes the line once the response is sent
        hits = [e.upstreams[-1] for e in _log(d) if e.key == key]
        if hits:
            return hits[-1]
        await asyncio.sleep(0.1)
    raise AssertionError(f"no access-log line for {key}")


async def _seat(browser, d: Balanced, n_per: int) -> list[object]:
    """Browser contexts with an affinity cookie, n_per on each process (nginx picks)."""
    seated: dict[str, list] = {d.backend(p): [] for p, _pid in d.apps}
    spare = []
    for _ in range(12 * n_per):
        ctx = await browser.new_context(viewport={"width": 1280, "height": 800})
        await ctx.request.get(f"{d.url}/_stcore/health")
        key = next(c["value"] for c in await ctx.cookies() if c["name"] == COOKIE)
        chairs = seated[await _backend_of(d, key)]
        (chairs if len(chairs) < n_per else spare).append((ctx, key))
        if all(len(v) == n_per for v in seated.values()):
            break
    for ctx, _key in spare:
        await ctx.close()
    assert all(len(v) == n_per for v in seated.values()), {k: len(v) for k, v in seated.items()}
    return [(ctx, key, b) for b, v in seated.items() for ctx, key in v]


async def _open(s: Student) -> None:
    s.page = await s.ctx.new_page()
    s.page.set_default_timeout(TIMEOUT)

    def opened(ws) -> None:
        s.sockets.append(ws)
        s.runs.append(0)
        n = len(s.runs) - 1
        ws.on("close", lambda w: s.closed.append(w))
        ws.on("framereceived", lambda payload: _count_run(s, n, payload))

    s.page.on("websocket", opened)
    await s.page.goto(s.link)
    await _done(s.page)
    await _check_view(s, s.seed)


def _count_run(s: Student, n: int, payload: bytes | str) -> None:
    """Count the server's "script finished" messages on websocket n of this page."""
    if isinstance(payload, bytes):
        f = ForwardMsg()
        f.ParseFromString(payload)
        if f.WhichOneof("type") == "script_finished" and f.script_finished != FINISHED_EARLY:
            s.runs[n] += 1


async def _check_view(s: Student, seed: int) -> None:
    side = "[data-testid=stSidebarUserContent]"
    shown = await s.page.locator(f"{side} .st-key-seed input").input_value()
    assert shown == str(seed), f"session {s.i}: seed {seed} expected, page shows {shown}"
    assert f"seed={seed}" in s.page.url, s.page.url
    assert not await _problems(s.page), f"session {s.i}: {await _problems(s.page)}"


STATE_JS = """() => {
    const a = document.querySelector('[data-testid=stApp]');
    return a && [a.getAttribute('data-test-connection-state'),
                 a.getAttribute('data-test-script-state'), location.search];
}"""


async def _click_seed(s: Student, moved: bool) -> None:
    side = "[data-testid=stSidebarUserContent]"
    await s.page.locator(f"{side} .st-key-seed [data-testid=stNumberInputStepUp]").click()
    s.seed += 1
    try:
        await s.page.wait_for_function(
            "s => new URLSearchParams(location.search).get('seed') === s",
            arg=str(s.seed),
            timeout=CLICK_TIMEOUT,
            polling=100,
        )
    except Exception:
        state = await s.page.evaluate(STATE_JS)
        await s.page.screenshot(path=f"/tmp/test_deploy-{s.i}.png")
        raise AssertionError(
            f"session {s.i} ({'moved' if moved else 'stayed'}): the click did not reach "
            f"the URL: {state}, runs per websocket {s.runs}, closed {len(s.closed)}"
        ) from None
    await _done(s.page)
    await _check_view(s, s.seed)


async def _until(cond, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT / 1000
    while not cond():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.2)


async def _back_after_loss(s: Student, reload: bool) -> bool:
    """A student whose process died. The frontend reconnects the websocket by itself,
    through nginx to the other process, and keeps showing the page it had: it expects
    the server to resume the session, so it asks for no run. The student then reloads
    (a fresh run on the new process from the URL) or clicks "+": the click is the new
    process's first run of this session, which reads the view from the URL (ui/state
    seeds a session's first run from the URL) and may therefore keep the old seed.
    Either way the page must end as a finished run on the new process with the view
    of the URL. Returns whether a click was absorbed that way."""
    await _until(lambda: len(s.sockets) >= 2, f"session {s.i}: no reconnect")
    await _done(s.page)
    await _check_view(s, s.seed)  # still the old process's page, no error box
    assert s.runs[-1] == 0, f"session {s.i}: a run after reconnecting: {s.runs}"
    if reload:
        await s.page.reload()
    else:
        side = "[data-testid=stSidebarUserContent]"
        await s.page.locator(f"{side} .st-key-seed [data-testid=stNumberInputStepUp]").click()
    await _until(lambda: s.runs[-1] >= 1, f"session {s.i}: no run on the new process")
    await _done(s.page)
    seed_input = s.page.locator("[data-testid=stSidebarUserContent] .st-key-seed input")
    shown = int(await seed_input.input_value())
    absorbed = shown == s.seed
    if not reload:
        assert shown in (s.seed, s.seed + 1), f"session {s.i}: seed {shown}"
        s.seed = shown
    await _check_view(s, s.seed)
    return absorbed and not reload


async def _class(d: Balanced) -> tuple[list[Student], str, float]:
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        try:
            seats = await _seat(browser, d, PER_PROCESS)
            links = _links(d.url, len(seats))
            students = [
                Student(i, link, seed, ctx=ctx, key=key, backend=b)
                for i, ((ctx, key, b), (link, seed)) in enumerate(zip(seats, links, strict=True))
            ]
            await asyncio.gather(*(_open(s) for s in students))
            victim_port, victim_pid = d.apps[0]
            victim = d.backend(victim_port)
            killed_at = time.time()
            os.kill(victim_pid, signal.SIGKILL)  # a crash, not a clean shutdown
            moved = [s for s in students if s.backend == victim]
            stayed = [s for s in students if s.backend != victim]
            # one reloads, the other clicks
            absorbed = await asyncio.gather(
                *(_back_after_loss(s, k == 0) for k, s in enumerate(moved))
            )
            print(f"moved sessions whose first click was absorbed by the URL: {sum(absorbed)}")
            for s in stayed:  # the others noticed nothing: same websocket, still open
                assert (len(s.sockets), len(s.closed)) == (1, 0), f"session {s.i}"
            # and everyone's next click works
            await asyncio.gather(*(_click_seed(s, s in moved) for s in students))
            for s in stayed:
                assert (len(s.sockets), len(s.closed)) == (1, 0), f"session {s.i}"
            for s in students:
                await s.ctx.close()  # closes the websockets: nginx logs them now
        finally:
            await browser.close()
    return students, victim, killed_at


def _wait_for_websocket_lines(d: Balanced, students: list[Student]) -> list[Entry]:
    """nginx logs a websocket when it closes: wait until every one is in the log."""
    for _ in range(100):
        log = _log(d)
        got = {s.i: sum(e.key == s.key and e.status == 101 for e in log) for s in students}
        if all(got[s.i] >= len(s.sockets) for s in students):
            return log
        time.sleep(0.1)
    raise AssertionError(f"websocket lines missing from the access log: {got}")


@pytest.mark.browser
def test_balanced_deployment(deployment: Balanced) -> None:
    """One test, so that pytest-xdist starts one deployment, not one per worker."""
    d = deployment
    _metrics_blocked_health_allowed(d)
    _upload_size_matches_streamlit(d)
    _sticky_sessions_survive_a_process_loss(d)


def _sticky_sessions_survive_a_process_loss(d: Balanced) -> None:
    # its own thread: asyncio.run must not meet the sync API's loop of other tests
    with ThreadPoolExecutor(1) as pool:
        students, victim, killed_at = pool.submit(asyncio.run, _class(d)).result()
    survivor = next(d.backend(p) for p, _pid in d.apps if d.backend(p) != victim)
    log = _wait_for_websocket_lines(d, students)
    for s in students:
        mine = [e for e in log if e.key == s.key]
        before = [e for e in mine if e.start < killed_at - 0.05]
        after = [e for e in mine if e.start > killed_at + 0.05]
        # sticky: the page, its scripts, the websocket: all on the process nginx chose
        assert {e.upstreams for e in before} == {(s.backend,)}, (s.i, before)
        assert any(e.status == 101 and e.uri == "/_stcore/stream" for e in before), s.i
        # after the loss, everything reaches the survivor (maybe after trying the dead one);
        # a student who stayed may have sent nothing but websocket messages since
        assert after or s.backend != victim, s.i
        assert {e.upstreams[-1] for e in after} <= {survivor}, (s.i, after)
        sockets = [e for e in mine if e.status == 101]
        assert len(sockets) == len(s.sockets), (s.i, sockets)
        assert len(sockets) == 1 or s.backend == victim, (s.i, sockets)
