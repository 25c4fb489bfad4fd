"""First draw in Chromium: each page's time to fully drawn beside a bare one-chart page.

Two servers run side by side the same way (`streamlit run`, loopback, headless): the
app, and benchmarks/bare_page.py (a title and one plotly chart: the framework's floor).
Each round visits the bare page and then the app's page, each in a fresh browser
context, and times navigation → fully drawn: connected, the script finished, no
skeletons, every plotly chart on the page has drawn its SVG (and, on the app, the
shared sidebar is drawn). It prints per page the median of the rounds, the bare
page's median over the same rounds, their ratio (the aim: ≤ 1.2×), what the
websocket carried to the browser (MB) and how many charts the page drew. The first
visit of each page is left out (it fills the server's caches; `--cold` keeps it).
A benchmark, not a test: the lead runs the real numbers on a quiet machine.

    python -m benchmarks.first_draw [--rounds 5] [--pages axes,batchnorm] [--cold]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from benchmarks.common import CHROMIUM, CHROMIUM_ARGS, page_ids, serve, url_path

AIM = 1.2  # × the bare page
# Fully drawn. `app`: also wait for the shared sidebar (app.py draws it at the start of
# every run; before the first run the app already reports "notRunning").
DRAWN_JS = """app => {
    const root = document.querySelector('[data-testid=stApp]');
    if (!root || root.getAttribute('data-test-connection-state') !== 'CONNECTED'
        || root.getAttribute('data-test-script-state') !== 'notRunning') return false;
    if (app && !document.querySelector('[data-testid=stSidebarUserContent] .st-key-present'))
        return false;
    if (document.querySelectorAll('[data-testid*=keleton]').length) return false;
    const charts = [...document.querySelectorAll('[data-testid=stPlotlyChart]')];
    if (!app && charts.length === 0) return false;
    return charts.every(c => c.querySelector('.main-svg'));
}"""


def visit(browser, target: str, app: bool) -> tuple[float, int, int]:
    """(seconds to fully drawn, websocket bytes received, charts) in a fresh context."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    p = ctx.new_page()
    received = [0]

    def on_ws(ws) -> None:
        ws.on("framereceived", lambda data: received.__setitem__(0, received[0] + len(data)))

    p.on("websocket", on_ws)
    try:
        t0 = time.perf_counter()
        p.goto(target)
        p.wait_for_function(DRAWN_JS, arg=app, timeout=300_000, polling=50)
        took = time.perf_counter() - t0
        return took, received[0], p.locator("[data-testid=stPlotlyChart]").count()
    finally:
        ctx.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5, help="timed visits per page")
    ap.add_argument("--pages", default="", help="comma list (default: every page)")
    ap.add_argument("--cold", action="store_true", help="keep each page's first visit")
    args = ap.parse_args()
    pages = [p for p in page_ids() if not args.pages or p in args.pages.split(",")]
    from playwright.sync_api import sync_playwright

    print(f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}; {args.rounds} rounds")
    with (
        serve() as (app_url, _),
        serve(script="benchmarks/bare_page.py") as (bare_url, _),
        sync_playwright() as pw,
    ):
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        visit(browser, bare_url, False)  # the imports of each server's first run
        visit(browser, app_url, True)
        print(
            f"{'page':15} {'drawn s (med)':>13} {'bare s (med)':>12} {'ratio':>6} "
            f"{'MB sent':>8} {'charts':>6}  verdict"
        )
        for page in pages:
            target = f"{app_url}/{url_path(page)}"
            if not args.cold:
                visit(browser, target, True)  # fills the server's caches for this page
            bare, drawn, sent, charts = [], [], 0, 0
            for _ in range(args.rounds):
                bare.append(visit(browser, bare_url, False)[0])
                took, sent, charts = visit(browser, target, True)
                drawn.append(took)
            b, d = statistics.median(bare), statistics.median(drawn)
            ratio = d / b
            verdict = "ok" if ratio <= AIM else f"over {AIM}×"
            print(
                f"{page:15} {d:13.2f} {b:12.2f} {ratio:6.2f} {sent / 1e6:8.2f} {charts:6}  "
                f"{verdict}",
                flush=True,
            )
        browser.close()


if __name__ == "__main__":
    main()
