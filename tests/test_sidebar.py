"""A sidebar per page: each page draws only the shared settings it uses, and every control
it draws changes the page (AppTest: the main area's elements before and after differ).

Hidden settings stay alive: in the session and in the URL, so the next page finds them.
"""

from __future__ import annotations

from typing import Any

import keys
import pytest
from conftest import assert_clean, run_app, url_value

from benchmarks.common import app_test, page_ids, url_path
from normviz import LAYOUTS
from ui.pages import CONTROLS, controls

# A link per page that makes each of its controls matter (the BatchNorm lab's G is used
# by its Shift tab).
# /axes reads G in every method side by side (a still picture, always drawn); GroupNorm as
# a reshape is drawn only once its fold is opened (normviz.axes.FOLDED): a GroupNorm view
QUERY: dict[str, dict[str, str]] = {"batchnorm": {"sim": "shift"}, "axes": {"method": "group"}}
# A new value for each control: (widget kind, key, value)
CHANGES: dict[str, list[tuple[str, str, Any]]] = {
    "layout": [("radio", "layout", "NCHW")],
    "batch": [("number_input", "B", 3)],
    "sample": [("number_input", "T", 5), ("number_input", "C", 4)],
    "method": [("selectbox", "method", "layer")],
    "groups": [("number_input", "groups", 4)],
    "eps": [("select_slider", "eps", 1e-3)],
    "data": [("selectbox", "data", "heavy")],
    "seed": [("number_input", "seed", 1)],
    "real": [],  # drawn only with a real data source: tests/test_realdata_pages.py
}
PRESENT = ("toggle", "present", True)


def _output(at) -> list[tuple[str, bytes]]:
    """Everything the page drew outside the sidebar, element by element (figure specs,
    tables, text, widget states), plus the page's CSS."""
    out = []
    for root in at._tree.children.values():  # main, sidebar, events (the CSS), bottom
        if root is at.sidebar:
            continue
        for el in root:
            if getattr(el, "proto", None) is not None:
                out.append((type(el).__name__, el.proto.SerializeToString(deterministic=True)))
    return out


def _sidebar_keys(at) -> set[str]:
    return {el.key for el in at.sidebar if getattr(el, "key", None)}


def _expected_keys(page: str, method: str = "batch") -> set[str]:
    shown = controls(url_path(page))
    keys = {"present"}
    for name in shown:
        keys |= {k for _, k, _ in CHANGES[name]}
    if "method" in shown and method == "custom":
        keys |= {"axes", "centred"}
    if "method" in shown and method == "group":
        keys.add("groups")
    return keys


def _change(at, kind: str, key: str, value: Any):
    getattr(at.sidebar, kind)(key=key).set_value(value).run()
    return at


@pytest.mark.parametrize("page", page_ids())
def test_sidebar_holds_only_what_the_page_uses(page: str) -> None:
    path = url_path(page)
    at = run_app(path or None, query=QUERY.get(path))
    assert_clean(at)
    assert _sidebar_keys(at) == _expected_keys(page)
    for name in controls(path):
        for kind, key, value in CHANGES[name]:
            at = run_app(path or None, query=QUERY.get(path))
            before = _output(at)
            _change(at, kind, key, value)
            assert_clean(at)
            assert _output(at) != before, f"/{path}: {key} = {value!r} changed nothing"
    at = run_app(path or None, query=QUERY.get(path))
    before = _output(at)
    _change(at, *PRESENT)
    assert _output(at) != before, f"/{path}: presenter mode changed nothing"
    assert url_value(at, "present") == "1"


