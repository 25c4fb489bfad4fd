"""The /distributions page: AppTest for every generator and method, uploads, hostile input,
figure budgets at the element cap, and a real browser."""

from __future__ import annotations

import io
import json
from pathlib import Path

import keys
import numpy as np
import pytest
import torch
from conftest import (
    assert_clean,
    assert_no_exception,
    assert_refused,
    open_app,
    plotly_array,
    run_app,
    screenshot,
    texts,
    unescaped,
    url_value,
    wait_done,
)
from signals import assert_within_budget
from streamlit.testing.v1 import AppTest

from normviz import LAYOUTS, METHODS, STANDARD_METHODS, contract, normalize
from normviz.data import GENERATORS, generate, sample_scales
from normviz.distributions.affine import affine_demo, make_affine_figure
from normviz.distributions.all_methods import compare_methods, make_methods_figure
from normviz.distributions.before_after import make_before_after_figure
from normviz.distributions.eps import eps_sweep, make_eps_figure
from normviz.distributions.histograms import histogram
from normviz.distributions.rms_layer import cosine_per_vector, make_cosine_figure
from ui.params import PAGE_PARAMS, fmt, max_elements

PAGE = "distributions"
PARAMS = {p.name: p for p in PAGE_PARAMS[PAGE]}


def charts(at: AppTest) -> list[dict]:
    """The plotly specs the page sent (AppTest cannot draw them, but it has the JSON)."""
    return [json.loads(e.proto.spec) for e in at.get("plotly_chart")]


def chart_titles(at: AppTest) -> list[str]:
    return [c["layout"]["title"]["text"] for c in charts(at)]


def affine_targets(at: AppTest) -> tuple[list[float], list[float]]:
    """The γ_c and β_c the γ/β figure draws, one per channel."""
    fig = next(c for c in charts(at) if c["layout"]["title"]["text"].endswith("with γ and β"))
    lines = {t.get("name"): t for t in fig["data"]}
    return (plotly_array(lines["γ"]["y"]).tolist(), plotly_array(lines["β"]["y"]).tolist())


def eps_note(at: AppTest) -> str:
    """The ε figure's note on ε = 0 (whether its data has constant groups)."""
    fig = next(c for c in charts(at) if "ε shrinks" in c["layout"]["title"]["text"])
    return next(a["text"] for a in fig["layout"]["annotations"] if a["text"].startswith("ε = 0"))


# ---- default view and every option ----------------------------------------------------


def test_default_view() -> None:
    at = run_app(PAGE)
    assert_clean(at)
    assert not at.warning and not at.error
    heads = [h.value for h in at.subheader]
    assert heads[:3] == [
        "Before and after: BatchNorm",
        "What BatchNorm does not control",
        "All five methods on the same input",
    ]
    assert {"γ and β: giving the scale back", "ε: why it is there", "RMSNorm vs LayerNorm"} <= set(
        heads
    )
    titles = chart_titles(at)
    assert titles[0] == "BatchNorm: values before and after"
    assert len(titles) == 5
    # the group table: 8 channels, each with mean 0 and variance ≈ 1 after
    table = at.table[0].value
    assert list(table["C"]) == list(range(8))
    assert (table["mean after"].abs() < 1e-5).all()
    assert ((table["variance after"] - 1).abs() < 1e-3).all()
    assert len(at.get("download_button")) == 2
    body = texts(at)
    assert GENERATORS["channels"].label in body and "seed 0" in body
    # the page's own parameters are in the URL from the first run: a copied link is complete
    for name, p in PARAMS.items():
        assert url_value(at, name) == fmt(p.default), name


METHOD_KEYS = [*STANDARD_METHODS, "custom"]
# every generator with two methods, every method with at least two generators
PAIRS = [
    (g, METHOD_KEYS[(i + k) % len(METHOD_KEYS)]) for i, g in enumerate(GENERATORS) for k in (0, 3)
]


