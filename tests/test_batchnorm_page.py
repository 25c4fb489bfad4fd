"""The /batchnorm page: every section through app.py (AppTest), hostile links, and Chromium."""

from __future__ import annotations

import json

import keys
import pytest
from conftest import (
    ROOT,
    assert_clean,
    assert_no_exception,
    run_app,
    screenshot,
    texts,
    wait_done,
)
from signals import assert_within_budget

from normviz import batchnorm as bn
from normviz.sections import slugs
from ui.params import PAGE_PARAMS, fmt

PARAMS = {p.name: p for p in PAGE_PARAMS["batchnorm"]}
# what each section must show (a phrase of its explanation and of its numbers)
SECTION_TEXT = {
    "running": ("running buffers", "num_batches_tracked = 100"),
    "eval": ("determinism", "`model.eval()` is not `torch.no_grad()`"),
    "noise": ("batch-mates", "over 200 batches"),
    "where": ("He et al. 2016", "bias=False"),
    "gradients": ("not a guarantee", "with BatchNorm: the weight gradient grows"),
    "coupling": ("not a preprocessing step", "off-diagonal entries are non-zero"),
    "causal": ("causal mask", "a leak no causal mask can stop"),
    "bessel": ("unbiased", "more than 1 value per channel"),
    "batch-size": ("held-out batches", "training mode"),
    "shift": ("scale²", "GroupNorm uses G = 2"),
    "order": ("sorted", "clusters"),
    "accumulation": ("optimizer step", "mean |y_micro − y_full|"),
    "sync": ("all-reduce", "synchronized vs one batch of 32"),
    "freeze": ("requires_grad=False", "fully frozen"),
    "checkpoint": (
        "buffers",
        "missing keys ['running_mean', 'running_var']",
        'Missing key(s) in state_dict: "num_batches_tracked"',
    ),
    "model": ("batches of 2", "Equal samples seen", "does not move with the shift"),
    "renorm": ("Batch Renormalization", "At batch 2, BRN's evaluation accuracy is"),
    "realnet": ("EfficientNet-Lite0", "of 8 images at batch 1", "keep their clean top-1 class"),
}


def _charts(at) -> list[dict]:
    """The Plotly figures the run sent, as JSON."""
    return [json.loads(e.proto.spec) for e in at.get("plotly_chart")]


def _query(at, name: str) -> str:
    v = at.query_params[name]
    return v[-1] if isinstance(v, list) else v


def test_sections_match_the_url_choices() -> None:
    # one declaration: the tabs and the URL's `sim` choices both come from SECTIONS
    assert PARAMS["sim"].choices == slugs(bn.SECTIONS)
    # every section's and part's knob is a URL parameter of the page
    declared = {k.name for s in (*bn.SECTIONS, *bn.PART_SECTIONS) for k in s.knobs}
    assert declared <= {p.name for p in PAGE_PARAMS["batchnorm"]}
    assert len({s.label for s in bn.SECTIONS}) == len(bn.SECTIONS)  # a tab per section
    assert set(SECTION_TEXT) == set(PARAMS["sim"].choices or ())
    page = (ROOT / "pages" / "batchnorm.py").read_text()
    assert "SECTIONS" not in page.replace("bn.SECTIONS", "")  # no second list in the page


def test_default_visit() -> None:
    at = run_app("batchnorm")
    assert_clean(at)
    assert not at.warning  # a plain visit is quiet
    assert not at.error
    page = texts(at)
    for phrase in SECTION_TEXT["running"]:
        assert phrase in page
    assert "memory is about 10 batches" in page
    (fig,) = _charts(at)
    assert fig["layout"]["title"]["text"] == "Running statistics follow the batches"
    # every page parameter is written to the URL, for a complete shared link
    for name, p in PARAMS.items():
        assert _query(at, name) == fmt(p.default), name
    # a rerun with nothing changed is served from the caches
    at.run()
    assert_clean(at)


