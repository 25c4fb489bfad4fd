"""Worked example: BatchNorm and LayerNorm on a small matrix, every number shown."""

from __future__ import annotations

import functools

import streamlit as st

import ui.warmup  # noqa: F401  (first: the heavy imports, one thread at a time)
from normviz import worked
from normviz.text import FORMULA
from ui import route, runner, safe, state, stepper, tensorgrid

route.entry()  # a page Streamlit ran on its own reruns through app.py (ui.route)

PAGE = "worked-example"
GRID_KEY = "wk_grid"  # the cell picker: the tensor grid (answered in the browser)
CELL = state.key(PAGE, "cell")  # the selected cell (not in the URL: the matrix is not either)


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


def _on_pick(shape: tuple[int, int]) -> None:
    """A pick in the grid (click, tap, Enter) selects that cell for the numbers below."""
    cell = tensorgrid.picked_cell(GRID_KEY, shape)  # a crafted value: None
    if cell is not None:
        st.session_state[CELL] = cell


def cell_picker(res: worked.Walkthrough) -> tuple[int, int]:
    """The picked cell (row, column; 0-based), for both methods (normviz.worked.picker)."""
    shape = res.x.shape
    cell = safe.cell(st.session_state.get(CELL), shape) or (0, 0)  # the matrix may shrink
    st.session_state[CELL] = cell
    tensorgrid.show(worked.cell_grid(res, cell), GRID_KEY, functools.partial(_on_pick, shape))
    return cell[0], cell[1]


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


@st.fragment  # a pick reruns the picker and the worked numbers alone
def method_columns(res: worked.Walkthrough) -> None:
    for label, message in res.refused:
        st.error(worked.refusal_text(label, message), icon=":material/block:")
    row, col = cell_picker(res)
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
