"""ui.chartload: a page with charts has the browser load plotly.js before its first chart
arrives; a page without charts does not load it at all."""

from __future__ import annotations

import time

import pytest
from conftest import run_app, wait_done

from benchmarks.common import page_ids, url_path
from ui import chartload
from ui.pages import charts


def test_the_chunk_is_the_one_the_frontend_imports():
    name = chartload.chunk()
    assert name and name.startswith("PlotlyChart.") and (chartload._JS / name).is_file()
    # the frontend's scripts import it by that name from their own folder
    importers = [
        p.name for p in chartload._JS.glob("*.js") if p.name != name and name in p.read_text()
    ]
    assert importers, f"no script of the frontend imports {name}"


@pytest.mark.parametrize("page", page_ids())
def test_the_page_map_says_which_pages_draw_charts(page):
    """ui.pages' `charts` is true of a page exactly when its first view draws a chart, and
    exactly then the run sends the script that loads the chart library."""
    at = run_app(url_path(page))
    drew = len(at.get("plotly_chart")) > 0
    sent = [e for e in at.sidebar.get("html") if "nv-chartload" in e.proto.body]
    assert charts(url_path(page)) == drew
    assert len(sent) == (1 if drew else 0)
    if sent:
        assert chartload.chunk() in sent[0].proto.body


def _timeline(browser, server: str, path: str) -> tuple[float | None, float | None]:
    """(when the browser asked for the plotly chunk, when the first chart's spec reached
    it over the websocket), on a fresh visit; None where it never happened."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    p = ctx.new_page()
    seen: dict[str, float] = {}

    def on_request(req) -> None:
        if "/static/js/PlotlyChart." in req.url:
            seen.setdefault("chunk", time.monotonic())

    def on_frame(data) -> None:
        if isinstance(data, bytes) and b'"layout"' in data:  # a plotly spec (JSON)
            seen.setdefault("chart", time.monotonic())

    p.on("request", on_request)
    p.on("websocket", lambda ws: ws.on("framereceived", on_frame))
    try:
        p.goto(f"{server}/{path}")
        wait_done(p)
        if charts(path.split("?")[0]):
            p.wait_for_selector("[data-testid=stPlotlyChart] .main-svg")
        return seen.get("chunk"), seen.get("chart")
    finally:
        ctx.close()


def test_the_browser_asks_for_plotly_before_the_chart_arrives(browser, server):
    """/training on a seed no one has asked for: the server trains for a second or two
    before the first chart; the browser fetches the chart library meanwhile, not after
    the chart's numbers arrive (without ui.chartload it asks for it only then)."""
    import random

    chunk, chart = _timeline(browser, server, f"training?seed={random.randrange(10**6, 10**9)}")
    assert chunk is not None and chart is not None
    assert chunk < chart, f"plotly.js was asked for {chunk - chart:.3f} s after the chart"


def test_a_page_without_charts_never_loads_plotly(browser, server):
    chunk, chart = _timeline(browser, server, "practice")
    assert chart is None and chunk is None
