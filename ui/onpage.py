"""The lecturer's controls on the page: in presenter mode the sidebar is folded away, so
the shared setting a lecture step changes (the method) is also drawn above the figure.

One value, two widgets: the sidebar's widget keeps the URL name as its key; the page's
copy has its own key (`KEY`), starts at the sidebar's value on every run, and its
callback hands a click to the sidebar's key before the run starts (ui.state.set_value).
So a click on either changes the other, and the URL (written from the sidebar's values).
"""

from __future__ import annotations

import streamlit as st

from normviz import METHODS
from ui import state

INTRO_LABEL = "About this page"  # presenter mode: the page's intro, folded
KEY = "onpage_method"  # the page's copy of the sidebar's `method` (never a URL name)


def _to_sidebar(key: str, name: str) -> None:
    """A click on the page's copy: the sidebar's setting takes its value."""
    state.set_value(name, st.session_state[key])


def method(always: bool = False) -> str | None:
    """The method as a row of buttons on the page, in presenter mode (or `always`);
    its value, or None where it is not drawn."""
    if not (always or state.presenter()):
        return None
    options = list(METHODS)
    state.set_value(KEY, state.value("method"))  # follow the sidebar (drawn before the page)
    return st.segmented_control(
        "Normalization",
        options,
        key=KEY,
        required=True,  # a click on the chosen one keeps it chosen
        format_func=lambda k: METHODS[k].label,
        on_change=_to_sidebar,
        args=(KEY, "method"),
        help="The same setting as the sidebar's Method (method= in the URL).",
        label_visibility="collapsed",  # the buttons name the methods; the label is for readers
    )


def intro(text: str) -> None:
    """A page's opening paragraph (fixed text); in presenter mode folded into an expander,
    so the first figure starts on the first screen of a 1280×720 projector (the lecturer
    says it; a click shows it)."""
    if state.presenter():
        with st.expander(INTRO_LABEL, icon=":material/info:"):
            st.markdown(text)
    else:
        st.markdown(text)
