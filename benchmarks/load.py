"""How large a class one server process serves: ramp concurrent sessions, time them.

Starts `streamlit run app.py`, then for each level (default 8, 16, 32) opens that
many sessions at once. Each session opens a page (the pages in turn) from its own
link, then changes its seed `--rounds` times, as a student clicking "+" would;
every change gives new data, so each rerun computes rather than hits a cache.
The server's resident memory (VmRSS) is sampled throughout, and its CPU seconds
per script run (from /proc/<pid>/stat) are printed: unlike response times, that
number hardly depends on what else the machine is doing, so it sizes the class
(script runs hold Python's GIL most of the time: one process gets through about
one CPU-second of runs per second). Levels can be run `--repeat` times: with
bounded caches the memory after each pass stays flat.

Two kinds of client:

- `ws` (default): a light client speaking Streamlit's websocket protocol (the
  protobuf BackMsg/ForwardMsg the browser sends), timing from the request to the
  server's "script finished". It measures the server alone: 32 Chromium pages on
  the same 2 cores would mostly measure Chromium.
- `chromium`: real headless Chromium contexts (one browser), timing from the click
  to a finished run on screen. Heavy: fine for 8, slow at 32 on 2 cores.

`--balanced 1,2` runs the levels through scripts/serve.sh's nginx (cookie affinity,
see deploy/nginx.conf.template) with 1, then 2 app processes, and ends with a table
per process count: clicks' p50/p90, peak RSS of each process, CPU-seconds per script
run over all processes. Each simulated student first fetches /_stcore/health to get
its affinity cookie, as a browser's first request does, so nginx spreads the
sessions as it would spread browsers.

`--picks P` gives the class the students' own mix of clicks: on /axes each click is a
cell pick with probability P (the "Selected cell" number input, inside the explorer's
fragment: the browser's message names the fragment, so only it reruns), otherwise a
seed change; the tables print the two kinds apart and together. (Exploratory clicks
answered in the browser, such as the step-through player's, send nothing to time.)

Each session checks that the server wrote its own seed (or cell) back to its URL (no
cross-talk). `--same-link` makes everyone follow the teacher's link and clicks
(the caches are shared, so only the first student of each step computes);
`--think S` spreads the clicks out as students reading in between do. Run:

    python -m benchmarks.load [--levels 8,16,32] [--rounds 3] [--client ws|chromium]
                              [--same-link] [--think 10] [--repeat 2] [--per-session]
                              [--balanced 1,2]
    python -m benchmarks.load --levels 64 --balanced 1,2     # docs/serving.md's table
    python -m benchmarks.load --levels 64,128 --balanced 1,2 --picks 0.5   # the students' mix
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from benchmarks.common import (
    CHROMIUM,
    CHROMIUM_ARGS,
    DONE_JS,
    cap_shapes,
    cpu_seconds,
    page_ids,
    query_for,
    rss_mb,
    serve,
    serve_balanced,
    url_path,
)
from ui.pages import controls
from ui.params import max_elements
from ui.state import key

RUN_FINISHED_EARLY = 2  # ForwardMsg.ScriptFinishedStatus.FINISHED_EARLY_FOR_RERUN


@dataclass
class Session:
    """One simulated student: what it opened and how long each step took."""

    i: int
    page: str
    first: float = float("nan")  # s, open the link -> script finished
    reruns: list[float] = field(default_factory=list)  # s, change seed -> finished
    picks: list[float] = field(default_factory=list)  # s, pick a cell (/axes) -> finished
    error: str = ""

    @property
    def clicks(self) -> list[float]:
        """Every click's time, seed changes and cell picks."""
        return self.reruns + self.picks


CAP_PAGE = "distributions"  # --cap: the page whose first run at the cap costs the most


def _link(i: int, level: int, same: bool, cap: bool = False) -> tuple[str, int]:
    """(query string, seed) for session i: its own, or the teacher's link for everyone;
    with `cap`, a full link at a cap-sized shape (its own seed: every session computes)."""
    if cap:
        layout = "BTC" if i % 2 == 0 else "NCHW"
        seed = 1000 * level + i
        query = {**query_for(layout, cap_shapes(layout)["balanced"]), "seed": str(seed)}
        return urllib.parse.urlencode(query), seed
    if same:
        return "layout=BTC&seed=424242", 424242
    seed = 1000 * level + i
    layout = "BTC" if i % 2 == 0 else "NCHW"
    return f"layout={layout}&seed={seed}", seed


