"""The pre-norm vs post-norm page (/residual): AppTest for its options, Chromium for the rest."""

from __future__ import annotations

import json

import pytest
from conftest import assert_clean, assert_no_exception, run_app, screenshot, texts, wait_done

from normviz import residual as rs


def _titles(at) -> list[str]:
    return [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")]


def test_default_view() -> None:
    at = run_app("residual")
    assert_clean(at)
    latex = "\n".join(e.value for e in at.latex)
    assert rs.PRE_FORMULA in latex and rs.POST_FORMULA in latex
    page = texts(at)
    assert "Pre-norm: the stream's RMS grows" in page
    assert "Post-norm: the stream is renormalized" in page
    assert "No normalization:" in page
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    assert len(specs) == 1  # training waits for the button
    names = {t.get("name") for t in specs[0]["data"]}
    assert set(rs.PLACEMENT_LABELS.values()) <= names
    assert "24 blocks" in specs[0]["layout"]["title"]["text"]
    assert any("Press **Train**" in i.value for i in at.info)
    assert not at.warning


def test_depth_64_one_seed_and_every_option() -> None:
    at = run_app("residual")
    at.slider(key="res_depth").set_value(64)
    at.slider(key="res_seeds").set_value(1)
    at.select_slider(key="res_width").set_value(16)
    at.run()
    assert_clean(at)
    assert "64 blocks, width 16" in _titles(at)[0]
    assert "median of 1 seed(s)" in _titles(at)[0]
    assert "after 64 blocks" in texts(at)
    at.slider(key="res_depth").set_value(6)
    at.radio(key="res_norm").set_value("rms")
    at.radio(key="res_block").set_value("mixer")
    at.run()
    assert_clean(at)
    assert "RMSNorm" in _titles(at)[0] and "6 blocks" in _titles(at)[0]


def test_training_runs_on_request_and_keeps_its_result() -> None:
    at = run_app("residual")
    at.slider(key="res_tr_depth").set_value(6)
    at.slider(key="res_tr_steps").set_value(20)
    at.select_slider(key="res_tr_lr").set_value(0.1)
    at.select_slider(key="res_tr_width").set_value(16)
    at.button(key="res_tr_go").click()
    at.run()
    assert_clean(at)
    outcomes = [m.value for m in at.markdown if m.value.startswith("- **")]
    assert [o.split("**")[1] for o in outcomes] == list(rs.PLACEMENT_LABELS.values())
    assert any("diverged at step" in o for o in outcomes), outcomes
    titles = _titles(at)
    assert any("learning rate 0.1" in t and "6 blocks" in t for t in titles), titles
    # a changed setting keeps showing the last run until Train is pressed again
    at.select_slider(key="res_tr_lr").set_value(0.001).run()
    assert_clean(at)
    assert "Showing the last run" in texts(at)
    assert any("learning rate 0.1" in t for t in _titles(at))


@pytest.mark.parametrize(
    "query",
    [
        {"depth": "-1", "res_depth": "999"},
        {"layout": "<script>alert(1)</script>", "B": "1e400"},
        {"method": "rms", "eps": "nan", "seed": "-5"},
        {"lr": "1e9", "steps": "abc", "placement": "middle"},
    ],
)
def test_hostile_urls_do_not_break_the_page(query: dict[str, str]) -> None:
    at = run_app("residual", query=query)
    assert_clean(at)
    assert at.warning  # a bad or unknown value is reported, never silently used
    assert len(at.get("plotly_chart")) == 1


@pytest.mark.browser
def test_residual_in_browser(page, server) -> None:
    # the first visit measures 9 untrained stacks: allow for a busy two-core machine
    page.goto(f"{server}/residual")
    wait_done(page, timeout=300_000)
    assert_no_exception(page)
    page.locator(".js-plotly-plot").first.wait_for()
    assert page.get_by_text("Pre-norm: the stream's RMS grows").count() == 1
    # fewest steps (keyboard on the slider), then train
    steps = page.get_by_role("slider", name="Adam steps")
    steps.focus()
    steps.press("Home")
    page.wait_for_timeout(300)
    page.get_by_role("button", name="Train the three stacks").click()
    page.get_by_text("in 10 steps").first.wait_for(timeout=300_000)
    wait_done(page, timeout=300_000)
    assert_no_exception(page)
    page.locator(".js-plotly-plot").nth(1).wait_for()
    assert page.locator(".js-plotly-plot").count() == 2
    page.locator(".js-plotly-plot").nth(1).scroll_into_view_if_needed()
    screenshot(page, "residual")