@pytest.mark.parametrize("sim", list(SECTION_TEXT))
def test_every_section(sim: str) -> None:
    at = run_app("batchnorm", {"sim": sim}, timeout=300)
    assert_clean(at)
    page = texts(at) + "\n".join(str(d.value) for d in at.table)
    for phrase in SECTION_TEXT[sim]:
        assert phrase in page, (sim, phrase)
    charts = _charts(at)
    # one chart per section, and one per part with a figure (the model's shifted digits)
    assert len(charts) == (2 if sim in ("model", "realnet") else 1)
    assert_within_budget(*charts, what=sim)
    assert keys.knob(at, "batchnorm", "sim") == sim and _query(at, "sim") == sim


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("batch_size", "0"),
        ("batch_size", "257"),
        ("batch_size", "abc"),
        ("momentum", "1.5"),
        ("momentum", "nan"),
        ("convention", "tf"),
        ("steps", "1e9"),
        ("steps", "-3"),
        ("bn_step", "-1"),
        ("bn_step", "5000"),
        ("channel", "-1"),
        ("channel", "1.5"),
        ("bn_seeds", "9"),
        ("shift", "inf"),
        ("scale", "0"),
        ("accum", "99"),
        ("devices", "0"),
        ("compare", "instance"),
        ("bn_depth", "99"),
        ("bn_init", "zeros"),
        ("cp_n", "5"),
        ("leak_shift", "inf"),
        ("sim", "<script>"),
    ],
)
def test_hostile_url_values_fall_back_with_a_warning(name: str, value: str) -> None:
    at = run_app("batchnorm", {name: value})
    assert_clean(at)
    warned = "\n".join(w.value for w in at.warning)
    assert f"`{name}={value}` is not valid" in warned, warned
    assert keys.knob(at, "batchnorm", name) == PARAMS[name].default
    assert _query(at, name) == fmt(PARAMS[name].default)


def test_a_full_link_is_read() -> None:
    query = {p.name: fmt(p.default) for p in PARAMS.values()}
    query |= {"batch_size": "32", "convention": "keras", "momentum": "0.99", "sim": "running"}
    at = run_app("batchnorm", query)
    assert_clean(at)
    assert not at.warning
    assert keys.knob(at, "batchnorm", "batch_size") == 32
    assert "memory is about 100 batches" in texts(at)
    names = [t.get("name") for t in _charts(at)[0]["data"]]
    assert "pytorch convention, momentum 0.01" in names  # its twin traces the same mean


def test_settings_that_cannot_run_are_explained() -> None:
    at = run_app("batchnorm", {"T": "1", "batch_size": "1"})
    assert_clean(at)
    # torch's own refusal is shown as the lesson it is (an info box), not as a failure
    assert any("more than 1 value per channel" in e.value for e in at.info)
    assert not at.error
    assert not _charts(at)
    big = run_app("batchnorm", {"layout": "NCHW", "C": "64", "H": "32", "W": "32"})
    assert_clean(big)
    # the runner escapes markdown characters of a message: compare the text it shows
    assert any("over the app's cap" in e.value.replace("\\", "") for e in big.error)


def test_a_section_that_cannot_run_says_why() -> None:
    # 900 values per sample: the lab runs, but the sweep's batch of 256 over 2000 steps is too much
    at = run_app("batchnorm", {"T": "100", "C": "9", "steps": "2000", "sim": "batch-size"})
    assert_clean(at)
    errors = "\n".join(e.value for e in at.error)
    assert "This setting cannot run" in errors and "lower the steps" in errors


def test_a_group_count_that_does_not_divide_c_is_refused() -> None:
    at = run_app("batchnorm", {"sim": "shift", "groups": "3"})  # C = 8
    assert_clean(at)
    errors = "\n".join(e.value.replace("\\", "") for e in at.error)
    assert "C=8, groups=3" in errors and "Try groups in 1, 2, 4, 8" in errors
    assert not _charts(at)  # refused, not replaced by a divisor


def test_switching_the_rule_converts_the_momentum() -> None:
    at = run_app("batchnorm")
    at.radio(key=keys.key("batchnorm", "convention")).set_value("keras").run()
    assert_clean(at)
    assert keys.knob(at, "batchnorm", "momentum") == pytest.approx(0.9)
    assert _query(at, "momentum") == "0.9"
    at.radio(key=keys.key("batchnorm", "convention")).set_value("cumulative").run()
    assert at.slider(key=keys.key("batchnorm", "momentum")).disabled
    assert "every batch weighs the same" in texts(at)
    at.radio(key=keys.key("batchnorm", "convention")).set_value("pytorch").run()
    assert keys.knob(at, "batchnorm", "momentum") == pytest.approx(0.1)  # back from Keras' 0.9
    assert_clean(at)