async def _think(think: float) -> None:
    """A student reading before the next click: uniform in [0, 2·think] seconds."""
    if think > 0:
        await asyncio.sleep(random.uniform(0, 2 * think))


# ---- websocket client ----------------------------------------------------------------


def _affinity_cookie(url: str) -> dict[str, str]:
    """A browser's first request: behind scripts/serve.sh's nginx it sets the affinity
    cookie, which then picks the session's process. Headers for the websocket."""
    with urllib.request.urlopen(f"{url}/_stcore/health", timeout=60) as r:
        cookies = [c.split(";", 1)[0] for c in r.headers.get_all("Set-Cookie") or []]
    return {"Cookie": "; ".join(cookies)} if cookies else {}


async def _ws_elements(ws) -> list:  # type: ignore[no-untyped-def, type-arg]
    """Read ForwardMsgs to the end of a run; return its new elements, (element, fragment
    id) each: a first run's widgets give their ids."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    elements = []
    while True:
        f = ForwardMsg()
        f.ParseFromString(await ws.recv())
        kind = f.WhichOneof("type")
        if kind == "delta" and f.delta.WhichOneof("type") == "new_element":
            elements.append((f.delta.new_element, f.delta.fragment_id))
        elif kind == "script_finished" and f.script_finished != RUN_FINISHED_EARLY:
            return elements


async def _ws_until_finished(ws, want_seed: int | None = None) -> str:
    """Read ForwardMsgs to the end of a run; return the last query string written."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    query = ""
    while True:
        f = ForwardMsg()
        f.ParseFromString(await ws.recv())
        kind = f.WhichOneof("type")
        if kind == "page_info_changed":
            query = f.page_info_changed.query_string
        elif kind == "script_finished" and f.script_finished != RUN_FINISHED_EARLY:
            return query
        elif kind == "delta" and f.delta.WhichOneof("type") == "new_element":
            el = f.delta.new_element
            if el.WhichOneof("type") == "exception":
                raise RuntimeError(f"exception: {el.exception.message[:80]}")


PICK = "cell_c"  # the /axes cell input a cell pick moves (both layouts have C): its URL name
PICK_KEY = key("axes", PICK)  # and its page-scoped widget key


def _widget(messages: list, key: str) -> tuple[str, str, bool]:
    """(widget id, fragment id or "", takes an int) of the widget with user key `key`,
    from the first run's (element, fragment id) pairs."""
    for el, fragment in messages:
        kind = el.WhichOneof("type")
        wid = getattr(getattr(el, kind), "id", "")
        if wid.endswith(f"-{key}"):
            is_int = kind == "number_input" and el.number_input.data_type == el.number_input.INT
            return wid, fragment, is_int
    raise RuntimeError(f"no widget with key {key!r} on the page")


def _set(w, is_int: bool, value: int) -> None:
    if is_int:
        w.int_value = value
    else:
        w.double_value = value


