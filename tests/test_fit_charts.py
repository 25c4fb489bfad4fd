"""Charts that fit (issue 27): no forced chart width, presenter sizes only on screens
wide enough for them, log axes labelled at decades, legends clear of axis titles; and in
Chromium, every page at the issue's four screens through tests/layout_probe.py.

The browser test asserts each check on the views where it holds today (ASSERTED); the
views still failing a check are named in NOT_YET with the reason, so the gap is on
record rather than hidden. A view that starts passing should move into ASSERTED.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import assert_no_exception
from layout_probe import SCREENS, new_context, probe, settle
from signals import assert_valid

from benchmarks.common import page_ids, url_path
from normviz import style
from normviz.figures.spec import Spec, trace
from ui import css

# ---- without a browser ----------------------------------------------------------------


def test_no_chart_is_forced_wider_than_its_column() -> None:
    assert "min-width" not in css.BASE.split("stTable")[0]  # the chart rules come first
    assert not re.search(r"PlotlyChart[^}]*min-width", css.BASE)


def test_presenter_sizes_apply_only_above_640_px() -> None:
    body = css.PRESENTER.strip()
    assert body.startswith(f"@media (min-width: {css.PRESENTER_MIN_WIDTH}px)")
    assert 600 < css.PRESENTER_MIN_WIDTH <= 660
    # everything presenter mode changes sits inside the query: it closes at the very end
    assert body.count("{") == body.count("}") and body.endswith("}\n}")
    assert "font-size" in body and "zoom" in body


@pytest.mark.parametrize(
    ("values", "dtick", "fmt"),
    [
        (([2, 4, 8, 16, 32, 64, 128, 256],), 1, "none"),  # batch sizes: 10, 100
        (([1e-4, 3e-3], [0.1, 1.0]), 1, "power"),  # four decades over two arrays
        (([1e-6, 1e6],), 3, "power"),  # twelve decades: every third
        (([0.5, 0.7, 0.9],), "D2", "none"),  # under one decade: 1, 2, 5 × 10^k
        (([np.nan, 0.0, -1.0, 2.0, 50.0],), 1, "none"),  # non-positive values ignored
        ((np.empty(0),), 1, "power"),  # no data: decades
    ],
)
def test_log_axes_are_labelled_at_decades(values, dtick, fmt) -> None:
    axis = style.log_axis(*values)
    assert axis == {"type": "log", "dtick": dtick, "exponentformat": fmt}
    fig = Spec().add_trace(trace("scatter", x=[1, 2], y=[1, 10]))
    fig.update_yaxes(axis)
    assert_valid(style.apply(fig).figure())


def test_horizontal_legends_sit_under_everything() -> None:
    fig = Spec().add_trace(trace("scatter", x=[1, 2], y=[1, 2], name="a"))
    fig.update_layout(legend=style.LEGEND_BELOW)
    built = style.apply(fig).figure()
    assert_valid(built)
    legend = built.layout.legend
    # anchored to the figure's own bottom edge: plotly reserves that room, and the x-axis
    # title (automargin) is laid out above it
    assert (legend.orientation, legend.yref, legend.y, legend.yanchor) == (
        "h",
        "container",
        0,
        "bottom",
    )


def test_a_phone_tables_cell_labels_are_escaped_css_strings() -> None:
    """A header may be an uploaded name: each cell's label (the stacked layout's
    "column: value") is a CSS string with every character escaped, so no header can close
    the string or the rule."""
    import pandas as pd

    from ui import runner

    hostile = 'x"; } body { display: none } /*'
    shown = runner._stacked(pd.DataFrame({hostile: [1.0], "b": [2]}).style, [hostile, "b"])
    assert shown.uuid.startswith("nvstack")
    first, second = (rule["props"][0][1] for rule in shown.table_styles)
    assert first == '"' + "".join(f"\\{ord(c):06x}" for c in f"{hostile}: ") + '"'
    assert not set(first[1:-1]) & set("\"';{}/*") - {"\\"}
    assert second == '"\\000062\\00003a\\000020"'  # "b: "


# ---- in Chromium -------------------------------------------------------------------

# (a), (c), (d) of the probe; the modebar's overlaps (it shows on hover, over the title or
# legend at the top right) are reported by the probe but not asserted yet
CHECKS = ("sideways", "outside", "overlaps")
NARROW = (
    "one line of figure text (a title, a caption) or panels side by side: wider than a "
    "358 px column; the figure is built without knowing the width, and a phone layout "
    "needs the page layer to ask for one"
)
# Views (page, screen) known to fail a check today, and why; every other view of every
# page at every screen is asserted for that check.
NOT_YET: dict[str, dict[tuple[str, str], str]] = {
    "sideways": {},
    "outside": {(page, "phone"): NARROW for page in ("axes", "residual", "worked-example")},
    "overlaps": {
        (page, "phone"): NARROW
        for page in ("home", "axes", "distributions", "residual", "worked-example")
    },
}


def _checks(found: dict) -> dict[str, object]:
    """The probe's findings by check, the modebar's overlaps (on hover) apart."""
    bar = [s for s in found["overlaps"] if "[modebar" in s]
    text = [s for s in found["overlaps"] if "[modebar" not in s]
    return {
        "sideways": found["sideways"],
        "outside": found["outside"],
        "overlaps": text,
        "modebar": bar,
    }


@pytest.mark.browser
@pytest.mark.parametrize(
    ("screen", "width", "height", "presenter", "phone"), SCREENS, ids=[s[0] for s in SCREENS]
)
def test_charts_fit_every_page(browser, server, screen, width, height, presenter, phone) -> None:
    ctx = new_context(browser, width, height, phone)
    p = ctx.new_page()
    p.set_default_timeout(120_000)
    failures: list[str] = []
    try:
        for page in page_ids():
            p.goto(f"{server}/{url_path(page)}{'?present=1' if presenter else ''}")
            settle(p)
            assert_no_exception(p)
            found = _checks(probe(p))
            for check in CHECKS:
                if (page, screen) in NOT_YET[check]:
                    continue
                got = found[check]
                if got:
                    failures.append(f"/{url_path(page)} {check}: {got}")
    finally:
        ctx.close()
    assert not failures, f"{screen} {width}×{height}:\n" + "\n".join(map(str, failures))


@pytest.mark.browser
def test_a_presenter_link_on_a_phone_reads_at_normal_sizes(browser, server) -> None:
    """present=1 keeps presenter sizes on a projector and falls back on a 390 px phone."""
    sizes = {}
    for screen, width, height, _presenter, phone in (SCREENS[0], SCREENS[3]):
        ctx = new_context(browser, width, height, phone)
        p = ctx.new_page()
        p.set_default_timeout(120_000)
        try:
            p.goto(f"{server}/?present=1")
            settle(p)
            sizes[screen] = p.evaluate("getComputedStyle(document.documentElement).fontSize")
        finally:
            ctx.close()
    assert sizes == {"projector": f"{16 * css.PRESENTER_TEXT:g}px", "phone": "16px"}