@pytest.mark.parametrize(("data", "method"), PAIRS)
def test_every_generator_and_method(data: str, method: str) -> None:
    query = {"data": data, "method": method}
    if method == "custom":
        query |= {"axes": "B,C", "centred": "0"}
    at = run_app(PAGE, query)
    assert_clean(at)
    assert not at.error, [e.value for e in at.error]
    assert chart_titles(at)[0] == f"{METHODS[method].label}: values before and after"
    assert at.subheader[0].value == f"Before and after: {METHODS[method].label}"


@pytest.mark.parametrize("method", STANDARD_METHODS)
def test_nchw_layout(method: str) -> None:
    at = run_app(PAGE, {"layout": "NCHW", "method": method, "groups": "3", "data": "smooth"})
    assert_clean(at)
    assert not at.error
    table = at.table[0].value
    kept = {"batch": ["C"], "layer": ["N"], "rms": ["N"], "instance": ["N", "C"]}
    assert list(table.columns[: len(kept.get(method, ["N", "G"]))]) == kept.get(method, ["N", "G"])


def test_widgets_rerun_cleanly_and_write_the_url() -> None:
    at = run_app(PAGE)
    at.radio(key=keys.key("distributions", "affine")).set_value("per-channel").run()
    at.slider(key=keys.key("distributions", "gamma")).set_value(3.5).run()
    at.slider(key=keys.key("distributions", "beta")).set_value(-2.0).run()
    assert_clean(at)
    gammas, betas = affine_targets(at)
    assert gammas == pytest.approx(np.linspace(1.75, 5.25, 8))  # 0.5γ … 1.5γ
    assert betas == pytest.approx(np.linspace(-3.0, -1.0, 8))  # β − 1 … β + 1
    assert [url_value(at, n) for n in ("affine", "gamma", "beta")] == ["per-channel", "3.5", "-2"]
    assert "constant group(s) give 0/0" in eps_note(at)
    at.radio(key=keys.key("distributions", "edata")).set_value("current").run()
    assert_clean(at)
    assert eps_note(at) == "ε = 0: no constant group here, so no NaN"
    assert url_value(at, "edata") == "current"


def test_a_link_reproduces_gamma_beta_and_the_eps_data() -> None:
    link = {"affine": "per-channel", "gamma": "0.5", "beta": "2.5", "edata": "current"}
    at = run_app(PAGE, link)
    assert_clean(at)
    assert not at.warning
    assert "Per-channel: γ_c runs from 0.5γ to 1.5γ" in texts(at)
    gammas, betas = affine_targets(at)
    assert gammas == pytest.approx(np.linspace(0.25, 0.75, 8))
    assert betas == pytest.approx(np.linspace(1.5, 3.5, 8))
    assert eps_note(at) == "ε = 0: no constant group here, so no NaN"
    assert {n: url_value(at, n) for n in link} == link  # and it stays in the URL


def test_layernorm_over_chw_shows_torchs_elementwise_gamma() -> None:
    at = run_app(
        PAGE, {"layout": "NCHW", "method": "layer", "affine": "per-element", "groups": "2"}
    )
    assert_clean(at)
    shapes = next(d.value for d in at.table if "γ: .weight.shape" in d.value.columns)
    assert shapes.set_index("method").loc["GroupNorm", "torch module"].startswith("nn.GroupNorm(2,")
    ln = shapes.set_index("method").loc["LayerNorm", "γ: .weight.shape"]
    assert ln.count(",") == 2  # (C, H, W), read off nn.LayerNorm
    assert shapes.set_index("method").loc["BatchNorm", "γ: .weight.shape"].count(",") == 1
    body = texts(at)
    assert f"LayerNorm's γ has torch's shape {ln}" in body and "one per element of a sample" in body
    assert "positions of one channel get different scales" in body


