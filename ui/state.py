"""Shared settings: the sidebar, st.session_state and the URL, kept in sync.

The URL is read once, on a session's first run, into st.session_state under the
URL names (which are also the widget keys); from then on the widgets own the
values and every run writes them back to the query string, so a copied link
reproduces the view. Pages call `settings()` for the shared values,
`page_params()` + `widget()` for their own.

Widget callbacks (on_click, on_change) run before app.py draws the sidebar: pass
them what they need as arguments rather than calling `settings()` inside them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import streamlit as st
import torch
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

from normviz import LAYOUTS, METHODS, NormConfigError
from normviz.data import generate
from ui import params as ns
from ui import realdata, route
from ui.pages import controls
from ui.uploads import ByteLRU

PRESENT = "present"  # presenter mode: the URL name and the widget key
PRESENT_HELP = (
    "Larger text, tables, formulas and figures for a projector, and the sidebar folded "
    "away. A copied link keeps it (present=1)."
)
_KEPT = ("layout", "method", "groups", "axes", "centred", "eps", "seed", "data", "layer", "text")
_WARN = "_url_warnings"  # list of (text, settings-snapshot) shown until the view changes
_SETTINGS = "_settings"  # the sidebar's values (the URL's)
_INPUT = "_input_settings"  # what the page runs on (a real source's shape; see ui.realdata)


def _query() -> dict[str, list[str]]:
    return {k: st.query_params.get_all(k) for k in st.query_params}


def init_from_url(page: str) -> None:
    """On a session's first run, seed every shared widget key from the query string.

    Widget values the browser sent with that first run win over the URL (`sent_values`):
    after the process serving a student dies, the student's next click reaches another
    process as a new session's first run, carrying the view's widget values, the changed
    one included. A page's own values go into the query string its `page_params` reads.
    """
    if st.session_state.get("_seeded"):
        return
    st.session_state["_seeded"] = True
    page_names = [p.name for p in ns.PAGE_PARAMS.get(page, ())]
    query = _query()
    sent = sent_values(page)
    if sent:
        query = {**query, **{k: [v] for k, v in sent.items()}}
        if any(k in page_names for k in sent):
            st.query_params.from_dict(query)
    s, warnings = ns.settings_from_query(query, page_names)
    _seed_settings(s)
    st.session_state[_WARN] = [(w, s) for w in warnings]


def _seed_settings(s: ns.Settings) -> None:
    st.session_state.update(
        layout=s.layout,
        method=s.method,
        groups=s.groups,
        axes=list(s.axes),
        centred=s.centred,
        eps=s.eps,
        seed=s.seed,
        data=s.data,
        layer=s.layer,
        text=s.text,
        **s.sizes,
    )


def _ensure(key: str, default: Any) -> None:
    if key not in st.session_state:
        st.session_state[key] = default


def _seed_view() -> list[str]:
    """Presenter mode from the link, on the session's first run; warnings for a bad value."""
    vals, warnings = ns.read(_query(), [ns.SHARED[PRESENT]])
    st.session_state[PRESENT] = vals[PRESENT]
    return warnings


def _keep_alive(keys: tuple[str, ...], defaults: dict[str, Any]) -> None:
    """Store shared values again before their widgets: a widget that is not drawn in a run
    (hidden on this page, or drawn only for some methods) loses its state after the run;
    stored again, the value stays in the session and the URL, and the next page that shows
    the widget finds it."""
    for key in keys:
        st.session_state[key] = st.session_state.get(key, defaults[key])


def _tensor(sb: Any, shown: set[str]) -> str:
    """Layout and sizes (those the page uses); the layout. A real source fixes both: its
    shape is shown instead (`_real_shape`), the inputs keep their values for later."""
    layout = st.session_state["layout"]
    if shown & {"layout", "batch", "sample"}:
        sb.header("Tensor")
    fixed = realdata.REAL in shown and st.session_state["data"] in realdata.SOURCES
    if fixed:
        shown = shown - {"layout", "batch", "sample"}
        layout = realdata.SOURCES[st.session_state["data"]].layout
    if "layout" in shown:
        layout = sb.radio(
            "Layout",
            list(LAYOUTS),
            key="layout",
            horizontal=True,
            help="BTC: B sequences × T tokens × C features. NCHW: N images × C channels × H × W.",
        )
    lay = LAYOUTS[layout]
    _keep_alive(lay.axes, lay.defaults)  # after the layout radio: it may have just changed
    sized = [a for i, a in enumerate(lay.axes) if ("sample", "batch")[i == 0] in shown]
    for col, a in zip(sb.columns(len(sized)) if sized else (), sized, strict=True):
        col.number_input(
            a, min_value=1, max_value=ns.SIZE_LIMITS[a], step=1, key=a, help=f"{a}: {lay.names[a]}"
        )
    return layout


