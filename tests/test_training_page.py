"""The /training page: every experiment from a link (AppTest), bad links, and a real browser."""

from __future__ import annotations

import json

import keys
import pytest
from conftest import (
    assert_clean,
    assert_no_exception,
    assert_refused,
    open_app,
    run_app,
    screenshot,
    texts,
    url_value,
)

from normviz import training
from normviz.sections import Section

PAGE = "training"

# the cheapest setting of each experiment: one seed, the fewest epochs
CHEAP: dict[str, dict[str, str]] = {
    "lr": {"tol_epochs": "1", "tol_norms": "none,batch"},
    "dyt": {"dy_epochs": "1"},
    "converge": {"cv_epochs": "1"},
    "batch": {"bs_epochs": "1"},
    "smooth": {"sm_epochs": "1"},
    "noise": {"no_epochs": "2"},
    "population": {"pop_shift": "noise", "pop_strength": "0.25"},
    "tiny": {"tiny_epochs": "1", "tiny_batch": "8"},
    "ws": {"ws_epochs": "0.5"},
}


def charts(at) -> list[dict]:
    return [json.loads(e.proto.spec) for e in at.get("plotly_chart")]


@pytest.mark.parametrize("section", training.SECTIONS, ids=lambda s: s.slug)
def test_every_experiment_runs_from_a_link(section: Section) -> None:
    link = {"exp": section.slug, "runs": "1", **CHEAP[section.slug]}
    at = run_app(PAGE, link, timeout=180)
    assert_clean(at)
    assert [h.value for h in at.subheader] == [section.label]
    assert at.radio(key=keys.key("training", "exp")).value == section.slug
    assert len(charts(at)) == 1
    assert at.table, "the experiment's table"
    body = texts(at)
    heads = ("Holds here", "Does not hold here", "Mixed here")  # a verdict, whichever it is
    assert any(h in body for h in heads), body[-800:]
    assert "Where the statistics come from" in body
    assert {k: url_value(at, k) for k in link} == link  # the link is written back as it came


def test_default_view_is_the_first_experiment() -> None:
    at = run_app(PAGE, {"runs": "1", "tol_epochs": "1"}, timeout=180)
    assert_clean(at)
    assert [h.value for h in at.subheader] == [training.SECTIONS[0].label]
    assert url_value(at, "exp") == training.SECTIONS[0].slug


@pytest.mark.parametrize(
    "bad",
    [
        {"exp": "dropout", "runs": "1", "tol_epochs": "1"},
        {"exp": "tiny", "runs": "99", "tiny_batch": "3", "tiny_epochs": "1"},
        {"exp": "population", "runs": "1", "pop_shift": "<b>rain</b>", "pop_strength": "2"},
    ],
)
def test_bad_page_parameters_fall_back_with_a_warning(bad: dict[str, str]) -> None:
    at = run_app(PAGE, bad, timeout=180)
    assert_clean(at)
    knobs = {k.name: k for k in training.KNOBS}
    from ui.params import parse

    refused = {}
    for k, v in bad.items():
        try:
            parse(knobs[k], v)
        except ValueError:
            refused[k] = v
    assert refused
    assert_refused(at, PAGE, refused, bad)


@pytest.mark.browser
def test_training_in_browser(page, server) -> None:
    open_app(page, server, PAGE)  # a plain visit: the first experiment at its defaults
    page.get_by_text("Holds here").first.wait_for(timeout=120_000)
    assert_no_exception(page)
    page.get_by_text("Batch size", exact=True).first.click()
    page.get_by_text("Wu & He 2018: ImageNet, ResNet-50").first.wait_for(timeout=120_000)
    page.get_by_text("at b = 2 BatchNorm").first.wait_for(timeout=60_000)
    assert_no_exception(page)
    # the URL is written once at the end of the run, after the text above appears
    page.wait_for_function("() => location.search.includes('exp=batch')", timeout=120_000)
    page.locator("[data-testid=stPlotlyChart]").first.scroll_into_view_if_needed()
    screenshot(page, PAGE)
    page.get_by_text("Smoothness", exact=True).first.click()
    page.get_by_text("gradient change").first.wait_for(timeout=120_000)
    assert_no_exception(page)
    # the URL is written once at the end of the run, after the text above appears
    page.wait_for_function("() => location.search.includes('exp=smooth')", timeout=120_000)
    page.get_by_text("DyT across learning rates", exact=True).first.click()
    page.get_by_text("DyT's α after training").first.wait_for(timeout=600_000)  # 48 networks
    page.get_by_text("DyT's α per layer").first.wait_for(timeout=60_000)  # the 2nd panel
    assert_no_exception(page)
    page.wait_for_function("() => location.search.includes('exp=dyt')", timeout=120_000)
    page.get_by_text("Weight Standardization", exact=True).first.click()
    page.get_by_text("at batch 1 GroupNorm + WS scores").first.wait_for(timeout=180_000)
    page.get_by_text("GroupNorm + WS against BatchNorm").first.wait_for(timeout=60_000)
    assert_no_exception(page)
    page.wait_for_function("() => location.search.includes('exp=ws')", timeout=120_000)


def test_instancenorm_fits_the_cnn_and_is_refused_in_the_mlp() -> None:
    base = {"exp": "lr", "runs": "1", "tol_epochs": "1"}
    at = run_app(PAGE, {**base, "tol_net": "mlp", "tol_norms": "instance"}, timeout=180)
    assert_clean(at)
    assert any("one value per instance" in i.value for i in at.info)  # torch's refusal, a lesson
    assert not charts(at)
    at = run_app(PAGE, {**base, "tol_net": "cnn", "tol_norms": "none,instance"}, timeout=180)
    assert_clean(at)
    assert len(charts(at)) == 1
    assert "InstanceNorm pools H, W" in texts(at)
    at = run_app(PAGE, {**base, "tol_net": "mlp", "tol_norms": "batch,instance"}, timeout=180)
    assert "Left out: InstanceNorm" in texts(at)
