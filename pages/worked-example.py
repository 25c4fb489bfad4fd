"""Worked example: BatchNorm and LayerNorm on a small matrix, every number shown."""

from __future__ import annotations

import streamlit as st

import ui.warmup  # noqa: F401  (first: the heavy imports, one thread at a time)
from normviz import worked
from normviz.text import FORMULA
from ui import runner, state

PAGE = "worked-example"


def editor() -> worked.Matrix | None:
    """The preset picker and the editable matrix; the matrix, or None (refusal shown)."""
    preset = st.selectbox(
        "Start from",
        list(worked.PRESETS),
        format_func=lambda k: worked.PRESETS[k].label,
        key="wk_preset",
    )
    st.caption(worked.PRESETS[preset].note)
    edited = st.data_editor(
        worked.preset_frame(preset),
        key=f"wk_editor_{preset}",  # a new preset starts a fresh editor
        num_rows="dynamic",
        width="content",
        hide_index=True,
    )
    st.caption(worked.EDITOR_HELP)
    try:
        return worked.setup_from(edited)
    except worked.WorkedInputError as e:
        runner.refusal(e)
        return None


def method_column(steps: worked.MethodSteps) -> None:
    """One method: its statistics written out, its table, the torch check."""
    st.subheader(worked.heading(steps))
    st.markdown(worked.summary(steps))
    for s in steps.stats:
        st.markdown(worked.stat_heading(steps, s))
        for line in worked.statistic_latex(s, steps.eps):
            st.latex(line)
    runner.table(worked.steps_frame(steps))
    ok, text = worked.torch_check(steps)
    if ok:
        st.success(text, icon=":material/check_circle:")
    else:
        st.warning(text, icon=":material/warning:")


def method_columns(res: worked.Walkthrough) -> None:
    for label, message in res.refused:
        st.error(worked.refusal_text(label, message), icon=":material/block:")
    for col, steps in zip(st.columns(len(res.steps) or 1), res.steps, strict=False):
        with col:
            method_column(steps)


# ---- the page ----------------------------------------------------------------------------

state.settings()  # runs this page through app.py on a first visit (shared sidebar)
st.title("Worked example")
st.markdown(worked.INTRO)
st.latex(FORMULA)
st.caption(worked.AFFINE)
matrix = editor()
if matrix is not None:
    for section in worked.SECTIONS:
        res = runner.result(PAGE, section, matrix, {})
        if res is None or not getattr(res, "shown", True):
            continue  # refused (shown), or nothing to show for this matrix
        st.subheader(section.label)
        runner.show(PAGE, section, matrix, {}, state.presenter())
        if isinstance(res, worked.Walkthrough):
            method_columns(res)
