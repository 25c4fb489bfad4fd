"""Presenter mode from a link (the sidebar folded, then open on request). Whether every
page and every README link fits every screen is tests/test_fit_charts.py's (the same
visits this file once made, and more checks)."""

from __future__ import annotations

import pytest
from conftest import wait_done

pytestmark = pytest.mark.browser

CHARTS_DRAWN_JS = """() => [...document.querySelectorAll('[data-testid=stPlotlyChart]')]
    .every(c => c.querySelector('.main-svg text, canvas'))"""

SIDEBAR_JS = """() => {
    const s = document.querySelector('[data-testid=stSidebar]');
    const r = s.getBoundingClientRect();
    return r.width > 0 && r.right > 1;
}"""


def _settle(p) -> None:
    """The run has finished and every chart has drawn its text (and stopped changing)."""
    wait_done(p, 120_000)
    p.wait_for_function(CHARTS_DRAWN_JS, timeout=60_000, polling=200)
    p.wait_for_timeout(700)  # plotly's second layout pass (automargin) and fonts


def test_a_presenter_link_opens_in_presenter_mode(browser, server) -> None:
    """present=1 on a wide screen (where the sidebar would open): sidebar folded, larger
    text, the toggle on, and the link keeps it."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    p = ctx.new_page()
    p.set_default_timeout(120_000)
    try:
        p.goto(f"{server}/axes?present=1")
        wait_done(p, 120_000)
        assert not p.evaluate(SIDEBAR_JS), "presenter mode opened with the sidebar showing"
        root = p.evaluate("getComputedStyle(document.documentElement).fontSize")
        assert float(root.rstrip("px")) > 16
        toggle = p.locator("[data-testid=stSidebarUserContent] .st-key-present input")
        assert toggle.is_checked()
        assert "present=1" in p.url
        assert not p.get_by_text("is not valid").count()
        p.goto(f"{server}/axes")  # a plain visit: a new session, normal size, sidebar open
        wait_done(p, 120_000)
        assert p.evaluate(SIDEBAR_JS)
        root = p.evaluate("getComputedStyle(document.documentElement).fontSize")
        assert root == "16px" and "present" not in p.url
    finally:
        ctx.close()