@pytest.mark.parametrize(
    ("query", "named"),
    [
        # every value refused: out of range, wrong type, not a choice
        (
            {"affine": "diagonal", "gamma": "5.5", "beta": "nan", "edata": "zeros"},
            {"affine": "diagonal", "gamma": "5.5", "beta": "nan", "edata": "zeros"},
        ),
        # a link that sets some: bad ones named, the missing ones listed, all at defaults
        ({"gamma": "0", "beta": "abc"}, {"gamma": "0", "beta": "abc"}),
    ],
)
def test_bad_page_parameters_fall_back_with_a_warning(
    query: dict[str, str], named: dict[str, str]
) -> None:
    at = run_app(PAGE, query)
    assert_clean(at)
    assert_refused(at, PAGE, named, query)
    # the view is the default one: scalar γ = 2, β = 1 on every channel, constant ε data
    assert affine_targets(at) == ([2.0] * 8, [1.0] * 8)
    assert "constant group(s) give 0/0" in eps_note(at)


def test_eps_zero_shows_nan_not_a_crash() -> None:
    at = run_app(PAGE, {"data": "constant", "method": "layer", "eps": "0"})
    assert_clean(at)
    title = charts(at)[0]["layout"]["annotations"][1]["text"]
    assert "NaN" in title  # the "after" panel counts the 0/0 values it left out


def test_large_input_demonstrates_on_its_leading_part() -> None:
    """Above DEMO_MAX values the γ/β, ε, RMS and per-sample sections use the first
    samples (every channel), say so, and the sections above still count every value."""
    at = run_app(PAGE, {"B": "64", "T": "256", "C": "128", "data": "sample_scale"})
    assert_clean(at)
    note = next(i.value for i in at.info if "part of the input" in i.value)
    assert "2,097,152 values" in note and "(B, T, C) = (32, 256, 128)" in note
    assert f"{64 * 256 * 128:,}" in texts(at)  # the main histograms: every value
    before = charts(at)[0]
    assert plotly_array(before["data"][0]["y"]).sum() == 64 * 256 * 128
    # the per-sample-scale data was generated at the part's shape: 32 volumes, not 64
    rms = next(d.value for d in at.table if "RMS before" in d.value.columns)["RMS before"]
    scales = sample_scales(32)
    assert rms.iloc[1] / rms.iloc[0] == pytest.approx(scales[1] / scales[0], rel=1e-4)
    small = run_app(PAGE, {"B": "8", "T": "16", "C": "8"})
    assert not any("part of the input" in i.value for i in small.info)


# ---- hostile URLs ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "expect"),
    [
        ({"data": "<script>alert(1)</script>"}, "`data"),
        ({"method": "nope"}, "`method"),
        ({"eps": "nan"}, "`eps"),
        ({"B": "-3"}, "`B"),
        ({"seed": "1e400"}, "`seed"),
        ({"method": "group", "groups": "3"}, "cannot run"),  # 3 does not divide C = 8
        # torch's own refusal: shown as the lesson (an info box), naming the one value
        ({"method": "batch", "B": "1", "T": "1"}, "more than 1 value per channel"),
        ({"method": "custom", "axes": ""}, "`axes"),
        ({"layout": "NCHW", "N": "256", "C": "256", "H": "512", "W": "512"}, "cap"),
    ],
)
def test_hostile_urls(query: dict[str, str], expect: str) -> None:
    at = run_app(PAGE, query)
    assert_clean(at)
    said = "\n".join([w.value for w in (*at.warning, *at.error, *at.info)])
    assert expect in said, said


# ---- uploads --------------------------------------------------------------------------


