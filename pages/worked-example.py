"""Worked example: BatchNorm and LayerNorm on a small matrix, every number shown."""

from __future__ import annotations

import streamlit as st

import ui.warmup  # noqa: F401  (first: the heavy imports, one thread at a time)
from normviz import worked
from normviz.text import FORMULA
from ui import route, runner, safe, state, stepper

route.entry()  # a page Streamlit ran on its own reruns through app.py (ui.route)

PAGE = "worked-example"
CELL_KEYS = ("wk_row", "wk_col")  # the selected cell (not in the URL: the matrix is not either)


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


def cell_picker(x) -> tuple[int, int]:
    """The cell (row, column; 0-based) whose computation is worked out, for both methods."""
    picked = []
    boxes = st.columns(4)[:2]
    for box, key, n, word in zip(boxes, CELL_KEYS, x.shape, ("Row", "Column"), strict=True):
        if safe.offered(st.session_state.get(key, 0), range(n), None) is None:
            st.session_state[key] = 0  # the matrix shrank (or a crafted value)
        row = box.selectbox(word, range(n), format_func=lambda i: str(i + 1), key=key)
        picked.append(safe.offered(row, range(n), 0))
    return picked[0], picked[1]


def method_column(steps: worked.MethodSteps, row: int, col: int) -> None:
    """One method: its statistics written out, its table, the torch check."""
    st.subheader(worked.heading(steps))
    st.markdown(worked.summary(steps))
    for heading, lines in worked.worked_stats(steps, row, col):
        st.markdown(heading)
        for line in lines:
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
    row, col = cell_picker(res.x)
    st.markdown(worked.cell_text(res, row, col))
    for box, steps in zip(st.columns(len(res.steps) or 1), res.steps, strict=False):
        with box:
            method_column(steps, row, col)


@st.fragment  # a stop reruns the players alone
def players(res: worked.Walkthrough, presenter: bool) -> None:
    """Each method's μ, σ², x̂ and y, statistic by statistic, played in the browser."""
    for box, steps in zip(st.columns(len(res.steps) or 1), res.steps, strict=False):
        with box:
            stepper.play(
                f"wk_play_{steps.method}", worked.method_frames(steps, res.x), 1, presenter
            )


# ---- the page ----------------------------------------------------------------------------

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
            players(res, state.presenter())
            method_columns(res)
