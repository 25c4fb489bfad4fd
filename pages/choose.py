"""Which normalization? A decision guide, and an audit of real models and uploaded files."""

from __future__ import annotations

import streamlit as st

import ui.warmup  # noqa: F401  (first: the heavy imports, one thread at a time)
from normviz import choose
from normviz.knobs import Value
from normviz.sections import Section
from ui import inputs, knobs, route, runner, state

route.entry()  # a page Streamlit ran on its own reruns through app.py (ui.route)

PAGE = "choose"  # the URL path; its knobs are choose.KNOBS (ui.params.PAGE_PARAMS[PAGE])


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
        values = {k.name: knobs.draw(k, PAGE, choose) for k in s.knobs}
    return choose.Setup(inputs.saved_file(f)), values


@st.fragment
def section(s: Section) -> None:
    """One section: heading, intro, its widgets, then the runner (result, tables, notes)."""
    st.subheader(s.label)
    st.markdown(s.intro)
    if s is choose.STATE_DICT:
        setup, values = _upload_inputs(s)
    else:
        # on a projector the guide's questions take two columns (the constraints on the
        # right), so its answer is on the first screen; columns stack again below 640 px
        side = state.presenter() and s is choose.GUIDE
        left, right = st.columns([1, 1.3], gap="large") if side else (st.container(),) * 2
        values = {}
        for k in s.knobs:
            with right if side and k is s.knobs[-1] else left:
                values[k.name] = knobs.draw(k, PAGE, choose)
        setup = choose.Setup()
    runner.show(PAGE, s, setup, values, state.presenter(), intro=False)


st.title("Which normalization?")
state.page_params(PAGE)  # the guide's answers and the audited model, from a link
for s in choose.SECTIONS:
    section(s)