def _npy(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def _pt(obj: object) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def _upload(at: AppTest, name: str, data: bytes) -> AppTest:
    at.file_uploader(key="dist_upload").set_value((name, data, "application/octet-stream"))
    return at.run()


def test_upload_3d_npy_is_used_as_btc() -> None:
    x = generate("outliers", "BTC", (2, 5, 12), 1).numpy()
    at = _upload(run_app(PAGE), "acts.npy", _npy(x))
    assert_clean(at)
    assert "read as (B, T, C) = (2, 5, 12)" in texts(at)
    table = at.table[0].value  # BatchNorm: one row per channel of the upload
    assert len(table) == 12
    want = x.reshape(-1, 12).mean(0)
    np.testing.assert_allclose(table["mean before"], want, rtol=1e-5, atol=1e-5)


def test_upload_dict_lets_the_user_pick_a_4d_key() -> None:
    w = {"first": torch.randn(3, 4), "maps": torch.randn(2, 6, 4, 4)}
    at = _upload(run_app(PAGE), "acts.pt", _pt(w))
    assert_clean(at)
    assert "read as (B, T, C) = (1, 3, 4)" in texts(at)  # the first key, 2-D
    at.selectbox(key="dist_key").set_value("maps").run()
    assert_clean(at)
    assert "read as (N, C, H, W) = (2, 6, 4, 4)" in texts(at)
    assert list(at.table[0].value["C"]) == list(range(6))


def test_upload_csv_matrix() -> None:
    at = _upload(run_app(PAGE, {"method": "layer"}), "m.csv", b"a,b,c\n1,2,3\n4,5,9\n")
    assert_clean(at)
    assert "read as (B, T, C) = (1, 2, 3)" in texts(at)
    assert len(at.table[0].value) == 2  # one LayerNorm group per token


def test_uploaded_groupnorm_that_cannot_split_c_says_so() -> None:
    at = _upload(
        run_app(PAGE, {"method": "group", "groups": "2"}), "x.npy", _npy(np.ones((2, 3, 5)))
    )
    assert_clean(at)
    assert any("divisible" in e.value for e in at.error)


class _CreatesFile:
    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self) -> tuple:
        return (open, (self.path, "w"))


