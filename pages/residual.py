"""Pre-norm vs post-norm: where the norm sits in a residual block, and what that does."""

from __future__ import annotations

from typing import Any

import streamlit as st

import ui.warmup  # noqa: F401  (first: the heavy imports, one thread at a time)
from normviz import residual as rs
from normviz.residual import placement, training
from normviz.sections import Section
from ui import knobs, route, runner, state

route.entry()  # a page Streamlit ran on its own reruns through app.py (ui.route)

PAGE = "residual"  # the URL path: the widgets' ranges and choices are rs.KNOBS
SETUP = rs.Setup()
TRAIN_KEY = "res_train_request"  # the training knobs last requested, kept across reruns


def _knobs(section: Section) -> dict[str, Any]:
    """The section's widgets: the stack's width, norm and block, then the run's own knobs."""
    values: dict[str, Any] = {}
    stack, own = section.knobs[:3], section.knobs[3:]
    for row, widths in ((stack, [2, 2, 3][: len(stack)]), (own, [1] * len(own))):
        if row:
            for col, knob in zip(st.columns(widths), row, strict=True):
                values[knob.name] = knobs.draw(knob, PAGE, rs, col)
    return values


def _request_training(section: Section) -> None:
    # a callback, not the button's return value: it runs once, before the script, so the
    # request survives any rerun of this run
    st.session_state[TRAIN_KEY] = {
        k.name: st.session_state[state.key(PAGE, k.name)] for k in section.knobs
    }


def _formulas(res: placement.Placements) -> None:
    # two cards a row (four left Peri-LN's formula no room at 1024 px presenter): pre-norm
    # above Peri-LN, post-norm above DeepNorm, each above its variant (ui/css.py sizes
    # the formulas in res_cards)
    with st.container(key="res_cards"):
        for at in range(0, len(res.cards), 2):
            row = zip(st.columns(2, gap="medium"), res.cards[at : at + 2], strict=False)
            for col, card in row:
                col.markdown(f"**{card.title}**")
                col.latex(card.formula)
                col.caption(card.caption)


@st.fragment
def _section(section: Section) -> None:
    """One section: its heading, intro and widgets, then its result (reruns alone)."""
    st.subheader(section.label)
    st.markdown(section.intro)
    values = _knobs(section)
    if section is training.SECTION:  # the training run waits for its button
        st.button(
            training.BUTTON,
            icon=":material/play_arrow:",
            key="res_tr_go",
            on_click=_request_training,
            args=(section,),
        )
        request = st.session_state.get(TRAIN_KEY)
        if request is None:
            st.info(training.WAITING, icon=":material/info:")
            return
        if request != values:
            st.caption(training.STALE)
        values = request
    res = runner.show(PAGE, section, SETUP, values, state.presenter(), intro=False)
    if isinstance(res, placement.Placements):
        _formulas(res)


st.title("Pre-norm vs post-norm")
state.page_params(PAGE)  # every section's settings, from a link (warns about bad values)
for sec in rs.SECTIONS:
    _section(sec)
with st.expander(placement.WHY_TITLE, icon=":material/help:"):
    st.markdown(placement.WHY)
