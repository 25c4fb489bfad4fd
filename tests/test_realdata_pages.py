"""The real data sources on every page: AppTest per page with `data=minilm`, the sidebar's
real shape, bad `layer=` and over-long `text=`, hostile text shown inert, the element cap,
and a real browser on /axes."""

from __future__ import annotations

import io
from urllib.parse import quote

import keys
import numpy as np
import pytest
from conftest import (
    assert_clean,
    assert_no_exception,
    run_app,
    texts,
    unescaped,
    url_value,
    wait_done,
)
from hostile_payloads import MARKDOWN, assert_inert, png_bomb
from PIL import Image

from benchmarks.common import page_ids, url_path
from normviz import pretrained
from normviz.data import DEFAULT_GENERATOR, GENERATORS
from normviz.pretrained import minilm
from normviz.pretrained.photos import MAGIC
from ui import params as ns
from ui.pages import controls

TEXT = "The cat sat.\nA dog slept by the door."
REAL_PAGES = [url_path(p) for p in page_ids() if "real" in controls(url_path(p))]
OTHER_PAGES = [url_path(p) for p in page_ids() if "real" not in controls(url_path(p))]


def _real_shape(at) -> str:
    return "\n".join(m.value for m in at.sidebar.markdown if m.value.startswith("**Shape**"))


def _minilm_shape(text: str = TEXT, layer: str = minilm.DEFAULT_LAYER) -> tuple[int, ...]:
    return pretrained.RealInput("minilm", layer, text).shape


def test_the_registry_declares_each_source_once() -> None:
    src = pretrained.SOURCES["minilm"]
    assert src.layout == "BTC" and src.uses_text and not src.uses_photo
    assert src.layers() == minilm.LN_LAYERS and src.default_layer() in src.layers()
    assert set(ns.DATA_CHOICES) == set(GENERATORS) | set(pretrained.SOURCES)
    assert not set(GENERATORS) & set(pretrained.SOURCES)
    res = pretrained.build(pretrained.RealInput("minilm", text=TEXT))
    assert res.array.shape == (2, 6, 384) and "each sentence cut to its first 6 tokens" in (
        res.description
    )
    assert res.labels[0] == ("[CLS]", "the", "cat", "sat", ".", "[SEP]")


@pytest.mark.parametrize("path", REAL_PAGES)
def test_a_page_that_takes_a_tensor_runs_on_minilm(path: str) -> None:
    at = run_app(path, {"data": "minilm", "text": TEXT}, timeout=300)
    assert_clean(at)
    assert not at.warning and not at.error, [w.value for w in (*at.warning, *at.error)]
    shape = _minilm_shape()
    assert _real_shape(at) == (
        f"**Shape**: (B, T, C) = {shape}, fixed by {pretrained.SOURCES['minilm'].label}."
    )
    keys = {el.key for el in at.sidebar if getattr(el, "key", None)}
    assert {"layer", "text", "data"} <= keys and not keys & {"layout", "B", "T", "C"}
    note = at.info[0].value
    assert "MiniLM" in note and "the shortest sentence" in note
    assert url_value(at, "data") == "minilm" and url_value(at, "text") == TEXT
    assert url_value(at, "layer") == minilm.DEFAULT_LAYER


def test_axes_runs_on_the_real_tensor() -> None:
    at = run_app("axes", {"data": "minilm", "text": TEXT, "method": "layer"}, timeout=300)
    assert_clean(at)
    assert "Contract card: LayerNorm" in texts(at)
    # the page's own cell inputs follow the real shape (T = 6 tokens, C = 384 features)
    assert at.number_input(key=keys.key("axes", "cell_c")).max == 383
    assert at.number_input(key=keys.key("axes", "cell_t")).max == 5


def test_distributions_shows_the_outlier_dimensions() -> None:
    at = run_app("distributions", {"data": "minilm"}, timeout=300)
    assert_clean(at)
    body = texts(at)
    assert "Feature dimensions: the few that dwarf the rest" in body
    assert "channels dwarf the rest" in body and "99 (RMS" in body  # MiniLM's dimension 99
    assert "**BatchNorm** standardizes each channel on its own" in body
    # generated data without outliers: the section is not there
    plain = run_app("distributions", {"data": "channels"})
    assert "dwarf the rest" not in texts(plain)