@pytest.mark.parametrize(
    ("name", "build", "expect"),
    [
        ("evil.pt", lambda p: _pt({"w": _CreatesFile(p)}), "run arbitrary code"),
        ("evil.npy", lambda p: _npy(np.array([_CreatesFile(p)], dtype=object)), "Python objects"),
        ("nan.csv", lambda p: b"1,nan\ninf,2\n", "1 NaN and 1 +inf"),
        ("ragged.csv", lambda p: b"1,2,3\n4\n", "ragged"),
        ("notes.txt", lambda p: b"hello", "unknown file type"),
        ("flat.npy", lambda p: _npy(np.zeros(7)), "1-D"),
        ("empty.pt", lambda p: b"", "empty"),
    ],
)
def test_hostile_uploads_are_refused(name: str, build, expect: str, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    at = _upload(run_app(PAGE), name, build(marker))
    assert_clean(at)
    errors = unescaped("\n".join(e.value for e in at.error))
    assert "was refused" in errors and expect in errors, errors
    assert not marker.exists()
    assert chart_titles(at)[0] == "BatchNorm: values before and after"  # generated input


# ---- figures: pure functions, under budget at the element cap --------------------------


def _cap_shape(layout: str) -> tuple[int, ...]:
    return (64, 256, 256) if layout == "BTC" else (16, 16, 128, 128)


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_every_figure_is_small_at_the_element_cap(layout: str) -> None:
    shape = _cap_shape(layout)
    assert np.prod(shape) == max_elements()
    x = generate("outliers", layout, shape, 0)
    y = normalize(x, "group", layout, groups=4).output
    built = [
        make_before_after_figure(histogram(x), histogram(y), "group"),
        make_methods_figure(compare_methods(x, layout, groups=4)),
        make_affine_figure(
            affine_demo(x, contract("batch", layout, shape), "per-channel", 2.0, 1.0), "batch"
        ),
        make_eps_figure(eps_sweep(x, contract("layer", layout, shape)), 1e-5),
        make_cosine_figure(cosine_per_vector(x, layout)),
    ]
    for fig in built:
        assert_within_budget(fig)
        assert fig.layout.title.text


def test_figure_traces_and_titles() -> None:
    x = generate("constant", "BTC", (4, 6, 8), 0)
    y = normalize(x, "layer", "BTC", eps=0.0).output
    fig = make_before_after_figure(histogram(x), histogram(y), "layer")
    assert [t.type for t in fig.data] == ["bar", "bar"]
    assert sum(fig.data[0].y) == x.numel()
    assert sum(fig.data[1].y) == x.numel() - 48  # the blank sample's 6·8 values are NaN
    assert "48 NaN" in fig.layout.annotations[1].text
    comp = compare_methods(generate("normal", "BTC", (2, 1, 6), 0), "BTC", groups=4)
    fig = make_methods_figure(comp)
    names = [t.name for t in fig.data]
    assert names == ["input", "BatchNorm", "LayerNorm", "RMSNorm"]
    notes = [a.text for a in fig.layout.annotations if a.text.startswith("cannot run")]
    assert len(notes) == 2 and any("divisible" in n for n in notes)
    sweep = eps_sweep(x, contract("layer", "BTC", tuple(x.shape)))
    fig = make_eps_figure(sweep, 1e-5)
    assert fig.layout.xaxis.type == "log"
    assert any("constant group" in (t.name or "") for t in fig.data)
    assert any("48 NaN" in a.text for a in fig.layout.annotations)
    cos = make_cosine_figure(cosine_per_vector(x, "BTC"))
    assert [t.name for t in cos.data] == [
        "LayerNorm, γ = 1",
        "RMSNorm, γ = 1",
        "RMSNorm, random γ",  # a learned γ turns the vector
    ]
    assert sum(cos.data[1].y) == 18  # 24 tokens, 6 of them all-zero
    assert sum(cos.data[2].y) == 18


# ---- the real browser -------------------------------------------------------------------


@pytest.mark.browser
def test_distributions_in_browser(page, server) -> None:
    link = "layout=BTC&B=4&T=6&C=8&method=layer&eps=1e-05&seed=0&data=outliers"
    open_app(page, server, f"{PAGE}?{link}")
    assert page.locator("[data-testid=stAlertContentWarning]").count() == 0
    assert_no_exception(page)
    assert page.get_by_text("Before and after: LayerNorm").count() == 1
    assert page.locator(".js-plotly-plot").count() >= 4
    # the γ/β controls rerun their fragment, which writes the URL (no full rerun)
    page.get_by_text("per-channel", exact=True).click()
    page.wait_for_url("**affine=per-channel**")
    wait_done(page)
    assert_no_exception(page)
    gamma = page.get_by_role("slider", name="γ")  # (exact=True misses this name)
    gamma.focus()
    gamma.press("ArrowRight")
    page.wait_for_url("**gamma=2.1**")
    wait_done(page)
    assert_no_exception(page)
    # upload a tensor through the real widget
    page.get_by_text("Bring your own tensor").click()
    page.locator("input[type=file]").set_input_files(
        files=[
            {
                "name": "maps.npy",
                "mimeType": "application/octet-stream",
                "buffer": _npy(generate("smooth", "NCHW", (2, 6, 8, 8), 0).numpy()),
            }
        ]
    )
    page.get_by_text("read as (N, C, H, W) = (2, 6, 8, 8)").wait_for()
    wait_done(page)
    assert_no_exception(page)
    # a download is built only when clicked (a callable): it must arrive and parse
    button = page.get_by_role("button", name="Statistics table (.csv)")
    button.scroll_into_view_if_needed()
    with page.expect_download() as info:
        button.click()
    table = Path(info.value.path()).read_text()
    assert table.splitlines()[0].startswith("N,count,mean before")  # LayerNorm: one per N
    assert len(table.splitlines()) == 3  # header + 2 samples
    page.locator(".js-plotly-plot").first.scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    screenshot(page, PAGE)


def test_axes_make_room_for_their_tick_labels() -> None:
    """The house template turns on automargin: with apply()'s compact margins, tick
    labels were cut off and axis titles drawn over them without it (seen in Chromium)."""
    x = generate("channels", "BTC", (4, 6, 8), 0)
    fig = make_before_after_figure(histogram(x), histogram(x), "batch")
    spec = json.loads(fig.to_json())
    axes = spec["layout"]["template"]["layout"]
    assert axes["xaxis"]["automargin"] is True and axes["yaxis"]["automargin"] is True