async def ws_session(
    url: str,
    s: Session,
    level: int,
    rounds: int,
    same: bool = False,
    think: float = 0.0,
    cap: bool = False,
    picks: float = 0.0,
) -> None:
    """Open the page over the websocket, then click `rounds` times: change the seed, or on
    /axes pick a cell with probability `picks`."""
    import websockets
    from streamlit.proto.BackMsg_pb2 import BackMsg

    query, seed = _link(s.i, level, same, cap)
    try:
        await _think(think)  # students do not all arrive in the same second
        headers = await asyncio.to_thread(_affinity_cookie, url)
        async with websockets.connect(
            url.replace("http", "ws") + "/_stcore/stream",
            subprotocols=["streamlit"],  # type: ignore[list-item]
            additional_headers=headers,
            max_size=None,
            open_timeout=120,
        ) as ws:
            msg = BackMsg()
            msg.rerun_script.query_string = query
            msg.rerun_script.page_name = url_path(s.page)
            t0 = time.perf_counter()
            await ws.send(msg.SerializeToString())
            # read the first run ourselves: we need the seed widget's id from it
            elements = await _ws_elements(ws)
            s.first = time.perf_counter() - t0
            seed_id, _, seed_int = _widget(elements, "seed")
            pick = _widget(elements, PICK_KEY) if picks > 0 and s.page == "axes" else None
            rng = random.Random(s.i)
            state = {seed_id: (seed_int, seed)}  # what the browser sends: every value set
            cell = 0
            for r in range(rounds):
                await _think(think)
                msg = BackMsg()
                msg.rerun_script.query_string = query
                msg.rerun_script.page_name = url_path(s.page)
                if pick is not None and rng.random() < picks:
                    cell = cell % 3 + 1  # 1, 2, 3, 1, ...: a new cell every time
                    state[pick[0]] = (pick[2], cell)
                    msg.rerun_script.fragment_id = pick[1]  # the explorer's fragment alone
                    want, times = f"{PICK}={cell}", s.picks
                else:
                    seed += 7919  # new data each time (the same for all with --same-link)
                    state[seed_id] = (seed_int, seed)
                    want, times = f"seed={seed}", s.reruns
                for wid, (is_int, value) in state.items():
                    w = msg.rerun_script.widget_states.widgets.add()
                    w.id = wid
                    _set(w, is_int, value)
                t0 = time.perf_counter()
                await ws.send(msg.SerializeToString())
                written = await _ws_until_finished(ws)
                times.append(time.perf_counter() - t0)
                if want not in written.split("&"):
                    raise RuntimeError(f"round {r}: the URL says {written!r}, not {want}")
    except Exception as e:  # a failed session is a result, not a crash of the benchmark
        s.error = f"{type(e).__name__}: {str(e)[:120]}"


# ---- Chromium client -----------------------------------------------------------------


async def chromium_session(
    browser, url: str, s: Session, level: int, rounds: int, same: bool, think: float, cap: bool
) -> None:
    """Open the page in a fresh context, then click "+" on the seed `rounds` times."""
    query, seed = _link(s.i, level, same, cap)
    ctx = await browser.new_context(viewport={"width": 1400, "height": 900})
    try:
        await _think(think)
        p = await ctx.new_page()
        p.set_default_timeout(600_000)
        t0 = time.perf_counter()
        await p.goto(f"{url}/{url_path(s.page)}?{query}")
        await p.wait_for_function(DONE_JS, timeout=600_000, polling=50)
        s.first = time.perf_counter() - t0
        plus = p.locator(
            "[data-testid=stSidebarUserContent] .st-key-seed [data-testid=stNumberInputStepUp]"
        )
        for _ in range(rounds):
            await _think(think)
            seed += 1
            t0 = time.perf_counter()
            await plus.click()
            await p.wait_for_function(
                "s => new URLSearchParams(location.search).get('seed') === s",
                arg=str(seed),
                timeout=600_000,
                polling=50,
            )
            await p.wait_for_function(DONE_JS, timeout=600_000, polling=50)
            s.reruns.append(time.perf_counter() - t0)
    except Exception as e:
        s.error = f"{type(e).__name__}: {str(e)[:120]}"
    finally:
        await ctx.close()


# ---- the ramp ------------------------------------------------------------------------


def _rss(pids: tuple[int, ...]) -> list[float]:
    return [rss_mb(p) for p in pids]


def _cpu(pids: tuple[int, ...]) -> float:
    return sum(cpu_seconds(p) for p in pids)


async def _sample_rss(pids: tuple[int, ...], peak: list[float], stop: asyncio.Event) -> None:
    while not stop.is_set():
        peak[:] = [max(a, b) for a, b in zip(peak, _rss(pids), strict=True)]
        await asyncio.sleep(0.2)


