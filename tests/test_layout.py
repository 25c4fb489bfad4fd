"""Nothing clips or overflows: every page in Chromium at a projector's 1280×720 and
1024×768 in presenter mode, a laptop's 1400×900, and a phone's 390×844.

One browser, one context per screen (reused page after page): about 40 visits.
A failure names the page, the screen and the offending elements.
"""

from __future__ import annotations

import pytest
from conftest import assert_no_exception, wait_done

from benchmarks.common import page_ids, url_path

pytestmark = pytest.mark.browser

# (name, width, height, presenter)
SCREENS = (
    ("phone", 390, 844, False),
    ("projector", 1280, 720, True),
    ("old projector", 1024, 768, True),
    ("laptop", 1400, 900, False),
)

# Elements that are meant to scroll sideways, so their scrollWidth may exceed their width:
# - the data editor's grid (a canvas with its own scroll bars; tests/test_fit_charts.py
#   checks that its columns fit),
# - code blocks (code must not wrap; st.code scrolls with a visible bar),
# - a chart's inside (checked separately: its SVG text must stay inside the chart).
# On a phone too: charts, static tables and formulas fit their column (issue 27).
EXEMPT = [  # the insides only: the table, code block or chart itself must fit
    "[data-testid=stDataFrame] *",
    "[data-testid=stCode] *",
    "[data-testid=stPlotlyChart] *",
]

# An element overflows when its content is wider than its box (scrollWidth > clientWidth
# + 1) because of its own text or of a descendant that sticks out of it; descendants
# inside an exempt scroller, absolutely positioned ones (tooltips, toolbars, a slider's
# value label) and visually hidden ones (1 px screen-reader text, KaTeX's MathML) do not
# count. Only the innermost overflowing elements are reported.
OVERFLOW_JS = """(exempt) => {
    const main = document.querySelector('[data-testid=stMain]');
    const skip = (el) => exempt.some(sel => el.closest(sel));
    const floating = (el) => {
        for (let e = el; e && e !== main; e = e.parentElement) {
            const pos = getComputedStyle(e).position;
            if (pos === 'absolute' || pos === 'fixed') return true;
        }
        return false;
    };
    const ownText = (el) => [...el.childNodes].some(
        n => n.nodeType === 3 && n.textContent.trim());
    const sticksOut = (el, box) => [...el.querySelectorAll('*')].some(d => {
        if (d instanceof SVGElement || skip(d) || floating(d)) return false;
        const r = d.getBoundingClientRect();
        return r.width > 1 && (r.right > box.right + 1 || r.left < box.left - 1);
    });
    const name = (el) => {
        const key = [...(el.closest('[class*=st-key-]')?.classList || [])]
            .find(c => c.startsWith('st-key-'));
        const t = el.getAttribute('data-testid') || el.tagName.toLowerCase();
        const text = (el.innerText || '').trim().slice(0, 60).replace(/\\s+/g, ' ');
        return `${t}${key ? ' in ' + key : ''}: "${text}"`;
    };
    const found = [];
    for (const el of main.querySelectorAll('*')) {
        if (el instanceof SVGElement || skip(el) || el.closest('.katex')) continue;
        const cs = getComputedStyle(el);
        if (cs.display === 'inline' || cs.display === 'none' || cs.visibility === 'hidden'
            || el.clientWidth < 20 || el.scrollWidth <= el.clientWidth + 1 || floating(el)) {
            continue;
        }
        if (ownText(el) || sticksOut(el, el.getBoundingClientRect())) found.push(el);
    }
    const inner = found.filter(el => !found.some(o => o !== el && el.contains(o)));
    return inner.slice(0, 12).map(
        el => `${name(el)} is ${el.scrollWidth}px wide in ${el.clientWidth}px`);
}"""

# Every chart drew its SVG text (plotly.js draws after the script run: docs/architecture.md,
# Platform facts).
CHARTS_DRAWN_JS = """() => [...document.querySelectorAll('[data-testid=stPlotlyChart]')]
    .every(c => c.querySelector('.main-svg text, canvas'))"""

CHART_TEXT_JS = """() => {
    const out = [];
    document.querySelectorAll('[data-testid=stPlotlyChart]').forEach((chart, i) => {
        const plot = chart.querySelector('.js-plotly-plot') || chart;
        const box = plot.getBoundingClientRect();
        if (box.width === 0) return;  // in a closed tab or expander
        chart.querySelectorAll('.main-svg text').forEach(t => {
            if (!t.textContent.trim() || t.closest('.hoverlayer')) return;
            const r = t.getBoundingClientRect();
            if (r.width === 0 || r.height === 0) return;
            if (r.left < box.left - 1 || r.right > box.right + 1
                || r.top < box.top - 1 || r.bottom > box.bottom + 1) {
                out.push(`chart ${i}: "${t.textContent.slice(0, 50)}" leaves the chart `
                    + `(${Math.round(r.left - box.left)}..${Math.round(r.right - box.left)} of `
                    + `${Math.round(box.width)} px, ${Math.round(r.top - box.top)}..`
                    + `${Math.round(r.bottom - box.top)} of ${Math.round(box.height)} px)`);
            }
        });
    });
    return out.slice(0, 12);
}"""

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


def _visit(p, server: str, page: str, presenter: bool) -> tuple[list[str], list[str]]:
    """(elements wider than their container, chart text outside its chart) on `page`."""
    query = "?present=1" if presenter else ""
    p.goto(f"{server}/{url_path(page)}{query}")
    _settle(p)
    assert_no_exception(p)
    return p.evaluate(OVERFLOW_JS, EXEMPT), p.evaluate(CHART_TEXT_JS)


@pytest.mark.parametrize(("screen", "width", "height", "presenter"), SCREENS)
def test_no_page_overflows(browser, server, screen, width, height, presenter) -> None:
    ctx = browser.new_context(viewport={"width": width, "height": height})
    p = ctx.new_page()
    p.set_default_timeout(120_000)
    problems: dict[str, list[str]] = {}
    charts: dict[str, list[str]] = {}
    try:
        for page in page_ids():
            found, text = _visit(p, server, page, presenter)
            if found:
                problems[page] = found
            if text:
                charts[page] = text
            if screen == "phone" and page == page_ids()[0]:
                # a first visit on a phone: the sidebar stays folded, the page is readable
                assert not p.evaluate(SIDEBAR_JS), "the sidebar covers the phone's screen"
    finally:
        ctx.close()
    assert not problems, f"{screen} {width}×{height}: " + "\n".join(
        f"/{page}: " + "; ".join(found) for page, found in problems.items()
    )
    assert not charts, f"{screen} {width}×{height}, chart text outside its chart: " + "\n".join(
        f"/{page}: " + "; ".join(t) for page, t in charts.items()
    )


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
