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
    # the editable grid is on the page (cell edits are tested through AppTest: clicking
    # into the canvas grid missed under CI load)
    assert page.locator("[data-testid=stDataFrame]").count() >= 1
    assert "-0.889" in page.inner_text("body") or "−0.889" in page.inner_text("body")
    screenshot(page, "worked-example")
