"""Shared settings: the sidebar, st.session_state and the URL, kept in sync.

The URL is read once, on a session's first run (and a page's own parameters on
the page's first run), into the link's values (`LINK`, never a widget key). Every
widget is drawn with its session key (a shared setting's is its URL name, a page
knob's is page-scoped, `key(page, name)`: a knob name need be unique only on its
page) and the link's value as its default until the session holds a value for it:
so a value the browser sent with a run wins over the link, as Streamlit gives a
widget's own state priority over its default (after the process serving a student
dies, the student's next click reaches another process as a new session's first run,
carrying the view's widget values, the changed one included). Widgets keep their
values while hidden, on this page or another (`persist_state="session"`); every run
writes the view back to the query string, so a copied link reproduces it. The
sidebar (ui.sidebar) draws the shared settings; pages call `settings()` for them,
`page_params()` + `widget()` for their own, `value(key(page, name))` for a knob
whose widget is not drawn yet.

Widget callbacks (on_click, on_change) run before app.py draws the sidebar: pass
them what they need as arguments rather than calling `settings()` inside them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import streamlit as st
import torch

from normviz import LAYOUTS, NormConfigError
from normviz.data import generate
from ui import params as ns
from ui import realdata, route
from ui.uploads import ByteLRU

PRESENT = "present"  # presenter mode: the URL name and the widget key
LINK = "_link_values"  # {session key: value} the link gave (URL, read once per knob)
SEP = ":"  # a page knob's session key: "<page>:<name>" (`key`)
_WARN = "_url_warnings"  # list of (text, settings-snapshot) shown until the view changes
_SETTINGS = "_settings"  # the sidebar's values (the URL's)
_WROTE = "_url_written"  # (page, the query string last written, the values it came from)
_INPUT = "_input_settings"  # what the page runs on (a real source's shape; see ui.realdata)
KEEP = "session"  # persist_state of every knob's widget: its value outlives its absence
# the keyword that sets a widget's default value, by widget (the others take `value`)
_DEFAULT_KW = {"radio": "index", "selectbox": "index", "pills": "default"}


def _query() -> dict[str, list[str]]:
    return {k: st.query_params.get_all(k) for k in st.query_params}


def key(page: str, name: str) -> str:
    """The widget and session key of page `page`'s knob `name` (its URL name stays
    `name`): page-scoped, so two pages may each have a knob of one name. A shared
    setting's key is its bare URL name."""
    return f"{page}{SEP}{name}"


def knob_of(k: str) -> tuple[str | None, str]:
    """The inverse of `key`: (page, URL name) of a session key; (None, name) for a shared
    setting's."""
    page, sep, name = k.rpartition(SEP)
    return (page, name) if sep else (None, k)


def _default(k: str) -> Any:
    page, name = knob_of(k)
    if page is None:
        p = ns.shared_knobs().get(name)
    else:
        p = next((q for q in ns.PAGE_PARAMS.get(page, ()) if q.name == name), None)
    return None if p is None else p.default


def value(k: str) -> Any:
    """A knob's value now, by its session key (`key(page, name)`, or a shared setting's
    name): the session's (its widget's), else the link's, else its default (a
    multi-choice knob's as a tuple)."""
    try:
        v = st.session_state[k]
    except KeyError:  # not set yet, or a value the browser sent for a widget not drawn yet
        v = st.session_state.get(LINK, {}).get(k, _default(k))
    return tuple(v) if isinstance(v, list) else v  # a multi-choice widget's list: a tuple


def known(k: str) -> bool:
    """Does the session or the link hold a value for the knob of session key `k`?"""
    return k in st.session_state or k in st.session_state.get(LINK, {})


def initial(fn: Callable[..., Any], k: str, options: list[Any] | None = None) -> dict:
    """The default-value keyword for `fn`'s widget of session key `k`: the link's value
    while the session holds none (a browser-sent value then wins), else nothing (the
    session's)."""
    if k in st.session_state:
        return {}
    v = value(k)
    kw = _DEFAULT_KW.get(getattr(fn, "__name__", ""), "value")
    if kw == "index":
        return {"index": (options or []).index(v)} if v in (options or []) else {}
    return {kw: list(v) if kw == "default" else v}


