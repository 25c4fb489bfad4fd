"""Training lab: why normalization helps, measured live on real digits."""

from __future__ import annotations

import functools

import streamlit as st

import ui.warmup  # noqa: F401  (first: the heavy imports, one thread at a time)
from normviz import training
from normviz.sections import Section, by_slug
from ui import knobs, route, runner, state

route.entry()  # a page Streamlit ran on its own reruns through app.py (ui.route)

PAGE = "training"  # the URL path; its knobs are training.KNOBS (ui.params.PAGE_PARAMS[PAGE])


@st.fragment
def show(section: Section, setup: training.Setup) -> None:
    """The experiment: heading, intro, its knobs side by side, then the runner."""
    st.subheader(section.label)
    st.markdown(section.intro)
    cols = st.columns(len(section.knobs))
    values = {
        k.name: knobs.draw(k, PAGE, training, col)
        for k, col in zip(section.knobs, cols, strict=True)
    }
    runner.show(PAGE, section, setup, values, state.presenter(), intro=False)


shared = state.settings()
st.title("Training lab")
st.markdown(training.INTRO)
state.page_params(PAGE)  # the experiment and its knobs, from a link
label = functools.partial(training.choice_label, "exp")
slug = state.widget(st.radio, "exp", "Experiment", PAGE, horizontal=True, format_func=label)
show(by_slug(training.SECTIONS, slug), training.Setup(seed=shared.seed))
