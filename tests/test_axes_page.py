"""The Axis Explorer page (/axes): AppTest for every setting, and a real browser for clicks."""

from __future__ import annotations

import json
import re
from urllib.parse import parse_qs, urlsplit

import keys
import pytest
from conftest import (
    assert_clean,
    assert_no_exception,
    plotly_array,
    run_app,
    screenshot,
    texts,
    wait_done,
)
from signals import assert_within_budget
from streamlit.testing.v1 import AppTest
from test_axes_figures import thumbnail_panels

from benchmarks.common import app_test
from normviz import LAYOUTS, METHODS, STANDARD_METHODS, axes, style
from normviz.axes import multiples
from ui.params import PAGE_PARAMS, fmt
from ui.runner import ALT_LABEL
from ui.safe import JOINER, md_text

PARAMS = {p.name: p for p in PAGE_PARAMS["axes"]}


def _charts(at) -> list[dict]:
    """The page's Plotly figures as JSON (AppTest cannot click them, but can read them)."""
    out = []
    for c in at.get("plotly_chart"):
        assert_within_budget(c.proto.spec)
        out.append(json.loads(c.proto.spec))
    return out


def _pictures(at) -> list[str]:
    """The HTML of the page's method thumbnails (a still normviz.figures.spec.Picture)."""
    return [h.proto.body for h in at.get("html") if 'class="nv-thumbs"' in h.proto.body]


def _trace(spec: dict, name_start: str) -> dict:
    found = [t for t in spec["data"] if str(t.get("name", "")).startswith(name_start)]
    assert len(found) == 1, [t.get("name") for t in spec["data"]]
    return found[0]


def _count(arr) -> int:
    return len(plotly_array(arr))


def _url(at, name: str) -> str:
    v = at.query_params[name]
    return v[-1] if isinstance(v, list) else v


def _plain(markdown: str) -> str:
    """Text as the reader sees it: the runner escapes every markdown character in a message."""
    return re.sub(r"\\(.)", r"\1", markdown).replace(JOINER, "")


def _query(layout: str, method: str, **extra: str) -> dict[str, str]:
    q = {"layout": layout, "method": method, "eps": "1e-05", "seed": "0", "data": "channels"}
    q |= dict(LAYOUTS[layout].defaults.items())
    q = {k: str(v) for k, v in q.items()}
    if METHODS[method].grouped:
        q["groups"] = "2"
    return q | extra


def run_open(query: dict[str, str] | None = None) -> AppTest:
    """/axes with every folded section's fold open (as a reader who opened them)."""
    at = app_test("axes", query)
    for section in axes.FOLDED:
        at.session_state[f"axes_fold_{section.slug}"] = True
    at.run()
    return at


def test_first_load_leaves_the_folded_sections_closed() -> None:
    """A first load sends the block alone of the page's charts and no code (the
    highlighter's script is not loaded); each fold opened draws its section."""
    at = run_app("axes")
    assert_clean(at)
    assert [c.key for c in at.get("plotly_chart")] == ["axes_block_fig"]
    assert not at.code
    folds = [e for e in at.expander if e.label == axes.FOLD_LABEL]
    assert len(folds) == len(axes.FOLDED)
    shown = {s.label for s in axes.FOLDED}
    assert shown <= {h.value for h in at.subheader}  # each heading and intro stays
    at.session_state["axes_fold_code"] = True
    at.run()
    assert "nn.BatchNorm1d(8, eps=1e-05)" in "\n".join(c.value for c in at.code)
    assert [c.key for c in at.get("plotly_chart")] == ["axes_block_fig"]