def test_changing_layer_and_text_changes_the_tensor() -> None:
    at = run_app("distributions", {"data": "minilm", "text": TEXT}, timeout=300)
    before = at.info[0].value
    at.sidebar.selectbox(key="layer").set_value(minilm.LN_LAYERS[0]).run()
    assert_clean(at)
    assert "Embeddings" in at.info[0].value and at.info[0].value != before
    assert url_value(at, "layer") == minilm.LN_LAYERS[0]
    at.sidebar.text_area(key="text").set_value("One sentence only, rather long.").run()
    assert_clean(at)
    assert (
        f"(B, T, C) = {_minilm_shape('One sentence only, rather long.', minilm.LN_LAYERS[0])}"
        in (_real_shape(at))
    )
    # back to a generator: the size inputs return with their own values
    at.sidebar.selectbox(key="data").set_value("heavy").run()
    assert_clean(at)
    assert at.sidebar.number_input(key="C").value == 8 and not _real_shape(at)
    assert "layer" not in at.query_params and "text" not in at.query_params


def test_a_bad_layer_falls_back_with_a_warning() -> None:
    at = run_app("axes", {"data": "minilm", "layer": "encoder.layer.9.output.LayerNorm"})
    assert_clean(at)
    warned = "\n".join(w.value for w in at.warning)
    assert "`layer=encoder.layer.9.output.LayerNorm` is not a normalization layer" in warned
    assert url_value(at, "layer") == minilm.DEFAULT_LAYER


def test_over_long_text_falls_back_with_a_warning() -> None:
    at = run_app("axes", {"data": "minilm", "text": "word " * 200})
    assert_clean(at)
    warned = "\n".join(w.value for w in at.warning)
    assert "is not valid (value too long: at most 600 characters)" in warned
    assert url_value(at, "text") == minilm.DEFAULT_TEXT


def test_a_text_with_no_sentence_gets_a_clear_message() -> None:
    at = run_app("distributions", {"data": "minilm", "text": "   "}, timeout=300)
    assert_clean(at)
    errors = [e.value for e in at.error]
    assert any("no sentence to run" in e for e in errors), errors
    assert GENERATORS[DEFAULT_GENERATOR].label in errors[0]


@pytest.mark.parametrize("payload", MARKDOWN[:6])
def test_hostile_text_is_shown_inert(payload: str) -> None:
    text = f"Hello there. {payload}"[: minilm.MAX_CHARS]
    at = run_app("distributions", {"data": "minilm", "text": text}, timeout=300)
    assert_clean(at)
    for md in [*(e.value for e in (*at.info, *at.error, *at.warning)), *_expander_md(at)]:
        assert_inert(md)
    assert at.sidebar.text_area(key="text").value == text  # a widget value: never markdown


def _expander_md(at) -> list[str]:
    return [m.value for m in at.markdown if m.value.startswith("b = ")]


def test_tokens_are_listed_as_code() -> None:
    at = run_app("axes", {"data": "minilm", "text": "<script>alert(1)</script>"}, timeout=300)
    md = _expander_md(at)
    assert len(md) == 1 and "`<`" in md[0] and "`script`" in md[0]
    assert_inert(md[0])


@pytest.mark.parametrize("path", [*OTHER_PAGES, ""])
def test_pages_without_the_shared_tensor_do_not_break(path: str) -> None:
    at = run_app(path or None, {"data": "minilm", "text": TEXT}, timeout=300)
    assert_clean(at)
    assert not at.error, [e.value for e in at.error]
    if "data" in controls(path):  # the lab: draws from the default generator, and says so
        assert "draws its data from the" in "\n".join(c.value for c in at.sidebar.caption)
    assert url_value(at, "data") == "minilm"  # kept for the next page


def test_the_real_shape_goes_through_the_element_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    n = 1
    for d in _minilm_shape():
        n *= d
    monkeypatch.setenv("NORMVIZ_MAX_ELEMENTS", str(n - 1))
    at = run_app("axes", {"data": "minilm", "text": TEXT}, timeout=300)
    assert_clean(at)
    errors = "\n".join(e.value for e in at.error)
    assert f"has {n:,} elements, over the app's cap of {n - 1:,}: use fewer or shorter" in (
        unescaped(errors)
    )


@pytest.mark.browser
def test_axes_on_minilm_in_a_browser(page, server) -> None:
    from conftest import open_app

    open_app(page, server, f"axes?data=minilm&method=layer&text={quote(TEXT)}")
    page.get_by_text("Contract card: LayerNorm").wait_for(timeout=180_000)
    wait_done(page)
    assert_no_exception(page)
    shape = _minilm_shape()
    page.get_by_text(f"(B, T, C) = {shape}, fixed by").first.wait_for()
    assert page.get_by_text("MiniLM (all-MiniLM-L6-v2)").count() >= 1


