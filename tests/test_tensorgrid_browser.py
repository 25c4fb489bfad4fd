"""The tensor grid in Chromium: hovering, clicking, tapping (real touch events) and
arrow-keying cells of /axes's flat view light exactly the cell's statistic group
(normviz.group_ids) and show its μ, σ² and y (torch), without a run of app.py (the
server's run log, ui.route.RUN_LOG); a pick reaches the URL; axe-core finds no
critical or serious violation in the grid.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from conftest import app_runs, assert_no_exception, wait_done
from test_axes_numbers import torch_module

from normviz import LAYOUTS, group_ids, worked
from normviz.data import generate

pytestmark = pytest.mark.browser

SHAPE = (4, 6, 8)
GROUPS = 2  # the sidebar's default G
KEY = ".st-key-axes_flat_view"
NUM = r"(−?[\d.]+(?:e[−+]?\d+)?)"


def _f(text: str) -> float:
    return float(text.replace("−", "-"))


def _grid_page(browser, link: str, key: str, touch: bool = False):
    """(context, page) on `link` once its grid `key` has drawn: a phone with touch, or a
    1400×900 laptop."""
    ctx = browser.new_context(
        viewport={"width": 390, "height": 844} if touch else {"width": 1400, "height": 900},
        has_touch=touch,
        is_mobile=touch,
    )
    p = ctx.new_page()
    p.set_default_timeout(120_000)
    p.goto(link)
    wait_done(p, 120_000)
    p.locator(f"{key} [role=gridcell]").first.wait_for()
    return ctx, p


def _open(browser, url: str, method: str, touch: bool = False):
    return _grid_page(browser, f"{url}/axes?layout=BTC&B=4&T=6&C=8&method={method}", KEY, touch)


def _index(cell: tuple[int, ...]) -> int:
    return int(np.ravel_multi_index(cell, SHAPE))


def _lit(p, key: str) -> list[int]:
    """The grid's cells lit as the hovered, tapped or focused cell's group."""
    lit = p.locator(f"{key} .tg-cell.tg-in")  # locators reach into the open shadow root
    return sorted(int(lit.nth(k).get_attribute("data-i")) for k in range(lit.count()))


def _check_shown(p, method: str, cell: tuple[int, ...]) -> None:
    """The lit cells are `cell`'s group, and the panel shows its x, μ, σ² and torch's y."""
    ids = group_ids(method, "BTC", SHAPE, GROUPS if method == "group" else None).reshape(-1)
    want = sorted(np.flatnonzero(ids == ids[_index(cell)]).tolist())
    assert _lit(p, KEY) == want
    info = p.locator(f"{KEY} .tg-info").inner_text()
    name = ", ".join(f"{a}={i}" for a, i in zip("BTC", cell, strict=True))
    assert f"Cell {name}:" in info, info
    x = generate("channels", "BTC", SHAPE, 0)
    group = x.reshape(-1)[torch.as_tensor(ids == ids[_index(cell)])].double()
    y = _torch_y(method, x).reshape(-1)[_index(cell)]
    if method == "rms":
        (ms,) = re.search(rf"mean square = {NUM}", info).groups()
        assert _f(ms) == pytest.approx(float((group**2).mean()), rel=1e-3)
    else:
        mu, var = re.search(rf"μ = {NUM}, σ² = {NUM}", info).groups()
        assert _f(mu) == pytest.approx(float(group.mean()), rel=1e-3, abs=1e-4)
        assert _f(var) == pytest.approx(float(group.var(correction=0)), rel=1e-3)
    (got,) = re.search(rf"= {NUM}$", info.strip().splitlines()[-1]).groups()
    assert _f(got) == pytest.approx(float(y), rel=1e-3, abs=1e-4)
    assert f"m = {group.numel()} values" in info


def _torch_y(method: str, x: torch.Tensor) -> torch.Tensor:
    """torch.nn's output for `x` (B, T, C), γ = 1 and β = 0 as on the page."""
    if method == "group":
        with torch.no_grad():
            return torch.nn.GroupNorm(GROUPS, SHAPE[2])(x.transpose(1, 2)).transpose(1, 2)
    return torch_module(method, "BTC", SHAPE)[1](x)