def init_from_url(page: str) -> None:
    """On a session's first run, read the shared settings of the link (`LINK`), with a
    warning for every value that fell back. A real source's layer and text are put in
    the session at once (ui.realdata draws their widgets without a default; a value the
    browser sent for them after a process change is therefore not kept)."""
    if LINK in st.session_state:
        return
    page_names = [p.name for p in ns.PAGE_PARAMS.get(page, ())]
    s, warnings = ns.settings_from_query(_query(), page_names)
    sizes: dict[str, int] = {}
    for key in sorted(LAYOUTS, key=lambda k: k == s.layout):  # the link's layout last
        sizes.update(LAYOUTS[key].defaults)  # (its default C wins)
    st.session_state[LINK] = {**sizes, **_link_values(s)}
    st.session_state.setdefault("layer", s.layer)
    st.session_state.setdefault("text", s.text)
    st.session_state[_WARN] = [(w, s) for w in warnings]


def _link_values(s: ns.Settings) -> dict[str, Any]:
    """The shared settings of a link, by knob name, as the widgets hold them."""
    return {
        "layout": s.layout,
        "method": s.method,
        "groups": s.groups,
        "axes": list(s.axes),
        "centred": s.centred,
        "eps": s.eps,
        "seed": s.seed,
        "data": s.data,
        **s.sizes,
        **{name: getattr(s, name) for name, _ in ns.plain_fields()},
    }


def _view_values(page: str) -> dict[str, Any]:
    """Every value a URL of `page` carries, as the session holds it now (presenter mode
    apart: it is how the view is shown, not what it shows)."""
    names = [n for n in ns.SHARED if n != PRESENT] + ["layer", "text"]
    return {n: value(n) for n in names} | {
        key(page, p.name): value(key(page, p.name)) for p in ns.PAGE_PARAMS.get(page, ())
    }


def follow_history(page: str) -> bool:
    """Back or Forward in the browser: show the view of the URL the browser went to.

    Every URL write adds a browser history entry (Streamlit writes st.query_params with
    history.pushState), and Back or Forward reruns the app with that entry's query string.
    A run whose query string is not the one this session last wrote, while none of the
    view's values changed since that write (no widget was moved), is such a step: its
    values replace the session's, read as a link is (`init_from_url`, `page_params`).
    An empty query string (the entry before the first write) keeps the view. True when
    the view was restored."""
    wrote, query = st.session_state.get(_WROTE), _query()
    if wrote is None or not query or query == wrote[1] or _view_values(wrote[0]) != wrote[2]:
        return False
    params = ns.PAGE_PARAMS.get(page, ())
    s, _ = ns.settings_from_query(query, [p.name for p in params])
    restored = _link_values(s) | {key(page, n): v for n, v in ns.read(query, params)[0].items()}
    if s.real:
        restored |= {"layer": s.layer, "text": s.text}
    st.session_state[LINK].update(restored)  # for the widgets not drawn on this page
    for name, v in restored.items():
        set_value(name, v)
    return True


def seed_view() -> list[str]:
    """Presenter mode from the link, on the session's first run; warnings for a bad value."""
    if PRESENT in st.session_state[LINK]:
        return []
    vals, warnings = ns.read(_query(), [ns.PRESENT])
    st.session_state[LINK][PRESENT] = vals[PRESENT]
    return warnings


def remember(s: ns.Settings, page: str, view_warnings: list[str]) -> ns.Settings:
    """Keep the sidebar's settings `s` for this run (`settings()`, the URL); the input the
    page runs on (a real source's shape: ui.realdata); the view's warnings."""
    st.session_state[_SETTINGS] = s
    st.session_state[_INPUT] = run = realdata.effective(s, page)
    st.session_state[_WARN] = st.session_state.get(_WARN, []) + [(w, s) for w in view_warnings]
    return run