async def level_run(
    url: str, pids: tuple[int, ...], n: int, args: argparse.Namespace, browser
) -> dict:
    """n sessions at once; times and memory (RSS per process; CPU over all of them)."""
    pages = click_pages(args.pages)
    if args.cap:
        page_of = lambda i: CAP_PAGE  # noqa: E731
    elif args.same_link:
        page_of = lambda i: pages[0]  # noqa: E731
    else:
        page_of = lambda i: pages[i % len(pages)]  # noqa: E731
    sessions = [Session(i, page_of(i)) for i in range(n)]
    kw = {"rounds": args.rounds, "same": args.same_link, "think": args.think, "cap": args.cap}
    before, cpu0, client0 = _rss(pids), _cpu(pids), time.process_time()
    peak, stop = list(before), asyncio.Event()
    sampler = asyncio.create_task(_sample_rss(pids, peak, stop))
    t0 = time.perf_counter()
    if args.client == "ws":
        await asyncio.gather(*(ws_session(url, s, n, **kw, picks=args.picks) for s in sessions))
    else:
        await asyncio.gather(*(chromium_session(browser, url, s, n, **kw) for s in sessions))
    wall = time.perf_counter() - t0
    stop.set()
    await sampler
    cpu, client = _cpu(pids) - cpu0, time.process_time() - client0
    runs = sum(1 + len(s.clicks) for s in sessions)
    if args.settle > 0:  # the sessions are closed: what memory comes back
        await asyncio.sleep(args.settle)
    return {
        "n": n,
        "sessions": sessions,
        "wall": wall,
        "rss": (before, peak, _rss(pids)),  # MB per process
        "cpu_per_run": cpu / max(1, runs),
        # the simulated students share this machine's cores with the server
        "client_cpu": client,
    }


# The training lab trains networks on every new seed (about 2 CPU-s a run, one run at a
# time per process: normviz.training.train.GATE); its queue is measured on its own,
# with --pages training, not mixed into the class's clicks.
HEAVY_PAGES = ("training",)


def click_pages(wanted: str = "") -> list[str]:
    """The pages a student clicks: those whose sidebar has the seed (the click), in map
    order; `wanted` (comma-separated) picks some, else all but the heavy ones."""
    seeded = [p for p in page_ids() if "seed" in controls(url_path(p))]
    if not wanted:
        return [p for p in seeded if p not in HEAVY_PAGES]
    picked = [p for p in wanted.split(",") if p]
    bad = [p for p in picked if p not in seeded]
    if bad:
        raise SystemExit(f"--pages: {', '.join(bad)} has no seed to click; choose from {seeded}")
    return picked


def _p90(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(0.9 * (len(xs) - 1)))]


def _stats(xs: list[float]) -> str:
    if not xs:
        return f"{'-':>20}"
    return f"{statistics.median(xs):6.2f} {_p90(xs):6.2f} {max(xs):6.2f}"


def _mb(xs: list[float]) -> str:
    return "+".join(f"{x:.0f}" for x in xs)


@contextmanager
def _server(processes: int | None) -> Iterator[tuple[str, tuple[int, ...]]]:
    """(URL, app pids): one `streamlit run` directly, or scripts/serve.sh's nginx."""
    if processes is None:
        with serve() as (url, pid):
            yield url, (pid,)
    else:
        with serve_balanced(processes) as d:
            yield d.url, d.pids


async def run_levels(args: argparse.Namespace, processes: int | None) -> list[dict]:
    """Every level (and pass) on a fresh deployment; print a line per level."""
    levels = [int(v) for v in args.levels.split(",")]
    with _server(processes) as (url, pids):
        browser = pw = None
        if args.client == "chromium":
            from playwright.async_api import async_playwright

            pw = await async_playwright().start()
            browser = await pw.chromium.launch(
                executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
            )
        # one warm-up session: the server imports torch, plotly, ... on its first run
        # (scripts/serve.sh has already run app.py once in each of its processes)
        warm = Session(0, click_pages(args.pages)[0])
        await ws_session(url, warm, 0, 0)
        where = "one process" if processes is None else f"{processes} behind nginx"
        print(f"\n{where}: up, RSS {_mb(_rss(pids))} MB after one warm-up session")
        print(
            f"{'pass':>4} {'sessions':>8} {'ok':>4}  {'first load s (med p90 max)':>26}  "
            f"{'seed change s (med p90 max)':>27}  {'cell pick s (med p90 max)':>26}  "
            f"{'wall s':>7}  {'CPU s/run':>9}  "
            f"{'client CPU s':>12}  RSS MB per process before/peak/after"
        )
        results = []
        for rep in range(args.repeat):
            for n in levels:
                r = await level_run(url, pids, n, args, browser)
                ok = [s for s in r["sessions"] if not s.error]
                firsts = [s.first for s in ok]
                reruns = [t for s in ok for t in s.reruns]
                picked = [t for s in ok for t in s.picks]
                b, peak, after = r["rss"]
                print(
                    f"{rep + 1:>4} {n:>8} {len(ok):>4}  {_stats(firsts):>26}  "
                    f"{_stats(reruns):>27}  {_stats(picked):>26}  "
                    f"{r['wall']:7.1f}  {r['cpu_per_run']:9.2f}  "
                    f"{r['client_cpu']:12.1f}  "
                    f"{_mb(b)}/{_mb(peak)}/{_mb(after)}",
                    flush=True,
                )
                for s in r["sessions"]:
                    if s.error:
                        print(f"     session {s.i} ({s.page}): {s.error}")
                results.append(r)
        if args.per_session:
            print("\nper session (last pass): page, first load s, seed changes s")
            for r in results[-len(levels) :]:
                for s in r["sessions"]:
                    reruns = " ".join(f"{t:.2f}" for t in s.clicks)
                    print(f"  n={r['n']:<3} #{s.i:<3} {s.page:15} {s.first:6.2f}  {reruns}")
        if browser is not None:
            await browser.close()
            await pw.stop()
    return results