def test_controls_rerun_and_write_the_url() -> None:
    at = run_app("batchnorm")
    at.select_slider(key=keys.key("batchnorm", "batch_size")).set_value(2).run()
    at.slider(key=keys.key("batchnorm", "steps")).set_value(30).run()
    assert_clean(at)
    assert _query(at, "batch_size") == "2" and _query(at, "steps") == "30"
    assert "num_batches_tracked = 30" in texts(at)
    at.number_input(key=keys.key("batchnorm", "channel")).set_value(7).run()
    assert_clean(at)
    assert _charts(at)[0]["layout"]["annotations"][0]["text"] == "Mean of channel 7"
    assert _query(at, "channel") == "7"


def test_a_link_sets_the_channel_to_plot() -> None:
    at = run_app("batchnorm", {"channel": "5"})
    assert_clean(at)
    assert not at.warning
    assert at.number_input(key=keys.key("batchnorm", "channel")).value == 5
    assert _charts(at)[0]["layout"]["annotations"][0]["text"] == "Mean of channel 5"
    assert "channel 5" in texts(at)
    order = run_app("batchnorm", {"channel": "3", "sim": "order"})  # the other channel view
    assert all("channel 3" in a["text"] for a in _charts(order)[0]["layout"]["annotations"])
    # past the sidebar's C (8 here) the page follows channel 0, and the link says so
    past = run_app("batchnorm", {"channel": "12"})
    assert_clean(past)
    assert _charts(past)[0]["layout"]["annotations"][0]["text"] == "Mean of channel 0"
    assert _query(past, "channel") == "0"


def test_section_widgets() -> None:
    at = run_app("batchnorm", {"sim": "shift"})
    at.slider(key=keys.key("batchnorm", "shift")).set_value(2.0).run()
    assert_clean(at)
    table = at.table[0].value
    bn = table[table["method"] == "BatchNorm"].iloc[0]
    assert bn["output mean"] == pytest.approx(2.0, abs=0.1)  # BatchNorm drifts with the shift
    assert _query(at, "shift") == "2"
    # values of closed tabs stay in the URL: a copied link is complete
    assert _query(at, "accum") == "4" and _query(at, "devices") == "4"

    acc = run_app("batchnorm", {"sim": "accumulation"})
    acc.slider(key=keys.key("batchnorm", "accum")).set_value(2).run()
    assert_clean(acc)
    rows = acc.table[0].value
    assert list(rows["num_batches_tracked"]) == [200, 100]

    sync = run_app("batchnorm", {"sim": "sync"})
    sync.slider(key=keys.key("batchnorm", "devices")).set_value(2).run()
    assert_clean(sync)
    assert "synchronized vs one batch of 16" in texts(sync)


def test_model_section_with_layernorm_and_nchw() -> None:
    query = {"sim": "model", "compare": "layer", "shift": "1", "bn_seeds": "1"}
    at = run_app("batchnorm", query, timeout=300)
    assert_clean(at)
    table = at.table[0].value
    assert list(table["network"]) == [
        "BatchNorm, batch 2",
        "BatchNorm, batch 64",
        "LayerNorm, batch 2",
        "LayerNorm, batch 64",
    ]
    # LayerNorm has no train/eval split: a digit gets the same output in both modes (training
    # mode scores the full test batches only: at batch 64, 320 of the 359 digits)
    ln = table.iloc[2]
    assert abs(ln["training mode"] - ln["evaluation mode"]) <= 0.003
    assert "LayerNorm keeps no running statistics" in texts(at)
    # the shift only re-scores the trained networks: its chart title follows the slider
    at.slider(key=keys.key("batchnorm", "shift")).set_value(2.0).run()
    assert_clean(at)
    assert "shift 2 σ" in _charts(at)[1]["layout"]["title"]["text"]
    assert _query(at, "shift") == "2"
    nchw = run_app("batchnorm", {"layout": "NCHW", "sim": "checkpoint"})
    assert_clean(nchw)
    assert "(6,)" in "\n".join(str(d.value) for d in nchw.table)