def link_presenter() -> bool:
    """Presenter mode as this run will have it (before any widget: app.py asks it for the
    page config): the session's value, or on a first visit the link's `present`."""
    if PRESENT in st.session_state:
        return bool(st.session_state[PRESENT])
    try:
        return bool(ns.parse(ns.PRESENT, st.query_params.get(PRESENT, "0")))
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
        **{p.name: ns.fmt(getattr(s, name)) for name, p in ns.plain_fields()},
    }
    if s.real:
        want["layer"] = s.layer
        if realdata.SOURCES[s.data].uses_text:
            want["text"] = s.text
    if st.session_state.get(PRESENT, False):  # on a phone too: the link keeps it
        want[PRESENT] = "1"
    current = _query()
    for p in ns.PAGE_PARAMS.get(page, ()):
        if known(key(page, p.name)):
            text = ns.fmt(value(key(page, p.name)))
            if text or p.default != "":  # an empty free text (no class code) is left out
                want[p.name] = text
        elif current.get(p.name):  # not read this run (the page stopped early): kept
            want[p.name] = current[p.name][-1]
    written = {k: [v] for k, v in want.items()}
    if current != written:
        st.query_params.from_dict(want)
    st.session_state[_WROTE] = (page, written, _view_values(page))  # (follow_history)


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


def set_value(name: str, v: Any) -> None:
    """Set knob or widget `name` to `v` before its widget is drawn this run (a callback, or
    a copy following its original: ui.onpage); the widget then shows `v`."""
    st.session_state[name] = v


def phone() -> bool:
    """Is the browser a phone's (its user agent says "Mobile", as phones' browsers do)?"""
    return "Mobile" in (st.context.headers.get("User-Agent") or "")


def presenter() -> bool:
    """Are this run's figures at presenter sizes: presenter mode on (`present=1` in the
    URL), on a screen that is not a phone's? A presenter link opened on a phone reads at
    the normal sizes (its CSS falls back below 640 px, ui/css.py; figures are built
    here, where the screen's width is not known, so they go by the browser's kind); the
    link keeps `present=1`."""
    return bool(st.session_state.get(PRESENT, False)) and not phone()


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
    cache_key = s.key()  # every input field of the one declaration (ui.params.Settings)
    arr = _INPUTS.get(cache_key)
    if arr is None:
        arr = generate(s.data, s.layout, s.shape, s.seed).numpy()
        _INPUTS.put(cache_key, arr)
    return torch.from_numpy(arr.copy())


# ---- page-specific URL parameters ------------------------------------------------


def page_params(page: str) -> dict[str, Any]:
    """This page's own values (`value`): read from the URL on the page's first use in the
    session (with a warning for each value that fell back) into the link's values; the
    widgets (`widget`) then own them, and every run writes them to the URL (`write_url`)."""
    params = ns.PAGE_PARAMS.get(page, ())
    link = st.session_state.setdefault(LINK, {})
    missing = [p for p in params if not known(key(page, p.name))]
    if missing:
        # a direct link carries them; a link that leaves some out, or a page switch (the URL
        # has none), gives the defaults quietly
        vals, warnings = ns.read(_query(), missing)
        link.update({key(page, name): v for name, v in vals.items()})
        for w in warnings:
            st.warning(w, icon=":material/warning:")
    return {p.name: value(key(page, p.name)) for p in params}


def widget(fn: Callable[..., Any], name: str, label: str, page: str, **kwargs: Any) -> Any:
    """A widget for page parameter `name` whose value also lives in the URL: written at
    the end of the run with the others, or at once in a fragment's own rerun. It starts
    at the link's value and keeps its value while it is not drawn."""
    p = next(p for p in ns.PAGE_PARAMS[page] if p.name == name)
    out = knob_widget(fn, p, label, key(page, name), **kwargs)
    if not route.full_run():  # a fragment's own rerun: app.py's end-of-run write will not come
        write_url(page)  # one message, and only if a value changed
    return out


def knob_widget(
    fn: Callable[..., Any], p: ns.Param, label: str, session_key: str, **kwargs: Any
) -> Any:
    """Knob `p`'s widget `fn` under `session_key` (a page knob's `key(page, name)`, a shared
    setting's URL name): its choices or range from the knob, starting at the link's value,
    kept while it is not drawn."""
    if p.choices is not None:
        kwargs.setdefault("options", list(p.choices))
    elif "options" not in kwargs:  # (a select slider over some of a range's values)
        if p.lo is not None:
            kwargs.setdefault("min_value", type(p.default)(p.lo))
        if p.hi is not None:
            kwargs.setdefault("max_value", type(p.default)(p.hi))
    kwargs.update(initial(fn, session_key, kwargs.get("options")))
    return fn(label, key=session_key, persist_state=KEEP, **kwargs)