def _wait_url(p, cell: tuple[int, ...]) -> None:
    want = [f"cell_{a}={i}" for a, i in zip("btc", cell, strict=True)]
    p.wait_for_function(
        "want => want.every(w => location.search.slice(1).split('&').includes(w))", arg=want
    )
    wait_done(p, 120_000)


@pytest.mark.parametrize("method", ["batch", "layer", "group", "rms"])
def test_hover_and_click_light_the_group_in_the_browser(browser, counted, method: str) -> None:
    url, log = counted
    ctx, p = _open(browser, url, method)
    try:
        runs = app_runs(log)
        cells = p.locator(f"{KEY} [role=gridcell]")
        cells.nth(_index((2, 4, 6))).hover()
        _check_shown(p, method, (2, 4, 6))  # answered in the browser: no run at all yet
        cells.nth(_index((1, 3, 5))).click()
        _check_shown(p, method, (1, 3, 5))  # at once, before the server answers
        _wait_url(p, (1, 3, 5))
        p.get_by_text("The cell B=1, T=3, C=5 takes its statistics").wait_for()
        _check_shown(p, method, (1, 3, 5))  # and still after the fragment's rerun
        assert_no_exception(p)
        assert app_runs(log) == runs, log.read_text().splitlines()[runs:]  # app.py never ran
    finally:
        ctx.close()


def test_one_tap_selects_exactly_the_tapped_cell(browser, counted) -> None:
    url, log = counted
    ctx, p = _open(browser, url, "layer", touch=True)
    try:
        runs = app_runs(log)
        for cell in [(0, 2, 3), (3, 5, 7), (1, 0, 0)]:
            box = p.locator(f"{KEY} [role=gridcell]").nth(_index(cell))
            box.scroll_into_view_if_needed()
            r = box.bounding_box()
            p.touchscreen.tap(r["x"] + r["width"] / 2, r["y"] + r["height"] / 2)
            _check_shown(p, "layer", cell)
            _wait_url(p, cell)
            selected = p.locator(f"{KEY} [role=gridcell][aria-selected=true]")
            assert selected.count() == 1
            assert selected.first.get_attribute("data-i") == str(_index(cell))
        assert app_runs(log) == runs
    finally:
        ctx.close()


def test_arrow_keys_move_and_enter_picks(browser, counted) -> None:
    url, log = counted
    ctx, p = _open(browser, url, "batch")
    try:
        runs = app_runs(log)
        p.locator(f"{KEY} [role=gridcell]").first.focus()
        for key in ["ArrowRight", "ArrowRight", "ArrowDown"]:
            p.keyboard.press(key)
        _check_shown(p, "batch", (0, 1, 2))  # the focused cell's group, before any pick
        focused = p.evaluate(
            """k => document.querySelector(k).querySelector('[data-testid=stBidiComponentIsolated]')
                   .shadowRoot.activeElement.getAttribute('aria-label')""",
            KEY,
        )
        assert focused.startswith("B=0, T=1, C=2") and "group" in focused
        p.keyboard.press("Enter")
        _wait_url(p, (0, 1, 2))
        p.keyboard.press("ArrowDown")  # the focus survives the rerun
        p.keyboard.press(" ")
        _wait_url(p, (0, 2, 2))
        assert app_runs(log) == runs
    finally:
        ctx.close()


def _axe(p, key: str) -> list[str]:
    """axe-core's critical and serious violations inside the element `key`."""
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(p, context={"include": [[key]]}, options={"resultTypes": ["violations"]})
    return [
        f"{v['id']} ({v['impact']}): {n['target']}"
        for v in results.response["violations"]
        if v["impact"] in ("critical", "serious")
        for n in v["nodes"]
    ]


