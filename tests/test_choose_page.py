"""The "Which normalization?" page (/choose): the guide, the model audit, uploads."""

from __future__ import annotations

import io as pyio
import pickle

import keys
import pytest
import torch
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

from normviz import METHODS
from normviz.choose import guide, zoo
from normviz.methods import listed
from ui.params import PAGE_PARAMS, fmt

PARAMS = {p.name: p for p in PAGE_PARAMS["choose"]}


def _advice(at) -> str:
    return " ".join(s.value for s in at.success)


def _findings(at):
    return next(d.value for d in at.table if d.value.index.name == "layer")


def test_default_view() -> None:
    at = run_app("choose")
    assert_clean(at)
    assert "**Use LayerNorm**" in _advice(at)  # a transformer, 32 samples per device
    table = next(d.value for d in at.table if d.value.index.name == "method")
    assert list(table.index) == [METHODS[k].label for k in listed("guide")]  # DyT too
    answers = dict(at.table[0].value["answer"])
    bias_check = "Bias disabled before per-channel norms (BatchNorm, InstanceNorm)"
    assert answers[bias_check] == "no: needless bias in conv1"  # the first model: ResNet
    findings = next(d.value for d in at.table if d.value.index.name == "layer")
    assert findings.loc["bn1", "needless bias"] == "YES"
    assert "optimizer = torch.optim.AdamW" in texts(at)
    assert not at.warning and not at.error
    # the page's own parameters are in the URL from the first run: a copied link is complete
    for name, p in PARAMS.items():
        assert url_value(at, name) == fmt(p.default), name


@pytest.mark.parametrize(
    ("arch", "batch", "constraints", "label"),
    [
        ("rnn", 32, [], "LayerNorm"),
        ("cnn", 64, [], "BatchNorm"),
        ("cnn", 4, [], "GroupNorm"),
        ("cnn", 64, ["same"], "GroupNorm"),
        ("detection", 2, ["shift"], "GroupNorm"),
        ("style", 8, [], "InstanceNorm"),
        ("transformer", 8, ["cost"], "RMSNorm"),
    ],
)
def test_guide_answers(arch: str, batch: int, constraints: list[str], label: str) -> None:
    at = run_app("choose")
    at.radio(key=keys.key("choose", "arch")).set_value(arch)
    at.number_input(key=keys.key("choose", "per_device")).set_value(batch)
    at.button_group(key=keys.key("choose", "constraints")).set_value(constraints)
    at.run()
    assert_clean(at)
    assert f"**Use {label}**" in _advice(at)
    rec = guide.recommend(guide.Situation(arch, batch, frozenset(constraints)))
    page = texts(at)
    for line in (*rec.reasons, *rec.pitfalls):
        assert line in page, line
    # the answers are in the URL: the same link gives the same advice
    assert url_value(at, "arch") == arch and url_value(at, "per_device") == str(batch)
    assert url_value(at, "constraints") == ",".join(constraints)
    again = run_app("choose", {n: url_value(at, n) for n in PARAMS})
    assert not again.warning
    assert _advice(again) == _advice(at)


@pytest.mark.parametrize("key", list(zoo.ZOO))
def test_every_zoo_model_is_audited(key: str) -> None:
    at = run_app("choose")
    at.selectbox(key=keys.key("choose", "model")).set_value(key).run()
    assert_clean(at)
    assert url_value(at, "model") == key
    report = zoo.audit_zoo_model(key)
    findings = _findings(at)
    assert list(findings.index) == [f.name for f in report.findings]
    assert list(findings["placement"]) == [f.placement for f in report.findings]
    checklist = at.table[0].value
    assert list(checklist["answer"]) == [a for _, a in report.checklist()]


def test_the_sample_file_is_audited() -> None:
    at = run_app("choose")
    at.toggle(key=keys.key("choose", "use_sample")).set_value(True).run()
    assert_clean(at)
    assert url_value(at, "use_sample") == "1"
    saved = next(d.value for d in at.table if d.value.index.name == "module")
    assert list(saved.index) == ["bn1", "bn2"]
    assert saved.loc["bn1", "notes"] == (
        "updated in 3 training step(s); needless bias: conv1.bias, which its mean "
        "subtraction removes (a guess from names and shapes)"
    )
    assert "2 module(s) with normalization parameters or buffers" in texts(at)
    assert "Likely needless bias (1): `conv1.bias` → `bn1`." in texts(at)


def _pt(obj: object) -> bytes:
    buf = pyio.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


