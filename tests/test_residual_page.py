"""The pre-norm vs post-norm page (/residual): AppTest for its options, Chromium for the rest."""

from __future__ import annotations

import json

import keys
import pytest
from conftest import (
    assert_clean,
    assert_no_exception,
    assert_refused,
    run_app,
    screenshot,
    texts,
    url_value,
    wait_done,
)

from normviz import residual as rs
from normviz.alttext import plain
from ui.params import PAGE_PARAMS, fmt

PARAMS = {p.name: p for p in PAGE_PARAMS["residual"]}
DEFAULT_TITLE = "24 blocks, width 32, LayerNorm: median of 3 seed(s)"
WARMUP_TITLE = "At initialization, width 32, LayerNorm: median of 3 seed(s)"


def _titles(at) -> list[str]:
    """The charts' titles as read (a line break is a space)."""
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    return [plain(s["layout"]["title"]["text"]) for s in specs]


def test_default_view() -> None:
    at = run_app("residual")
    assert_clean(at)
    latex = "\n".join(e.value for e in at.latex)
    for formula in (rs.PRE_FORMULA, rs.POST_FORMULA, rs.PERI_FORMULA, rs.DEEPNORM_FORMULA):
        assert formula in latex
    page = texts(at)
    assert "Pre-norm: the stream's RMS grows" in page
    assert "Post-norm: the stream's RMS stays at 1" in page
    assert "Peri-LN: the stream's RMS grows" in page
    assert "DeepNorm: the stream's RMS stays at 1" in page
    assert "No normalization:" in page
    assert "**Verdict** on the stream's scale after 24 blocks" in page
    assert "Kim et al. 2025" in page and "Wang et al. 2022" in page
    # DeepNorm's constants: the encoder-only variant, N = 12 for the default 24 MLP blocks
    alpha, beta = f"{(2 * 12) ** 0.25:.3g}", f"{(8 * 12) ** -0.25:.3g}"
    assert f"(at L = 24 MLP blocks: N = 12, α = {alpha}, β = {beta})." in page  # the card
    assert (
        f"α = (2N)^(1/4) = {alpha} and the branches start β = (8N)^(−1/4) = {beta} times "
        "smaller (encoder-only constants, N = 12 for 24 MLP blocks)" in page
    )
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    assert len(specs) == 2  # init and warm-up; training waits for the button
    names = {t.get("name") for t in specs[0]["data"]}
    assert set(rs.PLACEMENT_LABELS.values()) <= names
    assert _titles(at)[0].startswith(DEFAULT_TITLE)
    assert _titles(at)[1].startswith(WARMUP_TITLE)
    assert "Post-norm: the last block's gradient norm" in page
    assert "Xiong et al. 2020" in page
    assert any("Press **Train**" in i.value for i in at.info)
    assert not at.warning
    # both sections' settings are in the URL from the first run: a copied link is complete
    for name, p in PARAMS.items():
        assert url_value(at, name) == fmt(p.default), name


def test_depth_64_one_seed_and_every_option() -> None:
    at = run_app("residual")
    at.slider(key=keys.key("residual", "depth")).set_value(64)
    at.slider(key=keys.key("residual", "n_seeds")).set_value(1)
    at.select_slider(key=keys.key("residual", "width")).set_value(16)
    at.run()
    assert_clean(at)
    assert "64 blocks, width 16" in _titles(at)[0]
    assert "median of 1 seed(s)" in _titles(at)[0]
    assert "after 64 blocks" in texts(at)
    assert [url_value(at, n) for n in ("depth", "n_seeds", "width")] == ["64", "1", "16"]
    at.slider(key=keys.key("residual", "depth")).set_value(6)
    at.radio(key=keys.key("residual", "norm")).set_value("rms")
    at.radio(key=keys.key("residual", "block")).set_value("mixer")
    at.run()
    assert_clean(at)
    assert "RMSNorm" in _titles(at)[0] and "6 blocks" in _titles(at)[0]
    assert [url_value(at, n) for n in ("depth", "norm", "block")] == ["6", "rms", "mixer"]