def test_default_page() -> None:
    at = run_open()
    assert_clean(at)
    assert not at.error and not at.warning
    block, groups = _charts(at)
    (grid,) = at.get("bidi_component")  # the flat view: the tensor grid (tests/test_tensorgrid.py)
    flat = json.loads(grid.proto.json)
    # BatchNorm on (4, 6, 8): one statistic per feature from B·T = 24 values
    assert _count(_trace(block, "share μ")["x"]) == 24
    assert _count(_trace(block, "other cells")["x"]) == 4 * 6 * 8 - 24
    assert block["layout"]["scene"]["xaxis"]["title"]["text"] == "B (4)"
    assert flat["size"] == [4, 6, 8] and flat["m"] == 24 and len(flat["var"]) == 8
    (thumbs,) = _pictures(at)  # all methods side by side: a still picture
    panels = thumbnail_panels(thumbs)
    assert len(panels) == 5 and all(len(p["paths"]) == 2 for p in panels)
    page = texts(at)
    assert "B=0, T=0, C=0" in page and "m = B·T = 24" in page
    assert "matches torch.nn.BatchNorm1d, max |Δ| = " in page
    assert "nn.BatchNorm1d(8, eps=1e-05)" in page
    # GroupNorm written as a reshape with the sidebar's G = 2, checked live
    assert (
        groups["layout"]["title"]["text"] == "GroupNorm's 2 groups:<br>one μ per sample and group"
    )
    assert "xc.reshape(B, G, C // G, T)" in "\n".join(c.value for c in at.code)
    assert "The hand-written reshape matches torch.nn.GroupNorm" in page
    assert "BatchNorm1d expects (N, C, L)" in page  # the confusion that applies
    card = at.table[0].value
    assert list(card["answer"])[:4] == ["B, T", "C", "8 means and variances", "m = B·T = 24"]
    assert [c.key for c in at.checkbox if c.value] == ["axcb_B", "axcb_T"]
    # every page parameter is in the URL, also the other layout's cell and split_hw,
    # which BTC draws no widget for: a copied link sets them all
    for name, p in PARAMS.items():
        assert _url(at, name) == fmt(p.default), name


@pytest.mark.parametrize(
    ("layout", "method"), [(lay, m) for lay in LAYOUTS for m in STANDARD_METHODS]
)
def test_every_method_and_layout(layout: str, method: str) -> None:
    at = run_open(_query(layout, method))
    assert_clean(at)
    assert not at.error, [e.value for e in at.error]
    assert not at.warning, [w.value for w in at.warning]
    page = texts(at)
    label = METHODS[method].label
    assert f"Contract card: {label}" in page
    assert re.search(r"matches (torch\.nn\.\w+), max \|Δ\| = ", page), page
    assert "\\frac{" in page  # the selected cell's computation with numbers
    block = _charts(at)[0]
    assert block["layout"]["title"]["text"].startswith(label)


@pytest.mark.parametrize(
    ("layout", "axes", "expect"),
    [
        ("BTC", "B,T", "exactly what BatchNorm does"),
        ("BTC", "B,C", "This is BatchNorm1d on an untransposed"),
        ("BTC", "T", "InstanceNorm is LayerNorm over one feature's sequence"),
        ("NCHW", "C", "Channels-last LayerNorm is not GroupNorm(1, C)"),
        ("NCHW", "H,W", "InstanceNorm is LayerNorm over one feature map"),
        ("NCHW", "C,H,W", "exactly what LayerNorm does"),
        ("NCHW", "N,C,H,W", "No standard layer reduces exactly N, C, H, W"),
    ],
)
def test_custom_axes_name_the_method_and_the_confusions(layout: str, axes: str, expect: str):
    at = run_open(_query(layout, "custom", axes=axes, centred="1"))
    assert_clean(at)
    assert expect in texts(at)
    ticked = [c.key.removeprefix("axcb_") for c in at.checkbox if c.value]
    assert ticked == axes.split(",")
    assert "matches torch.mean/var" in texts(at)


def test_custom_uncentred_is_rmsnorm() -> None:
    at = run_open(_query("BTC", "custom", axes="C", centred="0"))
    assert_clean(at)
    assert "exactly what RMSNorm does" in texts(at)


def test_ticking_an_axis_switches_to_custom_axes() -> None:
    at = run_open()
    at.checkbox(key="axcb_C").check().run()
    assert_clean(at)
    assert at.session_state["method"] == "custom"
    assert list(at.session_state["axes"]) == ["B", "T", "C"]
    assert "No standard layer reduces exactly B, T, C" in texts(at)
    assert str(at.query_params["method"]).strip("[]'") == "custom"
    for a in ("B", "T", "C"):  # untick everything: the page says why and keeps the boxes
        at.checkbox(key=f"axcb_{a}").uncheck().run()
    assert_clean(at)
    assert any("at least one axis" in e.value for e in at.error)
    assert len(at.checkbox) == 3
    at.checkbox(key="axcb_C").check().run()
    assert "exactly what LayerNorm does" in texts(at)