async def main_async(args: argparse.Namespace) -> None:
    if not args.balanced:
        await run_levels(args, None)
        return
    summary = []
    for processes in (int(v) for v in args.balanced.split(",")):
        for r in await run_levels(args, processes):
            summary.append((processes, r))
    print(
        "\nbehind nginx (scripts/serve.sh):\n"
        f"{'processes':>9} {'students':>8} {'ok':>4}  {'click p50':>9} {'click p90':>9}  "
        f"{'seed p90':>8} {'pick p90':>8}  "
        f"{'first p50':>9} {'first p90':>9}  {'peak RSS MB per process':>23}  CPU s/run  "
        "client CPU s"
    )
    for processes, r in summary:
        ok = [s for s in r["sessions"] if not s.error]
        clicks = [t for s in ok for t in s.clicks] or [float("nan")]
        seeds = [t for s in ok for t in s.reruns] or [float("nan")]
        picked = [t for s in ok for t in s.picks] or [float("nan")]
        firsts = [s.first for s in ok] or [float("nan")]
        print(
            f"{processes:>9} {r['n']:>8} {len(ok):>4}  {statistics.median(clicks):9.2f} "
            f"{_p90(clicks):9.2f}  {_p90(seeds):8.2f} {_p90(picked):8.2f}  "
            f"{statistics.median(firsts):9.2f} {_p90(firsts):9.2f}  "
            f"{_mb(r['rss'][1]):>23}  {r['cpu_per_run']:9.2f}  {r['client_cpu']:12.1f}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--levels", default="8,16,32")
    ap.add_argument("--rounds", type=int, default=3, help="seed changes per session")
    ap.add_argument("--client", choices=("ws", "chromium"), default="ws")
    ap.add_argument(
        "--pages",
        default="",
        help="comma-separated pages the students click (default: every page with a seed "
        f"in its sidebar but {', '.join(HEAVY_PAGES)})",
    )
    ap.add_argument("--repeat", type=int, default=1, help="passes over the levels")
    ap.add_argument("--per-session", action="store_true", help="print every session's times")
    ap.add_argument(
        "--same-link",
        action="store_true",
        help="everyone follows the teacher: one page, the same link and the same seed changes",
    )
    ap.add_argument(
        "--think", type=float, default=0.0, help="mean seconds a student waits before each step"
    )
    ap.add_argument(
        "--cap",
        action="store_true",
        help=f"everyone opens /{CAP_PAGE} at a cap-sized shape (memory at the cap; "
        "e.g. --levels 30 --rounds 0 --repeat 4)",
    )
    ap.add_argument(
        "--settle",
        type=float,
        default=0.0,
        help="seconds to wait after each level before reading RSS 'after'",
    )
    ap.add_argument(
        "--picks",
        type=float,
        default=0.0,
        help="the students' own mix: on /axes a click is a cell pick with this probability "
        "(else a seed change), e.g. 0.5",
    )
    ap.add_argument(
        "--balanced",
        default="",
        help="through scripts/serve.sh's nginx with these process counts, e.g. 1,2",
    )
    args = ap.parse_args()
    print(
        f"cap {max_elements():,} elements; students click "
        f"{', '.join(click_pages(args.pages))}; client {args.client}; "
        f"{'one shared link' if args.same_link else 'a link per student'}; think {args.think} s; "
        f"cell picks on /axes {args.picks:.0%} of clicks"
    )
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
