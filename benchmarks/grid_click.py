"""How fast the tensor grid answers a click on /axes, idle and under a class's load.

Starts `streamlit run app.py` (app.py logs its runs: ui.route.RUN_LOG), opens /axes in
headless Chromium and clicks `--clicks` cells of the flat view (the tensor grid), one
after another. For each click it times, in the page (performance.now from the
pointerdown):

- click → highlight: the clicked cell is selected and the panel under the grid shows
  its numbers (drawn by grid.js, no server involved), to the next painted frame;
- click → updated numbers: the server's answer, the group section's sentence naming
  the new cell, on screen.

It prints p50/p90 of both, the script runs per click the browser saw (the explorer
fragment's rerun) and how many of them were app.py's, and the server's CPU-seconds
per click (from /proc). Then the same with `--students` simulated students
(benchmarks.load's websocket client) changing seeds on the same server all along.
A script, not a test: the lead runs the real numbers on a quiet machine.

    python -m benchmarks.grid_click [--clicks 20] [--students 64]
    python -m benchmarks.grid_click --clicks 4 --students 4     # a quick check
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import threading
from pathlib import Path

from benchmarks.common import CHROMIUM, CHROMIUM_ARGS, ROOT, cpu_seconds, serve
from benchmarks.load import Session, click_pages, ws_session
from ui.route import RUN_LOG

SHAPE = (4, 6, 8)
KEY = ".st-key-axes_flat_view"
# installed once per page: counts script runs (the app's script-state attribute going to
# "running"), and from each pointerdown on a grid cell checks every animation frame for
# the highlight (the cell selected, its numbers in the panel: grid.js's work), then for
# the server's sentence naming the cell; each time is taken at the frame that shows it
PROBE = """() => {
  const app = document.querySelector('[data-testid=stApp]');
  window.__runs = 0;
  new MutationObserver(() => {
    if (app.getAttribute('data-test-script-state') === 'running') window.__runs++;
  }).observe(app, {attributes: true, attributeFilter: ['data-test-script-state']});
  window.__times = [];
  document.addEventListener('pointerdown', (ev) => {
    const cell = ev.composedPath().find(e => e.classList && e.classList.contains('tg-cell'));
    if (!cell) return;
    const t0 = performance.now();
    const name = cell.getAttribute('aria-label').split(', x =')[0];
    const info = cell.getRootNode().querySelector('.tg-info');
    const want = 'The cell ' + name + ' takes its statistics';
    const out = {name};
    const step = () => {
      const t = performance.now();  // in the frame's callback, before it is painted
      if (out.lit === undefined) {
        if (cell.classList.contains('tg-sel') && info.innerText.startsWith('Cell ' + name + ':'))
          out.lit = t - t0;
      } else if (document.body.innerText.includes(want)) {
        out.numbers = t - t0;
        window.__times.push(out);
        return;
      }
      requestAnimationFrame(step);
    };
    requestAnimationFrame(step);
  }, true);
}"""


def _p(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


def _cells(n: int) -> list[tuple[int, int, int]]:
    """n distinct cells spread over the tensor (never the first, selected at the start)."""
    total = SHAPE[0] * SHAPE[1] * SHAPE[2]
    out = []
    for k in range(n):
        i = 1 + (k * 37) % (total - 1)
        out.append((i // (SHAPE[1] * SHAPE[2]), (i // SHAPE[2]) % SHAPE[1], i % SHAPE[2]))
    return out


def clicks(browser, url: str, pid: int, log: Path, n: int) -> dict:
    """Click n cells of /axes's grid; times (ms), runs and server CPU per click."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    p = ctx.new_page()
    p.set_default_timeout(300_000)
    try:
        p.goto(f"{url}/axes?layout=BTC&B=4&T=6&C=8&method=layer")
        p.locator(f"{KEY} [role=gridcell]").first.wait_for()
        p.get_by_text("The cell B=0, T=0, C=0 takes its statistics").wait_for()
        p.wait_for_timeout(1000)
        p.evaluate(PROBE)
        app0, cpu0 = len(log.read_text().splitlines()), cpu_seconds(pid)
        lit, numbers = [], []
        for cell in _cells(n):
            i = (cell[0] * SHAPE[1] + cell[1]) * SHAPE[2] + cell[2]
            name = ", ".join(f"{a}={k}" for a, k in zip("BTC", cell, strict=True))
            box = p.locator(f"{KEY} [role=gridcell]").nth(i)
            box.scroll_into_view_if_needed()
            box.click()
            p.wait_for_function(f"() => window.__times.length > {len(lit)}")
            got = p.evaluate(f"() => window.__times[{len(lit)}]")
            assert got["name"] == name, (got, name)
            lit.append(got["lit"])
            numbers.append(got["numbers"])
            p.wait_for_function(
                "() => document.querySelector('[data-testid=stApp]')"
                ".getAttribute('data-test-script-state') === 'notRunning'"
            )
        runs = p.evaluate("() => window.__runs")
        return {
            "lit": lit,
            "numbers": numbers,
            "runs": runs / n,
            "app_runs": (len(log.read_text().splitlines()) - app0) / n,
            "cpu": (cpu_seconds(pid) - cpu0) / n,
        }
    finally:
        ctx.close()