def test_selection_inputs_and_clamping() -> None:
    at = run_open()
    at.number_input(key=keys.key("axes", "cell_b")).set_value(3).run()
    at.number_input(key=keys.key("axes", "cell_c")).set_value(7).run()
    assert_clean(at)
    assert "B=3, T=0, C=7" in texts(at)
    assert [_url(at, k) for k in ("cell_b", "cell_t", "cell_c")] == ["3", "0", "7"]
    block = _charts(at)[0]
    sel = plotly_array(_trace(block, "selected cell")["customdata"])
    assert sel.tolist() == [[3, 0, 7]]
    # the shape shrinks below the selection: it is clamped, never out of range
    at.sidebar.number_input(key="B").set_value(2).run()
    at.sidebar.number_input(key="C").set_value(4).run()
    assert_clean(at)
    assert at.number_input(key=keys.key("axes", "cell_b")).value == 1
    assert at.number_input(key=keys.key("axes", "cell_c")).value == 3
    assert "B=1, T=0, C=3" in texts(at)
    assert [_url(at, k) for k in ("cell_b", "cell_c")] == ["1", "3"]
    assert not at.warning  # clamping after a sidebar change is quiet


def test_partition_and_split_views() -> None:
    at = run_open(_query("NCHW", "group", groups="3"))
    at.toggle(key=keys.key("axes", "partition")).set_value(True).run()
    at.toggle(key=keys.key("axes", "split_hw")).set_value(True).run()
    assert_clean(at)
    block = _charts(at)[0]
    assert _trace(block, "12 statistic groups")  # N·G = 4·3
    assert block["layout"]["scene"]["xaxis"]["title"]["text"].startswith("N blocks × W")
    assert block["layout"]["scene"]["zaxis"]["title"]["text"].startswith("H (")
    assert _url(at, "partition") == "1" and _url(at, "split_hw") == "1"
    # to BTC and back: split_hw has no widget under BTC, but the URL and the view keep it
    at.sidebar.radio(key="layout").set_value("BTC").run()
    assert _url(at, "split_hw") == "1" and not at.warning
    at.sidebar.radio(key="layout").set_value("NCHW").run()
    assert_clean(at)
    assert at.toggle(key=keys.key("axes", "split_hw")).value is True
    assert _charts(at)[0]["layout"]["scene"]["xaxis"]["title"]["text"].startswith("N blocks × W")


def test_a_link_reproduces_the_view_and_the_selected_cell() -> None:
    cell = {"cell_n": "3", "cell_c": "5", "cell_h": "2", "cell_w": "1"}
    link = _query("NCHW", "group", groups="3") | {
        **{n: fmt(p.default) for n, p in PARAMS.items()},
        **cell,
        "partition": "1",
        "split_hw": "1",
    }
    at = run_open(link)
    assert_clean(at)
    assert not at.warning, [w.value for w in at.warning]
    block = _charts(at)[0]
    assert _trace(block, "12 statistic groups")  # partition on
    assert block["layout"]["scene"]["xaxis"]["title"]["text"].startswith("N blocks × W")
    sel = plotly_array(_trace(block, "selected cell")["customdata"])
    assert sel.tolist() == [[3, 5, 2, 1]]
    assert "The cell **N=3, C=5, H=2, W=1** takes its statistics from a group" in texts(at)
    assert {n: _url(at, n) for n in link} == link


@pytest.mark.parametrize(
    ("bad", "fallback"),
    [
        # wrong type, out of the parameter's range, not a whole number
        (
            {"partition": "maybe", "split_hw": "2", "cell_b": "-1", "cell_t": "abc"},
            {"partition": False, "split_hw": False, "cell_b": 0, "cell_t": 0},
        ),
        ({"cell_c": "4096", "cell_n": "1.5"}, {"cell_c": 0, "cell_n": 0}),
    ],
)
def test_bad_page_parameters_fall_back_with_a_warning(
    bad: dict[str, str], fallback: dict[str, object]
) -> None:
    at = run_open(_query("BTC", "batch") | bad)
    assert_clean(at)
    warned = "\n".join(w.value for w in at.warning)
    for name, value in bad.items():
        assert f"`{name}={value}` is not valid" in warned, warned
        assert keys.knob(at, "axes", name) == fallback[name]
        assert _url(at, name) == fmt(fallback[name])
    assert "does not set" not in warned  # the parameters it leaves out: defaults, quietly
    assert "The cell **B=0, T=0, C=0** takes its statistics" in texts(at)
    assert not any(t.get("name", "").endswith("statistic groups") for t in _charts(at)[0]["data"])


