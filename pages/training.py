"""Training lab: why normalization helps, measured live on real digits."""

from __future__ import annotations

import functools
from typing import Any

import streamlit as st

import ui.warmup  # noqa: F401  (first: the heavy imports, one thread at a time)
from normviz import training
from normviz.knobs import Knob, Value
from normviz.sections import Section, by_slug
from ui import route, runner, state

route.entry()  # a page Streamlit ran on its own reruns through app.py (ui.route)

PAGE = "training"  # the URL path; its knobs are training.KNOBS (ui.params.PAGE_PARAMS[PAGE])


def _widget(k: Knob, where: Any) -> Value:
    """One knob's widget, drawn by the kind of knob; its value (also in the URL)."""
    kw: dict[str, Any] = {"format_func": functools.partial(training.choice_label, k.name)}
    if k.name in training.HELP:
        kw["help"] = training.HELP[k.name]
    if k.multi:
        value = state.widget(where.pills, k.name, k.label, PAGE, selection_mode="multi", **kw)
        return tuple(value or ())
    if k.choices is None:
        return state.widget(where.slider, k.name, k.label, PAGE, step=1)
    if isinstance(k.default, str):
        return state.widget(where.radio, k.name, k.label, PAGE, horizontal=True, **kw)
    return state.widget(where.select_slider, k.name, k.label, PAGE, **kw)


@st.fragment
def show(section: Section, setup: training.Setup) -> None:
    """The experiment: heading, intro, its knobs side by side, then the runner."""
    st.subheader(section.label)
    st.markdown(section.intro)
    cols = st.columns(len(section.knobs))
    knobs = {k.name: _widget(k, col) for k, col in zip(section.knobs, cols, strict=True)}
    runner.show(PAGE, section, setup, knobs, state.presenter(), intro=False)


shared = state.settings()
st.title("Training lab")
st.markdown(training.INTRO)
state.page_params(PAGE)  # the experiment and its knobs, from a link
label = functools.partial(training.choice_label, "exp")
slug = state.widget(st.radio, "exp", "Experiment", PAGE, horizontal=True, format_func=label)
show(by_slug(training.SECTIONS, slug), training.Setup(seed=shared.seed))