def _method(sb: Any, shown: set[str], layout: str) -> str:
    """Method, G, custom axes and ε (those the page uses); the method."""
    method = st.session_state["method"]
    if shown & {"method", "groups", "eps"}:
        sb.header("Method")
    if "method" in shown:
        method = sb.selectbox(
            "Normalization", list(METHODS), key="method", format_func=lambda k: METHODS[k].label
        )
    if "groups" in shown or ("method" in shown and METHODS[method].grouped):
        sb.number_input("Groups G", min_value=1, max_value=4096, step=1, key="groups")
    if "method" in shown and method == "custom":
        axes = LAYOUTS[layout].axes
        # the saved selection may name axes of the other layout
        st.session_state["axes"] = [a for a in st.session_state.get("axes", []) if a in axes]
        sb.pills("Reduce over", list(axes), selection_mode="multi", key="axes")
        sb.toggle("Subtract the mean", key="centred", help="off: divide by the RMS only")
    if "eps" in shown:
        sb.select_slider(
            "ε (added to σ²)",
            options=list(ns.EPS_CHOICES),
            key="eps",
            format_func=lambda v: "0" if v == 0 else f"{v:.0e}",
        )
    return method


def _input(sb: Any, shown: set[str], page: str) -> None:
    """Data generator and seed (those the page uses)."""
    if shown & {"data", "seed"}:
        sb.header("Input")
    if "data" in shown:
        sb.selectbox(
            "Data",
            list(ns.DATA_CHOICES),
            key="data",
            format_func=realdata.data_label,
            help=realdata.data_help(),
        )
        realdata.controls_for(sb, page)
    if "seed" in shown:
        sb.number_input("Seed", min_value=0, max_value=2**31 - 1, step=1, key="seed")


def sidebar(page: str) -> ns.Settings:
    """Draw the shared settings this page uses (`ui.pages.controls`) in the sidebar, and
    presenter mode; return every shared setting (drawn or not) for the URL."""
    init_from_url(page)
    view_warnings = _seed_view() if PRESENT not in st.session_state else []
    shown, sb = set(controls(page)), st.sidebar
    _keep_alive((*_KEPT, PRESENT), {k: ns.SHARED[k].default for k in (*_KEPT, PRESENT)})
    if isinstance(st.session_state["axes"], str):
        st.session_state["axes"] = [a for a in st.session_state["axes"].split(",") if a]
    layout = _tensor(sb, shown)
    placeholder = sb.empty()  # a real source's shape, once the page's input is known
    method = _method(sb, shown, layout)
    _input(sb, shown, page)
    if shown:
        sb.divider()
    sb.toggle("Presenter mode", key=PRESENT, help=PRESENT_HELP)
    lay = LAYOUTS[layout]
    s = ns.Settings(
        layout=layout,
        sizes={a: int(st.session_state[a]) for a in lay.axes},
        method=method,
        groups=int(st.session_state["groups"]),
        axes=tuple(a for a in lay.axes if a in (st.session_state.get("axes") or [])),
        centred=bool(st.session_state["centred"]),
        eps=float(st.session_state["eps"]),
        seed=int(st.session_state["seed"]),
        data=st.session_state["data"],
        layer=st.session_state["layer"] if st.session_state["data"] in realdata.SOURCES else "",
        text=str(st.session_state["text"]),
    )
    st.session_state[_SETTINGS] = s
    st.session_state[_INPUT] = run = realdata.effective(s, page)
    if run.real and realdata.REAL in shown:
        realdata.shape_caption(placeholder, run)
    st.session_state[_WARN] = st.session_state.get(_WARN, []) + [(w, s) for w in view_warnings]
    return s


def link_presenter() -> bool:
    """Presenter mode as this run will have it (before any widget: app.py asks it for the
    page config): the session's value, or on a first visit the link's `present`."""
    if PRESENT in st.session_state:
        return bool(st.session_state[PRESENT])
    try:
        return bool(ns.parse(ns.SHARED[PRESENT], st.query_params.get(PRESENT, "0")))
    except ValueError:
        return False