def test_a_linked_cell_outside_the_tensor_falls_back_with_a_warning() -> None:
    link = {n: fmt(p.default) for n, p in PARAMS.items()}
    link |= _query("BTC", "batch", B="2") | {"cell_b": "2", "cell_t": "5", "cell_c": "8"}
    at = run_open(link)
    assert_clean(at)
    warned = "\n".join(w.value for w in at.warning)
    assert "`cell_b=2` is not valid (B has 2 positions: expected a value from 0 to 1)" in warned
    assert "`cell_c=8` is not valid (C has 8 positions" in warned
    assert "cell_t" not in warned  # T = 6: position 5 exists
    assert "The cell **B=0, T=5, C=0** takes its statistics" in texts(at)
    assert [_url(at, k) for k in ("cell_b", "cell_t", "cell_c")] == ["0", "5", "0"]


@pytest.mark.parametrize(
    ("query", "param"),
    [
        ({"method": "nope"}, "method"),
        ({"layout": "NHWC"}, "layout"),
        ({"B": "-3"}, "B"),
        ({"T": "1e999"}, "T"),
        ({"C": "3.5"}, "C"),
        ({"method": "group", "groups": "zero"}, "groups"),
        ({"method": "custom", "axes": "Q,<b>"}, "axes"),
        ({"eps": "nan"}, "eps"),
        ({"seed": "-1"}, "seed"),
        ({"data": "../../etc/passwd"}, "data"),
        ({"B": "9" * 300}, "B"),
    ],
)
def test_hostile_urls_fall_back_with_a_warning(query: dict[str, str], param: str) -> None:
    at = run_open(query)
    assert_clean(at)
    assert f"`{param}=" in "\n".join(w.value for w in at.warning)
    assert "Contract card" in texts(at)  # the page still draws, at the fallback value


def test_unknown_parameters_are_ignored_with_a_warning() -> None:
    at = run_open({"sel_B": "3", "foo": "1"})  # sel_B: the cell's old widget key
    assert_clean(at)
    assert "Ignored unknown parameter(s): `sel_B`, `foo`" in "\n".join(w.value for w in at.warning)
    assert at.number_input(key=keys.key("axes", "cell_b")).value == 0
    assert "sel_B" not in at.query_params and _url(at, "cell_b") == "0"


def test_element_cap_is_explained() -> None:
    at = run_open({"layout": "BTC", "B": "1024", "T": "4096", "C": "2"})
    assert_clean(at)
    assert any("over the app's cap" in _plain(e.value) for e in at.error)
    assert not at.get("plotly_chart")


def test_largest_allowed_shape_runs_within_budget() -> None:
    at = run_open({"layout": "BTC", "B": "1024", "T": "4096", "C": "1", "method": "layer"})
    assert_clean(at)
    page = texts(at)
    assert "omitted" in "\n".join(
        a.get("text", "") for c in _charts(at)[:1] for a in c["layout"].get("annotations", [])
    )
    (grid,) = at.get("bidi_component")  # the flat view's window, labelled
    assert "omitted" in json.loads(grid.proto.json)["note"]
    # LayerNorm over C = 1: one value per statistic, allowed by torch (output 0)
    assert "matches torch.nn.LayerNorm" in page


