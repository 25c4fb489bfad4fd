"""Accessibility in a real browser: axe-core on every page, and a text alternative per chart
(both on one visit of each page).

axe-core (through axe-playwright-python) runs on the home page and on every page of
`ui.pages.PAGES`; the test fails on any critical or serious violation. Violations in
Streamlit's own markup that the app cannot change are excluded rule by rule and
selector by selector in `STREAMLIT_OWN`, each with the reason.
"""

from __future__ import annotations

import pytest
from conftest import assert_no_exception, wait_done

from ui.pages import PAGES
from ui.runner import ALT_LABEL

pytestmark = pytest.mark.browser

PATHS = ["", *(p.path for p in PAGES)]
BLOCKING = ("critical", "serious")

# (rule id, CSS selector of the flagged element or an ancestor) that axe flags in markup
# Streamlit itself draws and no app code can reach; every exclusion says why.
STREAMLIT_OWN: dict[tuple[str, str], str] = {
    ("list", "[data-testid=stSidebarNavItems]"): (
        "st.navigation with sections draws each section header as a <div> directly inside "
        "the nav's <ul> (Streamlit 1.67): the nav markup is Streamlit's"
    ),
    ("listitem", "[data-testid=stSidebarNavItems]"): (
        "the same nav: each section's <li> items sit in a <div> inside the <ul>"
    ),
}


def _excluded(page, rule: str, target: list) -> bool:
    """Whether the flagged element is inside markup listed in STREAMLIT_OWN for `rule`."""
    own = [sel for (r, sel) in STREAMLIT_OWN if r == rule]
    if not own or len(target) != 1:  # a target in a frame or shadow root: never excluded
        return False
    return page.evaluate(
        "([t, sels]) => { const el = document.querySelector(t);"
        " return !!el && sels.some(s => el.closest(s)); }",
        [str(target[0]), own],
    )


def _visit(page, server: str, path: str) -> None:
    page.goto(f"{server}/{path}")
    wait_done(page, timeout=180_000)
    assert_no_exception(page)


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p or "home")
def test_axe_finds_no_serious_violation_and_every_chart_has_a_text_alternative(
    page, server, path: str
) -> None:
    """One visit per page: axe-core's findings, then each drawn chart's "Chart as text"
    fold (tests/test_a11y_text.py checks the folds' sentences without a browser)."""
    from axe_playwright_python.sync_playwright import Axe  # requirements-dev

    _visit(page, server, path)
    results = Axe().run(page, options={"resultTypes": ["violations"]})
    found = [
        f"{v['id']} ({v['impact']}): {v['help']} at {n['target']} {n.get('html', '')[:160]}"
        for v in results.response["violations"]
        if v["impact"] in BLOCKING
        for n in v["nodes"]
        if not _excluded(page, v["id"], n["target"])
    ]
    assert not found, "\n".join(found)
    # the tensor grid (ui/tensorgrid.py, in its shadow root) and a still picture (the method
    # thumbnails) are charts as well
    charts = page.locator(
        "[data-testid=stPlotlyChart], [data-testid=stGraphVizChart], .tg-grid, .nv-picture"
    )
    alts = page.locator("[data-testid=stExpander] summary", has_text=ALT_LABEL)
    assert charts.count() == alts.count(), (charts.count(), alts.count())