def write_url(page: str) -> None:
    """Write this run's view to the query string: once, and only when it changed.

    Each change to st.query_params sends the whole query string to the browser, so a
    link of 999 unknown parameters deleted one by one sent it 999 times (42 MB). Here
    the shared settings, then this page's parameters (their values at the end of the
    run, widgets included), replace the query string in one message. app.py calls it
    after the page ran (and `widget` during a fragment's own rerun, which runs
    neither app.py nor the rest of the page); pages set st.session_state, never
    st.query_params.
    """
    s = st.session_state.get(_SETTINGS)
    if s is None:
        return
    want: dict[str, str] = {
        "layout": s.layout,
        **{a: str(v) for a, v in s.sizes.items()},
        "method": s.method,
        "groups": str(s.groups),
        "axes": ",".join(s.axes),
        "centred": ns.fmt(s.centred),
        "eps": ns.fmt(s.eps),
        "seed": str(s.seed),
        "data": s.data,
    }
    if s.real:
        want["layer"] = s.layer
        if realdata.SOURCES[s.data].uses_text:
            want["text"] = s.text
    if presenter():
        want[PRESENT] = "1"
    current = _query()
    for p in ns.PAGE_PARAMS.get(page, ()):
        if p.name in st.session_state:
            value = ns.fmt(st.session_state[p.name])
            if value or p.default != "":  # an empty free text (no class code) is left out
                want[p.name] = value
        elif current.get(p.name):  # not read this run (the page stopped early): kept
            want[p.name] = current[p.name][-1]
    if current != {k: [v] for k, v in want.items()}:
        st.query_params.from_dict(want)


@contextmanager
def url_written(page: str) -> Iterator[None]:
    """Run the block (the sidebar and the page), then `write_url(page)`: also when it
    failed, not when Streamlit ended it early (st.rerun, st.switch_page, st.stop, a newer
    click: its script-control exceptions are BaseExceptions, not Exceptions; the next run
    writes the URL of the view it shows). Pages therefore never call st.stop."""
    try:
        yield
    except Exception:
        write_url(page)
        raise
    write_url(page)


def show_warnings() -> None:
    """Warnings about rejected URL values, shown until the user changes the view."""
    current = st.session_state.get(_SETTINGS)
    kept = [(w, snap) for w, snap in st.session_state.get(_WARN, []) if snap == current]
    st.session_state[_WARN] = kept
    for w, _ in kept:
        st.warning(w, icon=":material/warning:")


def settings() -> ns.Settings:
    """The shared settings of this run (the sidebar has been drawn by app.py)."""
    s = st.session_state.get(_INPUT)
    return s if s is not None else ns.Settings()


def real_input(s: ns.Settings) -> realdata.Real | None:
    """The real input the page's settings name (`settings()`), or None: generated data."""
    return realdata.real_input(s)


def presenter() -> bool:
    """Is presenter mode on (larger everything; `present=1` in the URL)?"""
    return bool(st.session_state.get(PRESENT, False))


def require(s: ns.Settings, method: str | None = None) -> bool:
    """Show why a setting cannot run (cap, groups, ...) and return False; True if it can."""
    try:
        s.check(method)
    except NormConfigError as e:
        st.error(f"**This setting cannot run:** {e}.", icon=":material/block:")
        return False
    return True


# Generated inputs kept for reruns, by bytes: a few cap-sized ones (16 MB each) or
# thousands of classroom-sized ones. Past that they are regenerated (seeded, cheap).
INPUTS_BYTES = 64 * 2**20
_INPUTS = ByteLRU(INPUTS_BYTES, size=lambda a: a.nbytes + 1024)


def input_tensor(s: ns.Settings) -> torch.Tensor:
    """The input for the shared settings: seeded (cached on the plain settings, sized by
    bytes) or a real source's (ui.realdata's cache); each call gets its own copy, so no
    caller can change another's input."""
    real = realdata.real_input(s)
    if real is not None:
        return real.tensor()
    key = (s.data, s.layout, s.shape, s.seed)
    arr = _INPUTS.get(key)
    if arr is None:
        arr = generate(*key).numpy()
        _INPUTS.put(key, arr)
    return torch.from_numpy(arr.copy())


# ---- page-specific URL parameters ------------------------------------------------


def page_params(page: str) -> dict[str, Any]:
    """This page's own widget values: seeded from the URL on first use (with a warning
    for each value that fell back), kept alive, and written to the URL at the end of
    every run (`write_url`)."""
    params = ns.PAGE_PARAMS.get(page, ())
    missing = [p for p in params if p.name not in st.session_state]
    if missing:
        # a direct link carries them; a link that leaves some out, or a page switch (the URL
        # has none), gives the defaults quietly
        query = _query()
        vals, warnings = ns.read(query, missing)
        for k, v in vals.items():
            st.session_state[k] = v
        for w in warnings:
            st.warning(w, icon=":material/warning:")
    for p in params:
        # Keep every value alive (a widget that is not drawn in a run, in a closed tab
        # or for the other layout, loses its value) and so in the URL: a copied link
        # then sets all of the page's parameters, as the link reader expects of a link.
        st.session_state[p.name] = st.session_state[p.name]
    return {p.name: st.session_state[p.name] for p in params}