@pytest.mark.parametrize("page", [p for p in page_ids() if "method" in controls(url_path(p))])
def test_method_options_appear_with_their_method(page: str) -> None:
    """G for GroupNorm, the axes and centring for custom: drawn with their method, and each
    changes the page."""
    at = run_app(page, query={"method": "group"})
    assert _sidebar_keys(at) == _expected_keys(page, "group")
    at = run_app(page, query={"method": "custom", "axes": "C"})
    assert _sidebar_keys(at) == _expected_keys(page, "custom")
    before = _output(at)
    at.sidebar.button_group(key="axes").set_value(["T", "C"]).run()
    assert_clean(at)
    assert _output(at) != before
    before = _output(at)
    at.sidebar.toggle(key="centred").set_value(False).run()
    assert_clean(at)
    assert _output(at) != before


def test_hidden_settings_stay_alive_across_pages() -> None:
    """Set on the Axis Explorer, kept through pages that hide them, and still in the URL."""
    at = run_app("axes", query={"layout": "NCHW", "N": "3", "method": "group", "groups": "3"})
    at.sidebar.number_input(key="seed").set_value(7).run()
    at.sidebar.select_slider(key="eps").set_value(1e-3).run()
    for page in ("residual", "batchnorm", "choose", "distributions"):
        at.switch_page(f"../pages/{page}.py").run()  # (run_app: benchmarks/apptest_entry.py)
        assert_clean(at)
        for k, v in {"layout": "NCHW", "N": "3", "method": "group", "groups": "3"}.items():
            assert url_value(at, k) == v, (page, k)
        assert url_value(at, "seed") == "7" and url_value(at, "eps") == "0.001"
    assert at.sidebar.number_input(key="N").value == 3
    assert at.sidebar.selectbox(key="method").value == "group"
    assert at.sidebar.number_input(key="seed").value == 7


def test_controls_are_declared_with_known_names() -> None:
    from ui.pages import PAGES

    for info in PAGES:
        assert set(info.controls) <= set(CONTROLS), info.path
        # drawn in the sidebar's order
        assert list(info.controls) == [c for c in CONTROLS if c in info.controls], info.path
    assert set(LAYOUTS["BTC"].axes) == {"B", "T", "C"}


def test_values_outlive_a_page_that_does_not_draw_them() -> None:
    """persist_state: a value set on one page is there again after a page without its
    widget (the residual page draws no shared control), in the widget and the URL; a
    page knob's value too."""
    from benchmarks.common import app_test
    from normviz.pretrained import minilm

    at = app_test("axes", {"data": "minilm", "method": "layer"}, timeout=300)
    at.run()
    at.sidebar.selectbox(key="layer").set_value(minilm.LN_LAYERS[0]).run()
    at.sidebar.number_input(key="seed").set_value(9).run()
    at.toggle(key=keys.key("axes", "partition")).set_value(True).run()
    at.switch_page("../pages/residual.py").run()
    assert_clean(at)
    assert not at.sidebar.number_input  # nothing drawn there ...
    assert url_value(at, "seed") == "9" and url_value(at, "layer") == minilm.LN_LAYERS[0]
    at.switch_page("../pages/axes.py").run()
    assert_clean(at)
    assert at.sidebar.selectbox(key="layer").value == minilm.LN_LAYERS[0]
    assert at.sidebar.number_input(key="seed").value == 9
    assert at.toggle(key=keys.key("axes", "partition")).value is True
    assert url_value(at, "partition") == "1"


def test_a_link_with_minilms_epsilon_keeps_it() -> None:
    """ε = 1e-12 (MiniLM's layer_norm_eps) was shown and used as 0: Streamlit matches a
    float value to a float option within 5e-12. Found by the query-string fuzz."""
    at = app_test("axes", {"eps": "1e-12", "seed": "x"})
    at.run()
    assert at.sidebar.select_slider(key="eps").value == 1e-12
    assert at.session_state["_settings"].eps == 1e-12 and url_value(at, "eps") == "1e-12"
    assert any("`seed=x`" in w.value for w in at.warning)  # the view is the link's
    at.sidebar.select_slider(key="eps").set_value(0.0).run()
    assert at.session_state["_settings"].eps == 0.0 and url_value(at, "eps") == "0"