class _Evil:
    def __reduce__(self) -> tuple:
        return (print, ("must not run",))


@pytest.mark.parametrize(
    ("name", "data", "expect"),
    [
        ("decoder.pt", _pt(zoo.zoo_state_dict("rms_decoder")), "attn_norm"),
        ("net.pth", _pt({"model": zoo.zoo_state_dict("unet")}), "model.enc.gn1"),
        ("evil.pt", pickle.dumps({"w": _Evil()}), "was refused"),
        ("junk.safetensors", b"\x00" * 64, "was refused"),
        ("empty.pt", b"", "was refused"),
    ],
)
def test_uploads(name: str, data: bytes, expect: str) -> None:
    at = run_app("choose")
    at.get("file_uploader")[0].upload(name, data).run()
    assert_clean(at)
    assert expect in texts(at) + " ".join(
        str(d.value.index.tolist()) for d in at.table if d.value.index.name == "module"
    )


def test_a_link_reproduces_the_guide_and_the_audits() -> None:
    link = {
        "arch": "cnn",
        "per_device": "64",
        "constraints": "same,shift",
        "model": "unet",
        "use_sample": "1",
    }
    at = run_app("choose", link)
    assert_clean(at)
    assert not at.warning
    assert "**Use GroupNorm**" in _advice(at)  # a CNN at 64 per device, but train = inference
    assert at.radio(key=keys.key("choose", "arch")).value == "cnn"
    assert list(at.button_group(key=keys.key("choose", "constraints")).value) == ["same", "shift"]
    report = zoo.audit_zoo_model("unet")
    assert list(_findings(at).index) == [f.name for f in report.findings]
    saved = next(d.value for d in at.table if d.value.index.name == "module")
    assert list(saved.index) == ["bn1", "bn2"]  # the sample file's audit is open
    assert {n: url_value(at, n) for n in link} == link


@pytest.mark.parametrize(
    "bad",
    [
        # every value of a full link refused: not a choice, out of range, wrong type
        {
            "arch": "quantum",
            "per_device": "65537",
            "constraints": "online,teleport",
            "model": "vgg",
            "use_sample": "maybe",
        },
        # a link that sets a few: the bad ones named, the missing ones listed
        {"per_device": "2.5", "constraints": "same,,shift"},
    ],
)
def test_bad_page_parameters_fall_back_with_a_warning(bad: dict[str, str]) -> None:
    at = run_app("choose", bad)
    assert_clean(at)
    assert_refused(at, "choose", bad, bad)
    assert "**Use LayerNorm**" in _advice(at)  # the defaults: a transformer, 32 per device
    assert _findings(at).loc["bn1", "needless bias"] == "YES"  # the first model: ResNet
    assert not any(d.value.index.name == "module" for d in at.table)  # no sample audit


@pytest.mark.parametrize(
    "query",
    [
        {"ch_arch": "quantum", "ch_batch": "-3"},
        {"layout": "NCHW", "groups": "0", "C": "7"},
        {"seed": "1e400", "unknown🙂": "x"},
    ],
)
def test_hostile_urls_do_not_break_the_page(query: dict[str, str]) -> None:
    at = run_app("choose", query=query)
    assert_clean(at)
    assert at.warning
    assert "**Use LayerNorm**" in _advice(at)


@pytest.mark.browser
def test_choose_in_browser(page, server, tmp_path) -> None:
    open_app(page, server, "choose")
    assert_no_exception(page)
    page.get_by_text("Use LayerNorm").first.wait_for()
    page.get_by_text("CNN (classification, general vision)").click()
    page.get_by_text("Use BatchNorm").first.wait_for()
    batch = page.get_by_label("Samples per device per step", exact=True)
    batch.fill("4")
    batch.press("Enter")
    page.get_by_text("Use GroupNorm").first.wait_for()
    sample = tmp_path / "resnet_block.safetensors"
    sample.write_bytes(zoo.zoo_safetensors("resnet"))
    page.locator("[data-testid=stFileUploaderDropzoneInput]").set_input_files(str(sample))
    page.get_by_text("2 module(s) with normalization parameters").wait_for(timeout=120_000)
    # the table is a canvas; its cells exist for screen readers only
    page.get_by_text("updated in 3 training step(s)").first.wait_for(state="attached")
    assert_no_exception(page)
    page.locator("[data-testid=stGraphVizChart]").first.scroll_into_view_if_needed()
    screenshot(page, "choose")