def widget(fn: Callable[..., Any], name: str, label: str, page: str, **kwargs: Any) -> Any:
    """A widget for page parameter `name` whose value also lives in the URL: written at
    the end of the run with the others, or at once in a fragment's own rerun."""
    p = next(p for p in ns.PAGE_PARAMS[page] if p.name == name)
    if p.choices is not None:
        kwargs.setdefault("options", list(p.choices))
    else:
        if p.lo is not None:
            kwargs.setdefault("min_value", type(p.default)(p.lo))
        if p.hi is not None:
            kwargs.setdefault("max_value", type(p.default)(p.hi))
    value = fn(label, key=name, **kwargs)
    if not route.full_run():  # a fragment's own rerun: app.py's end-of-run write will not come
        write_url(page)  # one message, and only if a value changed
    return value


# ---- widget values sent with a session's first run -----------------------------------


def _sent_states() -> dict[str, Any]:
    """{widget key: WidgetState proto} the browser sent with this run, not yet read.

    Streamlit keeps them serialized (keyed by widget id) until the widget is drawn;
    reaching them needs its session state's internals (the `_state` of the run's
    SafeSessionState). Empty when the layout differs (any other Streamlit version).
    """
    from streamlit.runtime.state.common import is_element_id, user_key_from_element_id
    from streamlit.runtime.state.session_state import Serialized

    ctx = get_script_run_ctx()
    inner = getattr(getattr(ctx, "session_state", None), "_state", None)
    states = getattr(getattr(inner, "_new_widget_state", None), "states", None)
    out: dict[str, Any] = {}
    for wid, state in dict(states or {}).items():
        key = user_key_from_element_id(wid) if is_element_id(wid) else None
        if key and isinstance(state, Serialized):
            out[key] = state.value
    return out


def _labels(page: str, knob: ns.Param) -> Callable[[Any], set[str]]:
    """Every string a widget of `knob` may send for choice c: the value as the URL writes
    it, and the label the widget shows (the topic's `choice_label`, METHODS', ...)."""
    import contextlib
    import importlib

    from ui.pages import PAGES

    topic = next((p.topic for p in PAGES if p.path == page), None)
    label = getattr(importlib.import_module(topic), "choice_label", None) if topic else None

    def forms(c: Any) -> set[str]:
        out = {str(c), ns.fmt(c)}
        if isinstance(c, float):
            out |= {"0"} if c == 0 else {f"{c:.0e}"}
        if knob.name == "method" and c in METHODS:
            out.add(METHODS[c].label)
        if knob.name == "data" and c in ns.DATA_CHOICES:
            out.add(realdata.data_label(c))
        if label is not None:
            with contextlib.suppress(Exception):  # a label function for other knobs
                out.add(str(label(knob.name, c)))
        return out

    return forms


def _decode(page: str, knob: ns.Param, proto: Any) -> str | None:
    """The URL form of a sent widget value for `knob`, or None if it cannot be read."""
    kind = proto.WhichOneof("value")
    if kind in ("double_value", "int_value"):
        v = getattr(proto, kind)
        return ns.fmt(int(v) if isinstance(knob.default, int) else float(v))
    if kind == "bool_value":
        return ns.fmt(bool(proto.bool_value))
    if kind == "double_array_value" and len(proto.double_array_value.data) == 1:
        v = proto.double_array_value.data[0]
        return ns.fmt(int(v) if isinstance(knob.default, int) else float(v))
    if kind == "string_value":
        sent = [proto.string_value]
    elif kind == "string_array_value":
        sent = list(proto.string_array_value.data)
    else:
        return None
    if knob.choices is None:  # the custom axes: the pills send the axis letters
        return ",".join(sent)
    forms = _labels(page, knob)
    picked = [c for text in sent for c in knob.choices if text in forms(c)]
    if len(picked) != len(sent) or (len(picked) > 1 and not knob.multi):
        return None
    return ",".join(ns.fmt(c) for c in picked) if knob.multi else ns.fmt(picked[0])


def sent_values(page: str) -> dict[str, str]:
    """The shared and `page` settings whose widget values the browser sent with this run,
    in their URL form (a new session's first run carries them after a process change)."""
    states = _sent_states()
    if not states:
        return {}
    knobs = {**ns.SHARED, **{p.name: p for p in ns.PAGE_PARAMS.get(page, ())}}
    out = {}
    for key, proto in states.items():
        if key in knobs and (value := _decode(page, knobs[key], proto)) is not None:
            out[key] = value
    return out