def test_a_link_reproduces_both_sections() -> None:
    link = {
        **{n: fmt(p.default) for n, p in PARAMS.items()},
        **{"depth": "6", "n_seeds": "1", "width": "16", "norm": "rms", "block": "mixer"},
        **{"wu_width": "16", "wu_norm": "rms", "wu_block": "mixer", "wu_seeds": "1"},
        **{"tr_depth": "6", "tr_width": "16", "tr_norm": "rms", "tr_steps": "20", "lr": "0.1"},
    }
    at = run_app("residual", link)
    assert_clean(at)
    assert not at.warning
    assert _titles(at)[0].startswith("6 blocks, width 16, RMSNorm: median of 1 seed(s)")
    # a link made before Peri-LN and DeepNorm joined opens the same settings, now with them
    names = {t.get("name") for t in json.loads(at.get("plotly_chart")[0].proto.spec)["data"]}
    assert set(rs.PLACEMENT_LABELS.values()) <= names
    assert _titles(at)[1].startswith("At initialization, width 16, RMSNorm: median of 1 seed(s)")
    assert at.slider(key=keys.key("residual", "tr_depth")).value == 6
    assert at.select_slider(key=keys.key("residual", "lr")).value == 0.1
    # training still waits for the button; then it runs the link's settings
    at.button(key="res_tr_go").click().run()
    assert_clean(at)
    assert "Training 6 blocks at learning rate 0.1" in _titles(at)[2]
    assert "Showing the last run" not in texts(at)
    assert {n: url_value(at, n) for n in link} == link


def test_training_runs_on_request_and_keeps_its_result() -> None:
    at = run_app("residual")
    at.slider(key=keys.key("residual", "tr_depth")).set_value(6)
    at.slider(key=keys.key("residual", "tr_steps")).set_value(20)
    at.select_slider(key=keys.key("residual", "lr")).set_value(0.1)
    at.select_slider(key=keys.key("residual", "tr_width")).set_value(16)
    at.button(key="res_tr_go").click()
    at.run()
    assert_clean(at)
    assert [url_value(at, n) for n in ("tr_depth", "tr_steps", "lr", "tr_width")] == [
        "6",
        "20",
        "0.1",
        "16",
    ]
    outcomes = [
        m.value
        for m in at.markdown
        if m.value.startswith("- **") and not m.value.startswith("- **Verdict")
    ]
    assert [o.split("**")[1] for o in outcomes] == list(rs.PLACEMENT_LABELS.values())
    assert any("diverged at step" in o for o in outcomes), outcomes
    page = texts(at)
    assert "**Verdict, DeepNorm vs post-norm**" in page
    assert "**Verdict, Peri-LN vs pre-norm**" in page
    names = {t.get("name") for t in json.loads(at.get("plotly_chart")[-1].proto.spec)["data"]}
    assert set(rs.PLACEMENT_LABELS.values()) <= names
    titles = _titles(at)
    assert any("learning rate 0.1" in t and "6 blocks" in t for t in titles), titles
    # a changed setting keeps showing the last run until Train is pressed again
    at.select_slider(key=keys.key("residual", "lr")).set_value(0.001).run()
    assert_clean(at)
    assert "Showing the last run" in texts(at)
    assert any("learning rate 0.1" in t for t in _titles(at))
    assert url_value(at, "lr") == "0.001"


@pytest.mark.parametrize(
    "query",
    [
        {"res_depth": "999"},
        {"layout": "<script>alert(1)</script>", "B": "1e400"},
        {"method": "rms", "eps": "nan", "seed": "-5"},
        {"steps": "abc", "placement": "middle"},
    ],
)
def test_hostile_urls_do_not_break_the_page(query: dict[str, str]) -> None:
    at = run_app("residual", query=query)
    assert_clean(at)
    assert at.warning  # a bad or unknown value is reported, never silently used
    assert len(at.get("plotly_chart")) == 2


@pytest.mark.parametrize(
    "bad",
    [
        # every value of a full link refused: out of range, wrong type, not a choice
        {
            "depth": "65",
            "n_seeds": "1.5",
            "width": "48",
            "norm": "batch",
            "block": "conv",
            "tr_depth": "0",
            "tr_steps": "201",
            "lr": "1e9",
            "tr_width": "abc",
            "tr_norm": "",
            "tr_block": "<b>",
            "wu_width": "7",
            "wu_seeds": "9",
        },
        # a link that sets a few: the bad ones named, the missing ones listed
        {"depth": "-1", "lr": "0.5"},
    ],
)
def test_bad_page_parameters_fall_back_with_a_warning(bad: dict[str, str]) -> None:
    at = run_app("residual", bad)
    assert_clean(at)
    assert_refused(at, "residual", bad, bad)
    assert _titles(at)[0].startswith(DEFAULT_TITLE)  # the default view


@pytest.mark.browser
def test_residual_in_browser(page, server) -> None:
    # the first visit measures 15 untrained stacks: allow for a busy two-core machine
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
    page.get_by_role("button", name="Train the five stacks").click()
    page.get_by_text("in 10 steps").first.wait_for(timeout=300_000)
    wait_done(page, timeout=300_000)
    assert_no_exception(page)
    page.locator(".js-plotly-plot").nth(2).wait_for()
    assert page.locator(".js-plotly-plot").count() == 3
    page.locator(".js-plotly-plot").nth(2).scroll_into_view_if_needed()
    screenshot(page, "residual")
