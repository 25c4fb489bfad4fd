"""The worked-example page (/worked-example): AppTest for its options, Chromium for editing."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import torch
from conftest import (
    assert_clean,
    assert_no_exception,
    open_app,
    run_app,
    screenshot,
    texts,
    wait_done,
)
from test_tensorgrid import grid_data, pick
from torch import nn

from normviz import worked

GRID = "wk_grid"  # the cell picker's key (pages/worked-example.py)


def _table(at, index: str):
    """The table whose rows are labelled by `index` (its index's name)."""
    return next(d.value for d in at.table if d.value.index.name == index)


def test_source_example_shows_the_printed_numbers() -> None:
    at = run_app("worked-example")
    assert_clean(at)
    page = texts(at)
    # every mean, variance and first output, written out
    for line in (
        r"\mu = \frac{1 + 3}{2} = 2",
        r"\mu = \frac{1 + 2 + 7}{3} = 3.333",
        r"= 6.889",
        r"= -0.889",
    ):
        assert line in page, line
    source = _table(at, "result")
    assert list(source["same"]) == ["yes", "yes", "yes"]
    assert source.loc["LayerNorm: output row 1", "normviz gives"] == "[-0.889, -0.508, 1.397]"
    assert source.loc["BatchNorm: mean of each output column", "normviz gives"] == "[0, 0, 0]"
    assert source.loc["BatchNorm: variance of each output column", "normviz gives"] == "[1, 1, 1]"
    moments = _table(at, "moment")
    assert moments.loc["row variances", "after BatchNorm"] == "[0, 0]"
    assert moments.loc["column means", "pinned by"] == "BatchNorm"
    ok = [s.value for s in at.success]
    assert any("torch.nn.BatchNorm1d" in s for s in ok) and any(
        "torch.nn.LayerNorm" in s for s in ok
    )
    steps = [d.value for d in at.table]
    layer = next(d for d in steps if d.index.name == "row")
    assert layer.loc["row 1", "outputs"] == "[-0.889, -0.508, 1.397]"
    batch = next(d for d in steps if d.index.name == "column")
    assert list(batch["μ"]) == ["2", "3", "8"]
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert [t["type"] for t in spec["data"]] == ["heatmap"] * 3
    assert not at.warning and not at.error


def test_every_cell_can_be_worked_out(monkeypatch: pytest.MonkeyPatch) -> None:
    at = run_app("worked-example")
    assert_clean(at)
    page = texts(at)
    assert "Cell (row 1, column 1) holds 1" in page
    assert r"y_{1,1} = \frac{1 - 2}{\sqrt{1 + 10^{-5}}} = -1" in page  # BatchNorm, column 1
    pick(monkeypatch, at, GRID, {"cell": [1, 2]})  # a click on row 2, column 3 of the grid
    at.run()
    assert_clean(at)
    page = texts(at)
    assert "Cell (row 2, column 3) holds 9" in page
    assert grid_data(at)["selected"] == 1 * 3 + 2
    assert "BatchNorm with column 3's μ and σ²; LayerNorm with row 2's μ and σ²" in page
    # BatchNorm: row 2 of every column; LayerNorm: column 3 of every row, numbers filled in
    assert r"y_{2,3} = \frac{9 - 8}{\sqrt{1 + 10^{-5}}} = 1" in page
    assert r"y_{2,3} = \frac{9 - 5.333}{\sqrt{6.889 + 10^{-5}}} = 1.397" in page
    assert r"y_{1,3} = \frac{7 - 3.333}{\sqrt{6.889 + 10^{-5}}} = 1.397" in page
    assert r"y_{2,1} = \frac{3 - 2}{\sqrt{1 + 10^{-5}}} = 1" in page
    assert "**Column 3** (holds the selected cell)" in page
    assert "**Row 2** (holds the selected cell)" in page
    # a smaller matrix resets a cell that no longer exists
    monkeypatch.undo()
    at.selectbox(key="wk_preset").set_value("one_row").run()
    assert_clean(at)
    assert grid_data(at)["selected"] == 0 and "Cell (row 1, column 1)" in texts(at)


@pytest.mark.parametrize("preset", [k for k in worked.PRESETS if k != "source"])
def test_every_preset(preset: str) -> None:
    at = run_app("worked-example")
    at.selectbox(key="wk_preset").set_value(preset).run()
    assert_clean(at)
    assert worked.PRESETS[preset].note in texts(at)
    assert "The source text's printed results" not in texts(at)  # only for the source matrix
    if preset == "one_row":
        assert any("BatchNorm cannot run here" in e.value for e in at.error)
        assert any("torch.nn.LayerNorm" in s.value for s in at.success)
    else:
        assert not at.error
        assert len(at.success) == 2  # both checked against torch


def test_scaled_rows_look_the_same_to_layernorm() -> None:
    at = run_app("worked-example")
    at.selectbox(key="wk_preset").set_value("scaled").run()
    layer = next(d.value for d in at.table if d.value.index.name == "row")
    assert layer.loc["row 1", "outputs"] == layer.loc["row 2", "outputs"]


@pytest.mark.parametrize(
    "query",
    [
        {"matrix": "[[1,2],[3]]", "wk_preset": "nope"},
        {"layout": "NCHW", "N": "0", "eps": "1e-99"},
        {"method": "instance", "data": "🙂" * 300},
    ],
)
def test_hostile_urls_do_not_break_the_page(query: dict[str, str]) -> None:
    at = run_app("worked-example", query=query)
    assert_clean(at)
    assert at.warning
    assert "-0.889" in texts(at)  # the example does not depend on the shared settings


# The grid: a glide-data-grid canvas. Streamlit draws a 30 px row-marker column (rows can
# be added and deleted) left of the data columns, and 35 px rows below a 35 px header.
GRID_MARKER_PX = 30
GRID_ROW_PX = 35
EDIT_ROW, EDIT_COL, EDIT_FROM, EDIT_TO = 0, 0, "1", "5"  # source matrix: 1 -> 5


def _tex_lines(page) -> list[str]:
    """The TeX source of every formula on the page (KaTeX keeps it in an annotation)."""
    return page.eval_on_selector_all(
        "annotation[encoding='application/x-tex']", "els => els.map(e => e.textContent.trim())"
    )


def _edit_cell(page, row: int, col: int, old: str, new: str, ncols: int) -> None:
    """Open the cell's editor by clicking it and pressing Enter, type `new`, commit.

    The cell is computed from the grid's geometry at click time (Playwright re-reads the
    element's box and waits for it to be stable), and the editor's initial value is
    checked, so a click that lands elsewhere is caught instead of editing the wrong cell.
    Raises AssertionError or a Playwright TimeoutError when the attempt did not take.
    """
    grid = page.locator("[data-testid=stDataFrame]").first.get_by_test_id("stDataFrameResizable")
    canvas = grid.get_by_test_id("data-grid-canvas")
    canvas.wait_for(state="visible")
    box = canvas.bounding_box()
    assert box is not None
    col_px = (box["width"] - GRID_MARKER_PX) / ncols
    x = GRID_MARKER_PX + (col + 0.5) * col_px
    y = GRID_ROW_PX * (row + 1.5)  # below the header row
    # the scroller div above the canvas takes the pointer events and hands them to glide
    grid.click(position={"x": x, "y": y})
    editor = page.locator("#portal .gdg-clip-region input.gdg-input")
    # the click selects the cell and focuses the grid: the canvas, or the cell's node in
    # the accessibility table glide renders inside it (a click on a cell that was already
    # selected may open its editor at once)
    focus = page.wait_for_function(
        """(canvas) => document.querySelector('#portal .gdg-clip-region input.gdg-input')
                ? 'editor'
                : canvas.contains(document.activeElement) && 'grid'""",
        arg=canvas.element_handle(),
        timeout=10_000,
    ).json_value()
    if focus == "grid":
        page.keyboard.press("Enter")  # opens the selected cell's overlay editor
    editor.wait_for(state="visible", timeout=10_000)
    value = editor.input_value()
    if value not in (old, new):  # `new`: an earlier attempt took after all
        page.keyboard.press("Escape")
        raise AssertionError(f"clicked a cell holding {value!r}, not {old!r}")
    editor.fill(new)
    editor.press("Enter")  # commits; the data editor sends the edit and the script reruns
    editor.wait_for(state="detached", timeout=10_000)


@pytest.mark.browser
def test_worked_example_in_browser(page, server) -> None:
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

    open_app(page, server, "worked-example")
    assert_no_exception(page)
    source = page.get_by_text("The source text's printed results")
    assert source.count() == 1
    body = page.inner_text("body")
    assert "-0.889" in body or "−0.889" in body
    screenshot(page, "worked-example")

    # edit row 1, column 1 of the grid (1 -> 5) in the browser; the page recomputes
    x = np.array(worked.SOURCE_MATRIX, dtype=np.float64)
    x[EDIT_ROW, EDIT_COL] = float(EDIT_TO)
    cols = x.shape[1]
    bn = nn.BatchNorm1d(cols, eps=worked.EPS, affine=False, track_running_stats=False)
    ln = nn.LayerNorm(cols, eps=worked.EPS, elementwise_affine=False)
    with torch.no_grad():
        t = torch.from_numpy(x)
        batch, layer = bn.double()(t).numpy(), ln.double()(t).numpy()
    # each column's (BatchNorm) and each row's (LayerNorm) first output, worked through
    expected_y1 = [worked.fmt(v) for v in (*batch[0], *layer[:, 0])]
    edited_mu = r"\mu = \frac{5 + 3}{2} = 4"  # column 1 now holds 5 and 3

    for attempt in range(4):
        try:
            _edit_cell(page, EDIT_ROW, EDIT_COL, EDIT_FROM, EDIT_TO, ncols=cols)
            # the rerun has finished, its formulas use the new value, and the grid shows it
            # (in glide's accessibility table; its column 0 is the row markers)
            page.wait_for_function(
                """([mu, cell, value]) => {
                    const app = document.querySelector('[data-testid=stApp]');
                    const grid = document.querySelector('[data-testid=stDataFrame]');
                    const td = grid?.querySelector(`[data-testid=${cell}]`);
                    return app.getAttribute('data-test-script-state') === 'notRunning'
                        && td?.textContent.trim() === value
                        && [...document.querySelectorAll('annotation')]
                             .some(e => e.textContent.trim() === mu);
                }""",
                arg=[edited_mu, f"glide-cell-{EDIT_COL + 1}-{EDIT_ROW}", EDIT_TO],
                timeout=30_000,
            )
            break
        except (AssertionError, PlaywrightTimeoutError) as e:
            if attempt == 3:
                raise
            focused = page.evaluate("() => document.activeElement?.outerHTML.slice(0, 160)")
            warnings.warn(
                f"grid edit attempt {attempt + 1} did not take: {e} (focus on {focused})",
                stacklevel=1,
            )
            page.keyboard.press("Escape")  # close a half-open editor, then re-focus
            wait_done(page)
    wait_done(page)
    assert_no_exception(page)
    source.wait_for(state="detached")  # no longer the source's matrix
    tex = _tex_lines(page)
    assert edited_mu in tex
    assert r"\mu = \frac{5 + 2 + 7}{3} = 4.667" in tex  # LayerNorm, row 1
    # the default cell is row 1, column 1: its row in every column, its column in every row
    y1 = [line.rsplit("=", 1)[1].strip() for line in tex if line.startswith("y_{")]
    assert y1 == expected_y1, (y1, expected_y1)
    assert worked.fmt(layer[0, 0]) == "0.162"  # LayerNorm of [5, 2, 7], first value ...
    assert "0.162" in page.inner_text("body")  # ... as the page prints it
