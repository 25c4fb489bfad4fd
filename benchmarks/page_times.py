"""Script time of every page (AppTest through app.py) and browser time in Chromium.

For each page and setting (the defaults; the largest shapes under the element cap,
one per layout) it prints:

- script cold: the first run with empty caches (what a student waits for after
  changing a size), best of --repeat;
- script rerun: the next run of the same session with nothing changed (every
  widget interaction reruns the script), best of --repeat;
- browser cold / warm: from navigation in headless Chromium to the script having
  finished (connected, script not running, no skeletons), on a fresh server
  cache and then again in a new browser context.

Targets (docs/architecture.md, Budgets): rerun at defaults well under 0.5 s (we flag >= 0.25 s as
"near" and >= 0.5 s as a miss); cold at the cap under 2 s. A miss prints a
cProfile of the page's run (which calls are slow). Run:

    python -m benchmarks.page_times [--repeat 3] [--no-browser] [--pages axes,home]
    python -m benchmarks.page_times --sweep     # every cap shape x every method, script only
    python -m benchmarks.page_times --data smollm2 --no-browser  # a real data source

With --data, the setting is that source at its defaults on the pages that take one; the
model's first load (gated and queued like other heavy work) is timed and printed on its
own before the table, so "cold" is a page's first run once the model is in memory.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import time
from collections.abc import Callable
from dataclasses import dataclass

import streamlit as st
from streamlit.navigation.page import StreamlitPage

from benchmarks.common import (
    CHROMIUM,
    CHROMIUM_ARGS,
    DONE_JS,
    app_test,
    cap_shapes,
    page_ids,
    query_for,
    serve,
    shape_label,
    sidebar_drawn,
    url_path,
)
from normviz import STANDARD_METHODS
from ui.pages import controls
from ui.params import max_elements

DEFAULT_TARGET = 0.5  # s, rerun at default settings ("well under": flag from half of it)
CAP_TARGET = 2.0  # s, first run at the cap


@dataclass(frozen=True)
class Setting:
    """A named query string and the target that applies to it."""

    name: str
    query: dict[str, str]
    target: float
    at_cap: bool


def settings(sweep: bool = False, data: str = "") -> list[Setting]:
    """Defaults, then shapes at the cap (balanced per layout; every profile with --sweep);
    with `data`, that real source at its defaults only."""
    if data:
        return [Setting(f"data={data}", {"data": data}, DEFAULT_TARGET, False)]
    out = [Setting("default", {}, DEFAULT_TARGET, False)]
    methods = STANDARD_METHODS if sweep else ("batch",)
    for layout in ("BTC", "NCHW"):
        shapes = cap_shapes(layout)
        chosen = shapes if sweep else {"balanced": shapes["balanced"]}
        for shape in chosen.values():
            for m in methods:
                name = shape_label(layout, shape) + ("" if m == "batch" and not sweep else f" {m}")
                out.append(Setting(name, query_for(layout, shape, m), CAP_TARGET, True))
    return out


# ---- script time (AppTest) ----------------------------------------------------------


@dataclass(frozen=True)
class Timing:
    """Wall seconds of one run, and the CPU seconds the process spent in it.

    On a shared machine the wall time includes waiting for a core; the CPU time
    (all threads: the script thread and torch's) is what the run itself costs.
    """

    wall: float
    cpu: float

    @property
    def estimate(self) -> float:
        """The run's time on an idle machine, roughly: CPU time exceeds wall time only
        when torch used both cores, and wall time exceeds CPU time when others did."""
        return min(self.wall, self.cpu)


def _timed_run(at) -> Timing:
    c0, t0 = time.process_time(), time.perf_counter()
    at.run()
    return Timing(time.perf_counter() - t0, time.process_time() - c0)


def _best(ts: list[Timing]) -> Timing:
    return Timing(min(t.wall for t in ts), min(t.cpu for t in ts))


def script_times(page: str, query: dict[str, str], repeat: int) -> tuple[Timing, Timing, list[str]]:
    """(best cold run, best rerun, problems seen) for one page and query."""
    cold: list[Timing] = []
    warm: list[Timing] = []
    problems: list[str] = []
    for _ in range(repeat):
        st.cache_data.clear()
        st.cache_resource.clear()
        at = app_test(page, query)
        cold.append(_timed_run(at))
        warm.append(_timed_run(at))
        if at.exception:
            problems.append(f"exception: {at.exception[0].value[:100]}")
        if any("internal error" in e.value for e in at.error):
            problems.append("internal error")
        if not sidebar_drawn(at):
            problems.append("sidebar not drawn (page ran without app.py)")
    return _best(cold), _best(warm), sorted(set(problems))


def profile_page(page: str, query: dict[str, str], cold: bool, top: int = 18) -> str:
    """cProfile of the page's own run (StreamlitPage.run inside app.py), top calls."""
    prof = cProfile.Profile()
    original: Callable = StreamlitPage.run

    def run(self: StreamlitPage) -> None:
        prof.runcall(original, self)

    StreamlitPage.run = run  # type: ignore[method-assign]
    try:
        st.cache_data.clear()
        at = app_test(page, query)
        if not cold:
            StreamlitPage.run = original  # type: ignore[method-assign]
            at.run()
            StreamlitPage.run = run  # type: ignore[method-assign]
        at.run()
    finally:
        StreamlitPage.run = original  # type: ignore[method-assign]
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    stats.sort_stats("cumulative").print_stats(r"normviz|pages|ui/|plotly/io|to_json", top)
    lines = out.getvalue().splitlines()
    start = next((i for i, line in enumerate(lines) if "ncalls" in line), 0)
    return "\n".join(lines[start : start + top + 1])


# ---- browser time (Chromium) ---------------------------------------------------------


def browser_times(pages: list[str], sets: list[Setting]) -> dict[tuple[str, str], tuple]:
    """(cold, warm) seconds from navigation to a finished script, per (page, setting)."""
    from playwright.sync_api import sync_playwright

    out: dict[tuple[str, str], tuple] = {}
    with serve() as (url, _pid), sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        # one throw-away visit: the server imports torch, plotly, ... on the first run
        _visit(browser, url)
        for page in pages:
            for s in sets:
                qs = "&".join(f"{k}={v}" for k, v in s.query.items())
                target = f"{url}/{url_path(page)}" + (f"?{qs}" if qs else "")
                out[(page, s.name)] = (_visit(browser, target), _visit(browser, target))
        browser.close()
    return out


def _visit(browser, target: str) -> float:
    """Seconds from goto to the first finished script run, in a fresh context."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    p = ctx.new_page()
    try:
        t0 = time.perf_counter()
        p.goto(target)
        p.wait_for_function(DONE_JS, timeout=300_000, polling=50)
        return time.perf_counter() - t0
    finally:
        ctx.close()


# ---- the table -----------------------------------------------------------------------


def verdict(s: Setting, cold: float, warm: float) -> str:
    """Against the targets, judged on Timing.estimate (wall time depends on the load)."""
    if s.at_cap:
        return "ok" if cold < CAP_TARGET else "MISS (cold >= 2 s)"
    if warm >= DEFAULT_TARGET:
        return "MISS (rerun >= 0.5 s)"
    return "near (rerun >= 0.25 s)" if warm >= DEFAULT_TARGET / 2 else "ok"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--pages", default="", help="comma list (default: every page)")
    ap.add_argument("--no-browser", action="store_true")
    ap.add_argument("--sweep", action="store_true", help="every cap shape x method")
    ap.add_argument("--no-profile", action="store_true")
    ap.add_argument("--data", default="", help="a real data source, e.g. smollm2 or minilm")
    args = ap.parse_args()
    pages = [p for p in page_ids() if not args.pages or p in args.pages.split(",")]
    if args.data:
        pages = [p for p in pages if "data" in controls(url_path(p))]
    sets = settings(args.sweep, args.data)
    print(
        f"cap {max_elements():,} elements; {os.cpu_count()} cores; "
        f"load average {os.getloadavg()[0]:.1f}; best of {args.repeat}"
    )
    # warm the imports once so the first page does not pay for torch/plotly imports
    app_test(page_ids()[0]).run()
    if args.data:  # the model's first load, alone: later runs find it in memory
        c0, t0 = time.process_time(), time.perf_counter()
        app_test(pages[0], {"data": args.data}).run(timeout=600)
        print(
            f"first load of data={args.data} on /{pages[0]}: "
            f"{time.perf_counter() - t0:.1f} s wall, {time.process_time() - c0:.1f} CPU-s"
        )

    rows = []
    for page in pages:
        for s in sets:
            cold, warm, problems = script_times(page, s.query, args.repeat)
            rows.append((page, s, cold, warm, problems))
            print(
                f"  measured {page:15} {s.name:28} cold {cold.wall:6.3f} s "
                f"rerun {warm.wall:6.3f} s",
                flush=True,
            )
    browser = {} if args.no_browser or args.sweep else browser_times(pages, sets)

    print("\nscript: wall / CPU seconds per run; browser: wall seconds to a finished script")
    head = f"{'page':15} {'setting':28} {'cold wall/cpu':>14} {'rerun wall/cpu':>15}"
    head += "" if not browser else f" {'browser cold':>13} {'browser warm':>13}"
    print(head + "  verdict")
    misses = []
    for page, s, cold, warm, problems in rows:
        line = (
            f"{page:15} {s.name:28} {cold.wall:6.3f}/{cold.cpu:<7.3f} "
            f"{warm.wall:6.3f}/{warm.cpu:<8.3f}"
        )
        if browser:
            bc, bw = browser[(page, s.name)]
            line += f" {bc:13.2f} {bw:13.2f}"
        v = verdict(s, cold.estimate, warm.estimate)
        print(f"{line}  {v}{'; ' + '; '.join(problems) if problems else ''}")
        if v.startswith("MISS") or problems:
            misses.append((page, s))
    if misses and not args.no_profile:
        print("\nProfiles of the misses (page.run() only, cumulative seconds):")
        for page, s in misses:
            cold = s.at_cap
            print(f"\n== {page} at {s.name} ({'cold' if cold else 'rerun'}) ==")
            print(profile_page(page, s.query, cold))


if __name__ == "__main__":
    main()
