"""Every Plotly figure on every page stays under 1 MB of JSON at the element cap.

Each page runs through app.py (AppTest) with the largest shapes the sidebar allows
under the cap, in both layouts: the longest-channel shape with the method whose
figures came out largest in the payload benchmark, plus balanced and longest-batch
shapes with the other methods, so all five methods appear. The page's own toggles
and checkboxes are then switched on one at a time at the longest-channel shapes
(partition colouring, split views and the like draw more). AppTest returns charts
as unknown elements whose `.proto.spec` is the figure JSON the browser would
receive: its length is the payload. Pages with their own URL parameters (the
BatchNorm lab's batch size, steps, ...) also run with those at their maxima.
"""

from __future__ import annotations

import pytest
from conftest import assert_clean

from benchmarks.common import (
    app_test,
    cap_shapes,
    figure_sizes,
    page_ids,
    query_for,
    shape_label,
    sidebar_drawn,
)
from normviz import STANDARD_METHODS
from ui.params import PAGE_PARAMS, fmt, max_elements

LIMIT = 1_000_000  # characters of JSON per figure (DESIGN.md budget)
PAGES = page_ids()


# (layout, cap profile, method). The longest-C shapes with BatchNorm gave the largest
# figures in `python -m benchmarks.payloads` (per-channel traces, the widest flat view);
# the other profiles cover the remaining methods and the longest sample axis.
PLAN = (
    ("BTC", "max C", "batch"),
    ("BTC", "balanced", "layer"),
    ("BTC", "max B", "instance"),
    ("NCHW", "max C", "batch"),
    ("NCHW", "balanced", "rms"),
    ("NCHW", "max N", "group"),
)


def _cases() -> list[tuple[str, tuple[int, ...], str]]:
    """(layout, shape, method) for the plan, with the shapes at the current cap."""
    return [(layout, cap_shapes(layout)[profile], m) for layout, profile, m in PLAN]


CASES = _cases()


def _check(at, where: str) -> int:
    """Assert a clean run through app.py and every figure under the limit; the largest size."""
    assert_clean(at)
    assert sidebar_drawn(at), f"{where}: the page ran without app.py's sidebar"
    sizes = figure_sizes(at)
    over = [f"{f.name}: {f.chars:,} chars" for f in sizes if f.chars > LIMIT]
    assert not over, f"{where}: figures over 1 MB: {over}"
    return max((f.chars for f in sizes), default=0)


def test_the_cases_are_at_the_cap() -> None:
    """Every case has exactly cap elements (powers of two under the default 2^22 cap)."""
    import math

    assert {m for _, _, m in CASES} == set(STANDARD_METHODS)
    assert {layout for layout, _, _ in CASES} == {"BTC", "NCHW"}
    for _, shape, _ in CASES:
        assert math.prod(shape) == max_elements()


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize(("layout", "shape", "method"), CASES, ids=lambda v: str(v))
def test_figures_under_1mb_at_the_cap(
    page: str, layout: str, shape: tuple[int, ...], method: str
) -> None:
    at = app_test(page, query_for(layout, shape, method))
    at.run()
    # a page may refuse a shape it cannot use (the BatchNorm lab draws thousands of
    # samples of it): that is a message, not a figure; the next test covers such pages
    _check(at, f"{page} {shape_label(layout, shape)} {method}")


def _page_param_cases() -> list[tuple[str, dict[str, str]]]:
    """(page, query): the page's numeric URL parameters at their maxima, with each value
    of each of its choice parameters in turn (a section, a rule, a comparison)."""
    out = []
    for page, params in PAGE_PARAMS.items():
        if page not in PAGES:
            continue
        top = {p.name: fmt(p.hi) for p in params if p.choices is None and p.hi is not None}
        for p in params:
            for c in p.choices or ():
                out.append((page, {**top, p.name: fmt(c)}))
    return out


@pytest.mark.parametrize(("page", "query"), _page_param_cases(), ids=str)
def test_figures_under_1mb_at_the_page_parameters_maxima(page: str, query: dict[str, str]) -> None:
    at = app_test(page, query)
    at.run()
    _check(at, f"{page} {query}")


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("layout", ["BTC", "NCHW"])
def test_figures_under_1mb_with_every_switch_on(page: str, layout: str) -> None:
    """The page's toggles and checkboxes, each switched on at the longest-C cap shape."""
    shape = cap_shapes(layout)["max C"]
    at = app_test(page, query_for(layout, shape, "group"))
    at.run()
    _check(at, f"{page} {shape_label(layout, shape)}")
    switches = [w.key for w in (*at.main.toggle, *at.main.checkbox) if w.key and not w.value]
    for key in switches:
        found = [w for w in (*at.main.toggle, *at.main.checkbox) if w.key == key]
        if not found:  # an earlier switch hid it
            continue
        found[0].set_value(True).run()
        _check(at, f"{page} {shape_label(layout, shape)} with {key} on")