@pytest.mark.parametrize(
    ("query", "reason", "hint"),
    [
        (
            {"layout": "BTC", "method": "group", "groups": "3", "C": "8"},
            "C divisible by groups: C=8, groups=3",
            "Try groups in 1, 2, 4, 8",
        ),
        (
            {"layout": "BTC", "method": "batch", "B": "1", "T": "1"},
            "needs more than 1 value per channel",
            "Make B or T larger than 1",
        ),
        (
            {"layout": "NCHW", "method": "batch", "N": "1", "H": "1", "W": "1"},
            "needs more than 1 value per channel",
            "Make N or H or W larger than 1",
        ),
        (
            {"layout": "NCHW", "method": "instance", "H": "1", "W": "1"},
            "needs more than 1 value per instance",
            "Make H or W larger than 1",
        ),
    ],
)
def test_refused_settings_show_reason_and_hint(query: dict, reason: str, hint: str) -> None:
    at = run_open(query)
    assert_clean(at)
    shown = _plain("\n".join(e.value for e in at.error) + "\n".join(i.value for i in at.info))
    assert reason in shown and hint in shown, shown


def test_home_shows_every_methods_thumbnail_for_both_layouts() -> None:
    at = run_app()
    assert_clean(at)
    assert not at.get("plotly_chart")  # the home page loads no chart library
    pictures = _pictures(at)
    assert len(pictures) == len(LAYOUTS)
    for layout, page in zip(LAYOUTS, pictures, strict=True):
        lay = LAYOUTS[layout]
        shape = tuple(lay.defaults[a] for a in lay.axes)
        assert f"{layout} " in page
        panels = thumbnail_panels(page)
        assert [p["title"] for p in panels] == [METHODS[m].label for m in STANDARD_METHODS]
        for m, panel in zip(STANDARD_METHODS, panels, strict=True):
            assert set(panel["paths"]) == {style.MUTED, style.METHOD_COLOURS[m]}
        # its text alternative sits under it, as under every chart
        said = multiples.alt_lines(layout, shape, 2)[1]  # "BatchNorm: the corner cell's…"
        folds = [m.value for e in at.expander if e.label == ALT_LABEL for m in e.markdown]
        assert any(f"- {md_text(said, limit=600)}" in fold for fold in folds), folds


# ---- real browser ------------------------------------------------------------------


def _open(page, server: str, path: str) -> None:
    """open_app with room for a fresh server's first, uncached run on a busy machine."""
    page.goto(f"{server}/{path}")
    wait_done(page, timeout=180_000)


@pytest.mark.browser
def test_axes_in_browser_click_selects_a_cell(page, server) -> None:
    # a fresh server's first visit to /axes must still go through app.py (sidebar, URL)
    _open(page, server, "axes?layout=BTC&B=4&T=6&C=8&method=layer")
    # a fresh server reroutes the first visit through app.py: wait for the page itself
    page.get_by_text("Contract card: LayerNorm").wait_for(timeout=120_000)
    wait_done(page)
    assert_no_exception(page)
    assert page.get_by_text("B=0, T=0, C=0").count() >= 1
    screenshot(page, "axes")
    # the flat view is the tensor grid: one cell per gridcell, row-major
    page.locator(".st-key-axes_flat_view [role=gridcell]").nth((1 * 6 + 3) * 8 + 5).click()
    wait_done(page)
    page.get_by_text("B=1, T=3, C=5").first.wait_for(timeout=30_000)
    assert_no_exception(page)
    values = [page.get_by_label(f"{a} (").first.input_value() for a in ("B", "T", "C")]
    assert values == ["1", "3", "5"]
    # the click reran the explorer fragment alone, which wrote the cell to the URL
    cell = {"cell_b": ["1"], "cell_t": ["3"], "cell_c": ["5"]}
    page.wait_for_url(lambda url: cell.items() <= parse_qs(urlsplit(url).query).items())
    screenshot(page, "axes-clicked")


@pytest.mark.browser
def test_axes_nchw_partition_in_browser(page, server) -> None:
    _open(page, server, "axes?layout=NCHW&N=2&C=6&H=4&W=4&method=group&groups=3")
    page.get_by_text("Contract card: GroupNorm").wait_for(timeout=120_000)
    wait_done(page)
    assert_no_exception(page)
    page.get_by_text("Colour every statistic group").click()
    page.wait_for_url("**partition=1**")  # written from inside the explorer fragment
    wait_done(page)
    page.get_by_text("Show H and W separately").click()
    wait_done(page)
    assert_no_exception(page)
    assert page.get_by_text("statistic groups").count() >= 1
    screenshot(page, "axes-nchw-partition")