def _load(url: str, students: int, stop: threading.Event) -> threading.Thread:
    """`students` websocket students changing seeds on `url` until `stop` is set."""
    pages = click_pages()

    async def student(i: int) -> None:
        while not stop.is_set():
            await ws_session(url, Session(i, pages[i % len(pages)]), students, rounds=3)

    def run() -> None:
        async def main() -> None:
            await asyncio.gather(*(student(i) for i in range(students)))

        asyncio.run(main())

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def _row(label: str, r: dict, loaded: bool) -> str:
    app = "–" if loaded else f"{r['app_runs']:.2f}"  # the students run app.py too
    cpu = "–" if loaded else f"{r['cpu']:.3f}"  # under load: mostly the students' runs
    return (
        f"{label:<16} {statistics.median(r['lit']):>8.1f} {_p(r['lit'], 0.9):>8.1f}  "
        f"{statistics.median(r['numbers']):>8.0f} {_p(r['numbers'], 0.9):>8.0f}  "
        f"{r['runs']:>9.2f} {app:>8} {cpu:>9}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clicks", type=int, default=20, help="cells clicked per measurement")
    ap.add_argument("--students", type=int, default=64, help="simulated students (0: idle only)")
    ap.add_argument("--warmup", type=float, default=5.0, help="s of load before clicking")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    log = ROOT / ".pytest_cache" / "grid-click-runs.log"
    log.parent.mkdir(exist_ok=True)
    log.write_text("")
    rows = []
    with serve(env={RUN_LOG: str(log)}) as (url, pid), sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        rows.append(("idle", clicks(browser, url, pid, log, args.clicks)))
        if args.students:
            stop = threading.Event()
            t = _load(url, args.students, stop)
            try:
                threading.Event().wait(args.warmup)
                rows.append(
                    (f"{args.students} students", clicks(browser, url, pid, log, args.clicks))
                )
            finally:
                stop.set()
                t.join(timeout=120)
        browser.close()
    print(f"/axes flat view (tensor grid), {args.clicks} clicks each; times in ms")
    print(
        f"{'server':<16} {'lit p50':>8} {'lit p90':>8}  {'nums p50':>8} {'nums p90':>8}  "
        f"{'runs/click':>9} {'app.py':>8} {'CPU-s/clk':>9}"
    )
    for k, (label, r) in enumerate(rows):
        print(_row(label, r, loaded=k > 0))
    print(
        "lit: click → the group highlighted and its numbers in the panel (in the browser); "
        "nums: click → the server's worked numbers on screen. runs/click: script runs the "
        "browser saw (the explorer fragment), app.py: runs of app.py among them (idle only). "
        "CPU-s/clk: the server's CPU per click (idle only: under load it is the students' runs)."
    )


if __name__ == "__main__":
    main()
