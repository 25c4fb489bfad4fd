"""Which normalization? A decision guide, and an audit of real models and uploaded files."""

from __future__ import annotations

from typing import Any

import streamlit as st

import ui.warmup  # noqa: F401  (first: the heavy imports, one thread at a time)
from normviz import choose
from normviz.knobs import Knob, Value
from normviz.sections import Section
from ui import inputs, route, runner, state

route.entry()  # a page Streamlit ran on its own reruns through app.py (ui.route)

PAGE = "choose"  # the URL path; its knobs are choose.KNOBS (ui.params.PAGE_PARAMS[PAGE])

# How each knob is drawn; its label, range and choices come from the knob itself.
WIDGETS: dict[str, tuple[Any, dict[str, Any]]] = {
    "arch": (st.radio, {}),
    "per_device": (st.number_input, {"step": 1}),
    "constraints": (st.pills, {"selection_mode": "multi"}),
    "model": (st.selectbox, {}),
    "use_sample": (st.toggle, {}),
}


def _widget(k: Knob) -> Value:
    fn, kw = WIDGETS[k.name]
    if k.name in choose.LABELS:
        kw = {**kw, "format_func": choose.LABELS[k.name].__getitem__}
    if k.name in choose.HELP:
        kw = {**kw, "help": choose.HELP[k.name]}
    value = state.widget(fn, k.name, k.label, PAGE, **kw)
    return tuple(value or ()) if k.multi else value


def _upload_inputs(s: Section) -> tuple[choose.Setup, dict[str, Value]]:
    """The uploader, the sample file and its toggle: the uploaded file (if any) and knobs."""
    c1, c2 = st.columns([3, 2])
    with c1:
        f = st.file_uploader("State dict", type=list(choose.UPLOAD_TYPES), key="ch_upload")
    with c2:
        st.download_button(
            "Download a sample file",
            choose.sample_bytes(),
            file_name=choose.SAMPLE_NAME,
            icon=":material/download:",
            key="ch_sample_dl",
            help=choose.SAMPLE_HELP,
        )
        knobs = {k.name: _widget(k) for k in s.knobs}
    return choose.Setup(inputs.saved_file(f)), knobs


@st.fragment
def section(s: Section) -> None:
    """One section: heading, intro, its widgets, then the runner (result, tables, notes)."""
    st.subheader(s.label)
    st.markdown(s.intro)
    if s is choose.STATE_DICT:
        setup, knobs = _upload_inputs(s)
    else:
        setup, knobs = choose.Setup(), {k.name: _widget(k) for k in s.knobs}
    runner.show(PAGE, s, setup, knobs, state.presenter(), intro=False)


st.title("Which normalization?")
state.page_params(PAGE)  # the guide's answers and the audited model, from a link
for s in choose.SECTIONS:
    section(s)
