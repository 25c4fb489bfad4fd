"""Worked example: BatchNorm and LayerNorm on a small matrix, every number shown."""

from __future__ import annotations

import hashlib

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from normviz import METHODS, NormConfigError, worked
from normviz.figures import worked as figs
from normviz.text import FORMULA
from ui import state

TORCH_NAME = {"batch": "BatchNorm1d", "layer": "LayerNorm"}


@st.cache_resource(max_entries=32, show_spinner=False)
def _figure(digest: str, presenter: bool, _x: np.ndarray, _steps: tuple) -> go.Figure:
    return figs.make_worked_figure(_x, _steps, presenter)


def _digest(x: np.ndarray) -> str:
    return hashlib.sha256(x.tobytes() + str(x.shape).encode()).hexdigest()


def editor() -> np.ndarray | None:
    """The preset picker and the editable matrix; the matrix, or None (error shown)."""
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
    st.caption(
        f"Edit any cell, add or delete rows (up to {worked.MAX_SIZE}): everything below "
        "recomputes. The rows are tokens, the columns features: a (1, T, C) tensor."
    )
    try:
        return worked.as_matrix(edited)
    except worked.WorkedInputError as e:
        st.error(f"**The matrix cannot be used:** {e}.", icon=":material/block:")
        return None


def method_section(steps: worked.MethodSteps) -> None:
    """One method: its statistics written out, its output table, the torch check."""
    noun = steps.pools
    st.subheader(f"{steps.label}: one mean and variance per {noun}")
    st.markdown(
        f"{steps.label} pools each **{noun}**: m = {len(steps.stats[0].values)} values "
        f"feed one μ and one σ² (divided by m, not m − 1), and ε = {steps.eps:g}."
    )
    for s in steps.stats:
        st.markdown(f"**{noun.capitalize()} {s.index + 1}**")
        for line in worked.statistic_latex(s, steps.eps):
            st.latex(line)
    st.dataframe(worked.steps_frame(steps), width="stretch")
    module = TORCH_NAME[steps.method]
    if steps.matches_torch:
        st.success(
            f"Same as torch.nn.{module}: largest difference {steps.torch_max_diff:.1e}.",
            icon=":material/check_circle:",
        )
    else:
        st.warning(
            f"Differs from torch.nn.{module} by up to {steps.torch_max_diff:.2e}.",
            icon=":material/warning:",
        )


# ---- the page ----------------------------------------------------------------------------

state.settings()  # runs this page through app.py on a first visit (shared sidebar)
st.title("Worked example")
st.markdown(
    "Both methods apply the same formula to the same 2×3 matrix. BatchNorm takes μ and σ² "
    "down each column (a feature, across the samples); LayerNorm takes them along each row "
    "(one sample, across its features). Change the numbers and follow every step."
)
st.latex(FORMULA)
st.caption("Here γ = 1 and β = 0, as in a freshly initialized layer.")
x = editor()
if x is not None:
    results: dict[str, worked.MethodSteps] = {}
    for key in worked.METHODS_SHOWN:
        try:
            results[key] = worked.method_steps(x, key)
        except (worked.WorkedInputError, NormConfigError) as e:
            st.error(f"**{METHODS[key].label} cannot run here:** {e}.", icon=":material/block:")
    steps = tuple(results.values())
    if steps:
        st.plotly_chart(_figure(_digest(x), state.presenter(), x, steps), theme=None, key="wk_fig")
    cols = st.columns(len(steps) or 1)
    for col, s in zip(cols, steps, strict=False):
        with col:
            method_section(s)

    if "batch" in results and "layer" in results and worked.is_source(x):
        st.subheader("The source text's printed results")
        st.markdown(
            "The source rounds the moments of BatchNorm's output to 4 decimals and "
            "LayerNorm's first row to 3. The same numbers, from normviz:"
        )
        st.table(worked.source_comparison(results["batch"], results["layer"]))

    st.subheader("Which moments each method controls")
    st.markdown(
        "A method forces mean 0 and variance 1 only along the axis it pools. Along the "
        "other axis the output keeps whatever pattern is left, and some information is gone: "
        "on the source's matrix BatchNorm turns each row into a constant, −1 or +1 (only "
        "which sample was larger survives), while LayerNorm makes the two rows identical "
        "(the +2 between them is gone)."
    )
    st.table(worked.moments_table(x))
    st.caption(
        "Variances are divided by m. After normalization they are σ²/(σ² + ε), "
        "which rounds to 1; a constant column or row comes out as zeros (variance 0)."
    )
