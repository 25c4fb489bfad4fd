"""The shared sidebar: the tensor, the method and the input a page uses, and presenter mode.

Each widget's key is its URL name; it starts at the link's value and keeps its value
while hidden (ui.state: `initial`, `KEEP`). A page draws only the controls it
declares (ui.pages.controls); the others keep their values, in the session and the
URL.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from normviz import LAYOUTS, METHODS
from ui import params as ns
from ui import realdata, state
from ui.knobs import widget_for
from ui.pages import controls
from ui.state import initial, value

PRESENT_HELP = (
    "Larger text, tables, formulas and figures for a projector, and the sidebar folded "
    "away. A copied link keeps it (present=1)."
)


def _tensor(sb: Any, shown: set[str]) -> str:
    """Layout and sizes (those the page uses); the layout. A real source fixes both: its
    shape is shown instead (`_real_shape`), the inputs keep their values for later."""
    layout = value("layout")
    if shown & {"layout", "batch", "sample"}:
        sb.header("Tensor")
    fixed = realdata.REAL in shown and value("data") in realdata.SOURCES
    if fixed:
        shown = shown - {"layout", "batch", "sample"}
        layout = realdata.SOURCES[value("data")].layout
    if "layout" in shown:
        options = list(LAYOUTS)
        layout = sb.radio(
            "Layout",
            options,
            key="layout",
            horizontal=True,
            persist_state=state.KEEP,
            help="BTC: B sequences × T tokens × C features. NCHW: N images × C channels × H × W.",
            **initial(sb.radio, "layout", options),
        )
    lay = LAYOUTS[layout]
    sized = [a for i, a in enumerate(lay.axes) if ("sample", "batch")[i == 0] in shown]
    for col, a in zip(sb.columns(len(sized)) if sized else (), sized, strict=True):
        col.number_input(
            a,
            min_value=1,
            max_value=ns.SIZE_LIMITS[a],
            step=1,
            key=a,
            persist_state=state.KEEP,
            help=f"{a}: {lay.names[a]}",
            **initial(col.number_input, a),
        )
    return layout


def _method(sb: Any, shown: set[str], layout: str) -> str:
    """Method, G, custom axes and ε (those the page uses); the method."""
    method = value("method")
    if shown & {"method", "groups", "eps"}:
        sb.header("Method")
    if "method" in shown:
        options = list(METHODS)
        method = sb.selectbox(
            "Normalization",
            options,
            key="method",
            persist_state=state.KEEP,
            format_func=lambda k: METHODS[k].label,
            **initial(sb.selectbox, "method", options),
        )
    if "groups" in shown or ("method" in shown and METHODS[method].grouped):
        sb.number_input(
            "Groups G",
            min_value=1,
            max_value=4096,
            step=1,
            key="groups",
            persist_state=state.KEEP,
            **initial(sb.number_input, "groups"),
        )
    if "method" in shown and method == "custom":
        axes = LAYOUTS[layout].axes
        saved = list(value("axes") or [])
        if any(a not in axes for a in saved):  # the saved selection may name the other layout's
            st.session_state["axes"] = [a for a in saved if a in axes]
        sb.pills(
            "Reduce over",
            list(axes),
            selection_mode="multi",
            key="axes",
            persist_state=state.KEEP,
            **initial(sb.pills, "axes"),
        )
        sb.toggle(
            "Subtract the mean",
            key="centred",
            persist_state=state.KEEP,
            help="off: divide by the RMS only",
            **initial(sb.toggle, "centred"),
        )
    if "eps" in shown:
        sb.select_slider(
            "ε (added to σ²)",
            # ε = 0 as the int 0: Streamlit matches a float value to a float option within
            # 5e-12, which would take MiniLM's ε = 1e-12 for 0 (an int is matched exactly)
            options=[0 if v == 0 else v for v in ns.EPS_CHOICES],
            key="eps",
            persist_state=state.KEEP,
            format_func=lambda v: "0" if v == 0 else f"{v:.0e}",
            **initial(sb.select_slider, "eps"),
        )
    return method


def _input(sb: Any, shown: set[str], page: str) -> None:
    """Data generator and seed (those the page uses)."""
    if shown & {"data", "seed"}:
        sb.header("Input")
    if "data" in shown:
        options = list(ns.DATA_CHOICES)
        sb.selectbox(
            "Data",
            options,
            key="data",
            persist_state=state.KEEP,
            format_func=realdata.data_label,
            help=realdata.data_help(),
            **initial(sb.selectbox, "data", options),
        )
        realdata.controls_for(sb, page)
    if "seed" in shown:
        sb.number_input(
            "Seed",
            min_value=0,
            max_value=2**31 - 1,
            step=1,
            key="seed",
            persist_state=state.KEEP,
            **initial(sb.number_input, "seed"),
        )


def _plain(sb: Any) -> None:
    """The shared settings that are plain knobs (ui.params.plain_fields: any field of
    the declaration without a section of its own), each by the knob → widget builder."""
    for _name, p in ns.plain_fields():
        fn, kw = widget_for(p, sb)
        state.knob_widget(fn, p, p.label or p.name, p.name, **kw)


def draw(page: str) -> ns.Settings:
    """Draw the shared settings this page uses (`ui.pages.controls`) in the sidebar, and
    presenter mode; return every shared setting (drawn or not) for the URL."""
    state.init_from_url(page)
    state.follow_history(page)  # Back or Forward: the URL's view (ui.state)
    view_warnings = state.seed_view()
    shown, sb = set(controls(page)), st.sidebar
    layout = _tensor(sb, shown)
    placeholder = sb.empty()  # a real source's shape, once the page's input is known
    method = _method(sb, shown, layout)
    _input(sb, shown, page)
    if shown:
        _plain(sb)
        sb.divider()
    sb.toggle(
        "Presenter mode",
        key=state.PRESENT,
        persist_state=state.KEEP,
        help=PRESENT_HELP,
        **initial(sb.toggle, state.PRESENT),
    )
    lay = LAYOUTS[layout]
    data = value("data")
    s = ns.Settings(
        layout=layout,
        sizes={a: int(value(a)) for a in lay.axes},
        method=method,
        groups=int(value("groups")),
        axes=tuple(a for a in lay.axes if a in (value("axes") or [])),
        centred=bool(value("centred")),
        eps=float(value("eps")),
        seed=int(value("seed")),
        data=data,
        layer=str(value("layer")) if data in realdata.SOURCES else "",
        text=str(value("text")),
        **{name: value(p.name) for name, p in ns.plain_fields()},
    )
    run = state.remember(s, page, view_warnings)
    if run.real and realdata.REAL in shown:
        realdata.shape_caption(placeholder, run)
    return s