def test_axe_finds_no_serious_violation_in_the_grid(browser, counted) -> None:
    url, _ = counted
    ctx, p = _open(browser, url, "group")
    try:
        p.locator(f"{KEY} [role=gridcell]").nth(9).hover()  # a group lit, the rest faded
        assert not _axe(p, KEY)
        assert p.locator(f"{KEY} [role=grid]").get_attribute("aria-label").startswith("GroupNorm")
    finally:
        ctx.close()
    ctx, p, key = _practice(browser, url, "name", touch=False)
    try:  # labelled cells (the group numbers), faded around a lit group
        p.locator(f"{key} [role=gridcell]").nth(1).hover()
        assert not _axe(p, key)
    finally:
        ctx.close()


# ---- /practice: every grid kind ---------------------------------------------------------------


def _practice(browser, url: str, kind: str, touch: bool):
    key = f".st-key-pr_grid_{kind}-0"
    return (*_grid_page(browser, f"{url}/practice?kind={kind}&seed=0", key, touch), key)


def _tap(p, cell) -> None:
    cell.scroll_into_view_if_needed()
    r = cell.bounding_box()
    p.touchscreen.tap(r["x"] + r["width"] / 2, r["y"] + r["height"] / 2)


def _selected(p, key: str) -> list[int]:
    sel = p.locator(f"{key} [role=gridcell][aria-selected=true]")
    return sorted(int(sel.nth(k).get_attribute("data-i")) for k in range(sel.count()))


def test_practice_cells_one_tap_picks_exactly_the_tapped_cell(browser, counted) -> None:
    from normviz import practice

    url, _ = counted
    ctx, p, key = _practice(browser, url, "cells", touch=True)
    try:
        ex = practice.exercise("cells", 0)
        names = practice.cell_names(ex.case)
        picked: list[int] = []
        for i in [1, 4, 1, ex.n_cells - 1]:
            _tap(p, p.locator(f"{key} [role=gridcell]").nth(i))
            picked = sorted(set(picked) ^ {i})
            assert _selected(p, key) == picked  # at once, in the browser
            box = p.locator(".st-key-pr_cells_cells-0")
            p.wait_for_function(
                "([sel, want]) => want.every(([n, on]) =>"
                " document.querySelector(sel).innerText.includes(n) === on)",
                arg=[".st-key-pr_cells_cells-0", [[names[k], k in picked] for k in (1, 4)]],
            )
            wait_done(p, 120_000)
            assert _selected(p, key) == picked, box.inner_text()  # and after the rerun
        assert_no_exception(p)
    finally:
        ctx.close()


@pytest.mark.parametrize("touch", [False, True], ids=["keys", "tap"])
def test_practice_name_lights_the_pattern_s_group(browser, counted, touch: bool) -> None:
    from normviz import practice

    url, log = counted
    ctx, p, key = _practice(browser, url, "name", touch=touch)
    try:
        ex = practice.exercise("name", 0)
        ids = ex.case.ids().reshape(-1)
        runs = app_runs(log)
        cells = p.locator(f"{key} [role=gridcell]")
        n_cols = int(np.prod(ex.case.shape[2:]))
        i = n_cols  # row 1, column 0
        if touch:
            _tap(p, cells.nth(i))
        else:
            cells.first.focus()
            p.keyboard.press("ArrowDown")
            p.keyboard.press("Enter")  # a grid for looking: nothing to pick
        assert _lit(p, key) == sorted(np.flatnonzero(ids == ids[i]).tolist())
        assert _selected(p, key) == []
        p.wait_for_timeout(500)
        assert app_runs(log) == runs  # looking costs the server nothing
    finally:
        ctx.close()


@pytest.mark.parametrize("kind", ["compute", "count"])
def test_practice_number_grids_show_cells_and_pick_nothing(browser, counted, kind: str) -> None:
    from normviz import practice

    url, log = counted
    ctx, p, key = _practice(browser, url, kind, touch=True)
    try:
        ex = practice.exercise(kind, 0)
        axes = LAYOUTS[ex.case.layout].axes
        runs = app_runs(log)
        _tap(p, p.locator(f"{key} [role=gridcell]").nth(2))
        info = p.locator(f"{key} .tg-info").inner_text()
        cell = np.unravel_index(2, ex.case.shape)
        want = ", ".join(f"{a}={i}" for a, i in zip(axes, cell, strict=True))
        assert info.startswith(f"Cell {want}"), info
        assert "μ" not in info and "σ²" not in info  # the answer is not given away
        assert _selected(p, key) == []
        p.wait_for_timeout(500)
        assert app_runs(log) == runs
    finally:
        ctx.close()


