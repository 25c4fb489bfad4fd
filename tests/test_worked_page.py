"""The worked-example page (/worked-example): AppTest for its options, Chromium for editing."""

from __future__ import annotations

import json

import pytest
from conftest import (
    assert_clean,
    assert_no_exception,
    open_app,
    run_app,
    screenshot,
    texts,
    wait_done,
)

from normviz import worked


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
    source = at.table[0].value
    assert list(source["same"]) == ["yes", "yes", "yes"]
    assert source.loc["LayerNorm: output row 1", "normviz gives"] == "[-0.889, -0.508, 1.397]"
    assert source.loc["BatchNorm: mean of each output column", "normviz gives"] == "[0, 0, 0]"
    assert source.loc["BatchNorm: variance of each output column", "normviz gives"] == "[1, 1, 1]"
    moments = at.table[1].value
    assert moments.loc["row variances", "after BatchNorm"] == "[0, 0]"
    assert moments.loc["column means", "pinned by"] == "BatchNorm"
    ok = [s.value for s in at.success]
    assert any("torch.nn.BatchNorm1d" in s for s in ok) and any(
        "torch.nn.LayerNorm" in s for s in ok
    )
    steps = [d.value for d in at.dataframe]
    layer = next(d for d in steps if d.index.name == "row")
    assert layer.loc["row 1", "outputs"] == "[-0.889, -0.508, 1.397]"
    batch = next(d for d in steps if d.index.name == "column")
    assert list(batch["μ"]) == ["2", "3", "8"]
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert [t["type"] for t in spec["data"]] == ["heatmap"] * 3
    assert not at.warning and not at.error


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
    layer = next(d.value for d in at.dataframe if d.value.index.name == "row")
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


@pytest.mark.browser
def test_worked_example_in_browser(page, server) -> None:
    open_app(page, server, "worked-example")
    assert_no_exception(page)
    assert page.get_by_text("The source text's printed results").count() == 1
    grid = page.locator("[data-testid=stDataFrame]").first
    grid.scroll_into_view_if_needed()
    box = grid.bounding_box()
    assert box is not None
    # first data cell of col 1 (right of the row markers, below the header): 1 -> 5;
    # the canvas grid can miss a double-click while it is still laying out: try again
    source = page.get_by_text("The source text's printed results")
    for attempt in range(3):
        page.mouse.dblclick(box["x"] + 45, box["y"] + 52)
        page.wait_for_timeout(500)
        page.keyboard.press("Control+A")
        page.keyboard.type("5")
        page.keyboard.press("Enter")
        try:
            source.wait_for(state="detached", timeout=20_000)
            break
        except Exception:
            if attempt == 2:
                raise
            page.keyboard.press("Escape")
    wait_done(page)
    assert_no_exception(page)
    body = page.inner_text("body")
    assert "0.162" in body  # LayerNorm of [5, 2, 7]: (5 − 4.667) / 2.055
    screenshot(page, "worked-example")