def test_a_batch_size_from_an_old_link_snaps_to_a_power_of_two() -> None:
    at = run_app("batchnorm", {"batch_size": "9"})
    assert_clean(at)
    # a valid old value: snapped, with a note, not refused
    assert not any("`batch_size=9` is not valid" in w.value for w in at.warning)
    assert keys.knob(at, "batchnorm", "batch_size") == 8 and _query(at, "batch_size") == "8"
    assert any("batch size 9" in i.value and "uses 8" in i.value for i in at.info)
    assert "n = b·T = 48 values" in texts(at)
    at.select_slider(key=keys.key("batchnorm", "batch_size")).set_value(32).run()
    assert not any("batch size 9" in i.value for i in at.info)  # gone once it changes


def test_stepping_through_the_running_statistics() -> None:
    at = run_app("batchnorm", {"bn_step": "5"})
    assert_clean(at)
    assert _charts(at)[0]["layout"]["title"]["text"] == "Running statistics after batch 5 of 100"
    assert "Batch 5 of 100, channel 0" in texts(at)
    assert _query(at, "bn_step") == "5"  # the player steps in the browser (test_stepper_browser)
    whole = run_app("batchnorm", {"bn_step": "0"})
    assert _charts(whole)[0]["layout"]["title"]["text"] == "Running statistics follow the batches"
    # a step past the steps shows the last batch
    late = run_app("batchnorm", {"bn_step": "150", "steps": "40"})
    assert_clean(late)
    assert "after batch 40 of 40" in _charts(late)[0]["layout"]["title"]["text"]


# ---- a real browser ------------------------------------------------------------------------


SLOW = 300_000  # ms: a first visit on a busy two-core machine imports torch and computes


@pytest.mark.browser
def test_batchnorm_in_browser(page, server) -> None:
    page.goto(f"{server}/batchnorm")
    wait_done(page, timeout=SLOW)
    assert_no_exception(page)
    assert page.get_by_text("BatchNorm lab", exact=True).count() >= 1
    page.locator(".js-plotly-plot").first.wait_for(timeout=SLOW)
    assert page.locator(".js-plotly-plot").count() == 1  # only the open tab is computed
    # open another section: its tab reruns the page and lands in the URL
    page.get_by_role("tab", name="Shift").click()
    page.wait_for_url("**sim=shift**", timeout=SLOW)
    page.get_by_text("Shifted evaluation data through each method").first.wait_for(timeout=SLOW)
    wait_done(page, timeout=SLOW)
    assert_no_exception(page)
    # a new topic tab: the evaluation-mode formula is rendered (KaTeX), not shown as source
    page.get_by_role("tab", name="Evaluation mode").click()
    page.wait_for_url("**sim=eval**", timeout=SLOW)
    page.get_by_text("Same input, different batches").first.wait_for(timeout=SLOW)
    wait_done(page, timeout=SLOW)
    assert_no_exception(page)
    assert page.locator(".katex").count() >= 1 and "$$" not in page.inner_text("body")
    # Batch Renormalization: a first run trains (gated), its chart's text is drawn
    page.get_by_role("tab", name="Batch Renorm").click()
    page.wait_for_url("**sim=renorm**", timeout=SLOW)
    page.locator("svg text", has_text="BRN's corrections and their bounds").first.wait_for(
        timeout=SLOW
    )
    wait_done(page, timeout=SLOW)
    assert_no_exception(page)
    assert "BRN's evaluation accuracy is" in page.inner_text("body")
    # move the batch-size slider with the keyboard: the URL follows
    slider = page.get_by_role("slider", name="Batch size b")
    slider.focus()
    slider.press("ArrowRight")
    page.wait_for_url("**batch_size=16**", timeout=SLOW)  # powers of two: 8 → 16
    wait_done(page, timeout=SLOW)
    assert_no_exception(page)
    page.get_by_role("tab", name="Running stats").click()
    page.wait_for_url("**sim=running**", timeout=SLOW)
    page.get_by_text("Running statistics follow the batches").first.wait_for(timeout=SLOW)
    wait_done(page, timeout=SLOW)
    assert_no_exception(page)
    assert "n = b·T = 96 values" in page.inner_text("body")  # b = 16 now, T = 6
    # step back from the last batch with the player (ui.stepper): the chart's title follows
    page.get_by_role("button", name="Previous step (left arrow)").click()
    page.wait_for_url("**bn_step=99**", timeout=SLOW)
    page.locator("svg text", has_text="after batch 99 of 100").first.wait_for(timeout=SLOW)
    assert_no_exception(page)
    screenshot(page, "batchnorm")
