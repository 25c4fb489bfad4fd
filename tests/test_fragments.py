"""A widget inside a page's fragment reruns only that fragment, never app.py (Chromium).

AppTest cannot see this: it reruns the whole script for every interaction. Here a
real server writes one line per run of app.py (ui.route.RUN_LOG); each case opens
a page, changes one widget inside one of its fragments, waits for the fragment's
rerun to write the new value to the URL, and checks that app.py did not run again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import keys
import pytest
from conftest import app_runs, assert_no_exception, wait_done

from normviz import batchnorm, choose, distributions, residual

pytestmark = pytest.mark.browser


@dataclass(frozen=True)
class Case:
    path: str  # the link opened, e.g. "batchnorm?sim=gradients"
    widget: str  # the widget's CSS selector (keys.css: its element's class st-key-<key>)
    change: Callable[..., None]  # what the test does to the widget (its locator; the page)
    url: str  # what the URL holds once the fragment has rerun, e.g. "bn_init=he"


def _click(text: str) -> Callable[..., None]:
    """Click the option (or toggle) labelled `text` inside the widget."""
    return lambda box, p: box.get_by_text(text, exact=True).first.click()


def _flat_cell(box, p) -> None:
    """Click cell B=1, T=3, C=5 of the Axis Explorer's flat view (the tensor grid)."""
    box.locator("[role=gridcell]").nth((1 * 6 + 3) * 8 + 5).click()


def _arrow_left(box, p) -> None:
    """One step down on a slider, from the keyboard."""
    box.get_by_role("slider").first.focus()
    box.get_by_role("slider").first.press("ArrowLeft")


CASES = [
    Case(
        "batchnorm?sim=gradients",
        keys.css("batchnorm", "bn_init"),
        _click(batchnorm.choice_label("bn_init", "he")),
        "bn_init=he",
    ),
    Case(
        "distributions",
        keys.css("distributions", "affine"),
        _click(distributions.choice_label("affine", "per-channel")),
        "affine=per-channel",
    ),
    Case(
        "axes",
        keys.css("axes", "partition"),
        lambda box, p: box.locator("label").first.click(),
        "partition=1",
    ),
    Case(
        "axes?layout=BTC&B=4&T=6&C=8&method=layer",
        keys.css(None, "axes_flat_view"),
        _flat_cell,
        "cell_c=5",
    ),
    Case(
        "residual",
        keys.css("residual", "norm"),
        _click(residual.choice_label("norm", "rms")),
        "norm=rms",
    ),
    Case("training?exp=tiny", keys.css("training", "runs"), _arrow_left, "runs=2"),
    Case("choose", keys.css("choose", "arch"), _click(choose.LABELS["arch"]["cnn"]), "arch=cnn"),
]


@pytest.mark.parametrize(
    "case", CASES, ids=[f"{c.path.split('?')[0]}-{c.widget.split('-')[-1]}" for c in CASES]
)
def test_a_fragment_widget_reruns_the_fragment_alone(browser, counted, case: Case) -> None:
    url, log = counted
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    p = ctx.new_page()
    p.set_default_timeout(120_000)
    try:
        before = app_runs(log)
        p.goto(f"{url}/{case.path}")
        wait_done(p, 120_000)
        page = case.path.split("?")[0]
        opened = log.read_text().splitlines()[before:]
        assert f"app {page}" in opened, opened  # the hook counts: the link ran app.py
        assert case.url not in p.url.split("?")[-1].split("&")
        runs = app_runs(log)
        case.change(p.locator(case.widget), p)
        p.wait_for_function(
            "want => new URLSearchParams(location.search).toString().split('&').includes(want)",
            arg=case.url,
        )
        wait_done(p, 120_000)
        p.wait_for_timeout(500)  # a rerun of app.py the change might have started
        wait_done(p, 120_000)
        assert_no_exception(p)
        assert app_runs(log) == runs, log.read_text().splitlines()[runs:]
    finally:
        ctx.close()
