"""Regenerate assets/screenshots/ for every page, for the README.

Starts `streamlit run app.py`, opens each page in headless Chromium, waits for the
script run to finish and the charts to draw, and saves the viewport: <page>.png at
1400x900, <page>-present.png at a projector's 1280x720 in presenter mode
(`?present=1`: larger everything, the sidebar folded), and <page>-phone.png at a
phone's 390x844 (a mobile, touch browser context, as tests/layout_probe.py uses).
The home page is home.png.
Run from the repository root:

    python scripts/screenshots.py [--pages axes,choose] [--views laptop,present] [--out DIR]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: make benchmarks/ and normviz/ importable

from benchmarks.common import CHROMIUM, CHROMIUM_ARGS, DONE_JS, page_ids, serve, url_path  # noqa: E402
from tests.layout_probe import PHONE  # noqa: E402  (a phone's browser context)

SHOTS = ROOT / "assets" / "screenshots"
# Every chart has drawn its SVG (or WebGL canvas): Plotly renders after the script ends.
CHARTS_JS = """() => [...document.querySelectorAll('[data-testid=stPlotlyChart]')]
    .every(c => c.querySelector('.main-svg'))"""


# view name -> (viewport, query string, file suffix, a phone: mobile and touch)
VIEWS: dict[str, tuple[dict[str, int], str, str, bool]] = {
    "laptop": ({"width": 1400, "height": 900}, "", "", False),
    "present": ({"width": 1280, "height": 720}, "?present=1", "-present", False),
    "phone": ({"width": 390, "height": 844}, "", "-phone", True),
}


def shoot(pages: list[str], views: tuple[str, ...] = tuple(VIEWS), out: Path = SHOTS) -> list[Path]:
    """One PNG per page and view in `out`; returns the paths written."""
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    written = []
    with serve() as (url, _pid), sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        for view in views:
            viewport, query, suffix, phone = VIEWS[view]
            ctx = browser.new_context(viewport=viewport, **(PHONE if phone else {}))
            p = ctx.new_page()
            p.set_default_timeout(300_000)
            for page in pages:
                p.goto(f"{url}/{url_path(page)}{query}")
                p.wait_for_function(DONE_JS, polling=100)
                p.wait_for_function(CHARTS_JS, polling=100)
                p.wait_for_timeout(800)  # transitions and fonts settle
                path = out / f"{page}{suffix}.png"
                p.screenshot(path=str(path), full_page=False)
                written.append(path)
                print(f"wrote {path}", flush=True)
            ctx.close()
        browser.close()
    return written


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pages", default="", help="comma list (default: every page)")
    ap.add_argument("--views", default=",".join(VIEWS), help="comma list of " + ", ".join(VIEWS))
    ap.add_argument("--out", type=Path, default=SHOTS, help="folder (default assets/screenshots)")
    args = ap.parse_args()
    pages = [p for p in page_ids() if not args.pages or p in args.pages.split(",")]
    shoot(pages, tuple(args.views.split(",")), args.out)


if __name__ == "__main__":
    main()