# ---- /worked-example: the cell picker, two methods at once ------------------------------------

WKEY = ".st-key-wk_grid"
WORKED = torch.tensor(((1.0, 2.0, 7.0), (3.0, 4.0, 9.0)), dtype=torch.float64)  # the source's


def _worked(browser, url: str, touch: bool = False):
    return _grid_page(browser, f"{url}/worked-example", WKEY, touch)


def _check_worked(p, cell: tuple[int, int]) -> None:
    """The lit cells are `cell`'s column and row, and the panel shows its BatchNorm column's
    and LayerNorm row's μ, σ² and y, checked against torch.nn."""
    from test_tensorgrid import worked_oracle

    n, c = WORKED.shape
    r, k = cell
    assert _lit(p, WKEY) == sorted({i * c + k for i in range(n)} | {r * c + j for j in range(c)})
    info = "\n".join(s for s in p.locator(f"{WKEY} .tg-info").inner_text().splitlines() if s)
    assert info.startswith(f"Cell row {r + 1}, column {k + 1}: x = "), info
    for name, (own, mean, var, y) in worked_oracle(WORKED).items():
        g = int(own[r * c + k])
        noun = "column" if name == "BatchNorm" else "row"
        found = re.search(
            rf"{name}, {noun} {g + 1}: m = (\d+) values, μ = {NUM}, σ² = {NUM}\n.*= {NUM}$",
            info,
            re.M,
        )
        assert found, info
        m, mu, sq, got = found.groups()
        assert int(m) == (n if noun == "column" else c)
        assert _f(mu) == pytest.approx(float(mean[g]), rel=1e-3, abs=1e-4)
        assert _f(sq) == pytest.approx(float(var[g]), rel=1e-3, abs=1e-4)
        assert _f(got) == pytest.approx(float(y[r, k]), rel=1e-3, abs=1e-4)


def _worked_out(p, cell: tuple[int, int]) -> None:
    """The worked numbers below follow the pick (the fragment's rerun), one cell selected."""
    r, k = cell
    x = worked.fmt(float(WORKED[r, k]))
    p.get_by_text(f"Cell (row {r + 1}, column {k + 1}) holds {x}.").wait_for()
    wait_done(p, 120_000)
    assert _selected(p, WKEY) == [r * WORKED.shape[1] + k]
    _check_worked(p, cell)  # the highlight survives the rerun


def test_worked_example_click_tap_and_keys_pick_exactly_that_cell(browser, counted) -> None:
    url, log = counted
    ctx, p = _worked(browser, url)
    try:
        runs = app_runs(log)
        cells = p.locator(f"{WKEY} [role=gridcell]")
        cells.nth(1 * 3 + 2).hover()
        _check_worked(p, (1, 2))  # answered in the browser: no run at all
        cells.nth(0 * 3 + 1).click()
        _check_worked(p, (0, 1))  # at once, before the server answers
        _worked_out(p, (0, 1))
        p.keyboard.press("ArrowDown")  # the focus stays on the clicked cell through the rerun
        p.keyboard.press("ArrowRight")
        _check_worked(p, (1, 2))  # the focused cell's column and row, before any pick
        p.keyboard.press("Enter")
        _worked_out(p, (1, 2))
        assert_no_exception(p)
        assert app_runs(log) == runs, log.read_text().splitlines()[runs:]  # app.py never ran
        assert not _axe(p, WKEY)
    finally:
        ctx.close()
    ctx, p = _worked(browser, url, touch=True)
    try:
        runs = app_runs(log)
        _tap(p, p.locator(f"{WKEY} [role=gridcell]").nth(1 * 3 + 0))  # one real tap
        _check_worked(p, (1, 0))
        _worked_out(p, (1, 0))
        assert app_runs(log) == runs
    finally:
        ctx.close()