def test_choose_audits_minilm() -> None:
    at = run_app("choose", {"model": "minilm"}, timeout=300)
    assert_clean(at)
    body = texts(at)
    assert "real 6-block post-norm BERT encoder" in body
    tables = [d.value for d in at.table]
    audit = next(t for t in tables if "bert.encoder.layer.5.output.LayerNorm" in t.index)
    assert (audit == "post-norm").to_numpy().sum() == 12


# ---- EfficientNet-Lite0 -------------------------------------------------------------------


@pytest.mark.parametrize("path", REAL_PAGES)
def test_a_page_that_takes_a_tensor_runs_on_efficientnet(path: str) -> None:
    at = run_app(path, {"data": "efficientnet"}, timeout=300)
    assert_clean(at)
    assert not at.warning and not at.error, [w.value for w in (*at.warning, *at.error)]
    assert "(N, C, H, W) = (2, 320, 7, 7), fixed by EfficientNet-Lite0" in _real_shape(at)
    keys = {el.key for el in at.sidebar if getattr(el, "key", None)}
    assert {"layer", "data"} <= keys and not keys & {"layout", "N", "C", "H", "W", "text"}
    assert "EfficientNet-Lite0" in unescaped(at.info[0].value)
    assert "text" not in at.query_params


def test_efficientnet_layer_choice_and_a_bad_layer() -> None:
    at = run_app("distributions", {"data": "efficientnet", "layer": "_bn0"}, timeout=300)
    assert_clean(at)
    assert "(N, C, H, W) = (2, 32, 112, 112)" in _real_shape(at)
    picker = at.sidebar.selectbox(key="layer")  # readable labels; the URL keeps the name
    assert picker.value == "_bn0" and at.query_params["layer"] == "_bn0"
    assert picker.options[0] == "stem BN (32 ch, 112×112)" and len(picker.options) == 49
    assert "block 16 of 16, projection BN (320 ch, 7×7)" in picker.options
    assert "stem BN (32 ch, 112×112) (module _bn0)" in unescaped(at.info[0].value)
    bad = run_app("axes", {"data": "efficientnet", "layer": "_blocks.99._bn2"}, timeout=300)
    assert "is not a normalization layer of EfficientNet" in "\n".join(w.value for w in bad.warning)


@pytest.mark.browser
def test_distributions_on_efficientnet_in_a_browser(page, server) -> None:
    from conftest import open_app

    open_app(page, server, "distributions?data=efficientnet")
    page.get_by_text("fixed by EfficientNet-Lite0").first.wait_for(timeout=180_000)
    wait_done(page)
    assert_no_exception(page)
    assert page.get_by_text("(N, C, H, W) = (2, 320, 7, 7)").count() >= 1


def _png(w: int, h: int) -> bytes:
    rng = np.random.default_rng(0)
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(buf, format="PNG")
    return buf.getvalue()


@pytest.mark.browser
def test_a_photo_upload_in_a_browser(page, server) -> None:
    """The sidebar's photo uploader: a PNG joins the batch (N grows by one); a broken file
    and a PNG declaring too many pixels are refused with a message, the page runs on."""
    from conftest import open_app

    slow = 180_000
    open_app(page, server, "distributions?data=efficientnet")
    page.get_by_text("fixed by EfficientNet-Lite0").first.wait_for(timeout=slow)
    wait_done(page, timeout=slow)
    page.get_by_text("(N, C, H, W) = (2, 320, 7, 7)").first.wait_for()
    uploader = page.locator("[data-testid=stSidebar] input[type=file]")
    cases = [
        ("photo.png", _png(300, 200), "(3, 320, 7, 7)", None),
        ("broken.png", MAGIC["PNG"] + b"\0" * 64, "(2, 320, 7, 7)", "broken or truncated"),
        ("bomb.png", png_bomb(100_000), "(2, 320, 7, 7)", "4096 × 4096"),
    ]
    for name, data, shape, refused in cases:
        uploader.set_input_files(files=[{"name": name, "mimeType": "image/png", "buffer": data}])
        page.get_by_text(f"(N, C, H, W) = {shape}").first.wait_for(timeout=slow)
        wait_done(page, timeout=slow)
        assert_no_exception(page)
        body = page.inner_text("body")
        if refused is None:
            assert "and your photo" in body and "was refused" not in body
        else:
            assert f"{name} was refused:" in body and refused in body
            assert "and your photo" not in body
        assert page.locator(".js-plotly-plot").count() >= 1  # the page still draws
