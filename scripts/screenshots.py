"""Regenerate assets/screenshots/<page>.png for every page, for the README.

Starts `streamlit run app.py`, opens each page in headless Chromium at 1400x900,
waits for the script run to finish and the charts to draw, and saves the
viewport. The home page is saved as home.png. Run from the repository root:

    python scripts/screenshots.py [--pages axes,choose] [--presenter] [--out DIR]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: make benchmarks/ and normviz/ importable

from benchmarks.common import CHROMIUM, CHROMIUM_ARGS, DONE_JS, page_ids, serve, url_path  # noqa: E402

SHOTS = ROOT / "assets" / "screenshots"
# Every chart has drawn its SVG (or WebGL canvas): Plotly renders after the script ends.
CHARTS_JS = """() => [...document.querySelectorAll('[data-testid=stPlotlyChart]')]
    .every(c => c.querySelector('.main-svg'))"""


def shoot(pages: list[str], presenter: bool, out: Path = SHOTS) -> list[Path]:
    """One PNG per page in `out`; returns the paths written."""
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    written = []
    with serve() as (url, _pid), sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        for page in pages:
            ctx = browser.new_context(viewport={"width": 1400, "height": 900})
            p = ctx.new_page()
            p.set_default_timeout(300_000)
            p.goto(f"{url}/{url_path(page)}")
            p.wait_for_function(DONE_JS, polling=100)
            if presenter:
                p.locator("[data-testid=stSidebarUserContent] .st-key-presenter label").click()
                p.wait_for_timeout(300)
                p.wait_for_function(DONE_JS, polling=100)
            p.wait_for_function(CHARTS_JS, polling=100)
            p.wait_for_timeout(800)  # transitions and fonts settle
            path = out / f"{page}.png"
            p.screenshot(path=str(path), full_page=False)
            written.append(path)
            print(f"wrote {path}", flush=True)
            ctx.close()
        browser.close()
    return written


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pages", default="", help="comma list (default: every page)")
    ap.add_argument("--presenter", action="store_true", help="presenter mode (larger text)")
    ap.add_argument("--out", type=Path, default=SHOTS, help="folder (default assets/screenshots)")
    args = ap.parse_args()
    pages = [p for p in page_ids() if not args.pages or p in args.pages.split(",")]
    shoot(pages, args.presenter, args.out)


if __name__ == "__main__":
    main()
