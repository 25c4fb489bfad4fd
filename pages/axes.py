"""Axis Explorer: shape a tensor, pick a method, see which cells share one mean and variance."""

from __future__ import annotations

import functools

import plotly.graph_objects as go
import streamlit as st

from normviz import LAYOUTS, NormConfigError, codegen, explore
from normviz.figures import blocks
from ui import params as ns
from ui import state

PAGE = "axes"  # the URL path: its own URL parameters are settings.PAGE_PARAMS[PAGE]
FLAT_KEY = "axes_flat_view"  # the clickable chart's widget key


def _figure_kw(s: ns.Settings) -> dict:
    """groups= / axes= for the figure builders (they take no eps or centring)."""
    return {k: v for k, v in s.norm_kwargs().items() if k in ("groups", "axes")}


# ---- cached at the page edge, keyed on plain settings (never on a tensor) ------------


@st.cache_data(max_entries=64, show_spinner=False)
def _block_fig(
    s: ns.Settings, cell: tuple[int, ...], partition: bool, split_hw: bool, presenter: bool
) -> go.Figure:
    return blocks.make_block_figure(
        s.method,
        s.layout,
        s.shape,
        cell=cell,
        partition=partition,
        split_hw=split_hw,
        presenter=presenter,
        **_figure_kw(s),
    )


@st.cache_data(max_entries=64, show_spinner=False)
def _flat_fig(s: ns.Settings, cell: tuple[int, ...], partition: bool, presenter: bool) -> go.Figure:
    return blocks.make_flat_figure(
        state.input_tensor(s),
        s.method,
        s.layout,
        cell=cell,
        partition=partition,
        presenter=presenter,
        **_figure_kw(s),
    )


@st.cache_data(max_entries=64, show_spinner=False)
def _group(s: ns.Settings, cell: tuple[int, ...]) -> explore.GroupDetail:
    return explore.selected_group(
        state.input_tensor(s), s.method, s.layout, cell, **s.norm_kwargs()
    )


@st.cache_data(max_entries=16, show_spinner=False)
def _methods_fig(layout: str, shape: tuple[int, ...], groups: int, presenter: bool) -> go.Figure:
    return blocks.make_methods_figure(layout, shape, groups, presenter=presenter)


@st.cache_data(max_entries=16, show_spinner=False)
def _verify(s: ns.Settings) -> codegen.Verification:
    return codegen.verify(state.input_tensor(s), s.method, s.layout, **s.norm_kwargs())


# ---- the selected cell ----------------------------------------------------------------


def _cell_keys(layout: str) -> list[str]:
    """The selected cell's widget keys (and URL names), one per axis of `layout`."""
    return [f"cell_{a.lower()}" for a in LAYOUTS[layout].axes]


def _check_linked_cell(s: ns.Settings, fresh: list[str]) -> None:
    """A cell from a link that lies outside the tensor falls back to 0, with a warning.

    `fresh`: the cell keys page_params just read (from the URL, or their defaults).
    """
    for a, k in zip(LAYOUTS[s.layout].axes, _cell_keys(s.layout), strict=True):
        n, v = s.sizes[a], st.session_state[k]
        if k in fresh and v >= n:
            st.warning(
                f"`{k}={v}` is not valid ({a} has {n} positions: expected a value from 0 to "
                f"{n - 1}): using the default 0.",
                icon=":material/warning:",
            )
            st.session_state[k] = 0


def _stored_cell(s: ns.Settings) -> tuple[int, ...]:
    """The selection kept in session state, clamped to the current shape."""
    raw = [st.session_state.get(k, 0) for k in _cell_keys(s.layout)]
    return explore.clamp_cell(s.shape, raw)


def _on_flat_click(layout: str, shape: tuple[int, ...]) -> None:
    """A click in the flat view: its marker's customdata is the cell's tensor index.

    Callbacks get the settings as arguments: they run before app.py has drawn the sidebar.
    """
    event = st.session_state.get(FLAT_KEY) or {}
    points = (event.get("selection") or {}).get("points") or []
    cell = explore.cell_from_point(points[0], shape) if points else None
    if cell is None:
        return
    for k, i in zip(_cell_keys(layout), cell, strict=True):
        st.session_state[k] = i


def _cell_inputs(s: ns.Settings) -> tuple[int, ...]:
    """One number input per axis (the keyboard way to pick a cell)."""
    lay = LAYOUTS[s.layout]
    cell = _stored_cell(s)
    cols = st.columns(len(lay.axes) + 1)
    cols[0].markdown("**Selected cell**")
    for col, a, k, i, n in zip(
        cols[1:], lay.axes, _cell_keys(s.layout), cell, s.shape, strict=True
    ):
        st.session_state[k] = i  # clamped: the shape may have shrunk
        state.widget(col.number_input, k, f"{a} ({lay.names[a]})", PAGE, max_value=n - 1, step=1)
    return _stored_cell(s)


@st.fragment
def explorer(s: ns.Settings) -> None:
    """Cell selection, the 3D block, the flat view and the group's numbers (reruns alone)."""
    presenter = state.presenter()
    cell = _cell_inputs(s)
    opts = st.columns(2)
    partition = state.widget(
        opts[0].toggle,
        "partition",
        "Colour every statistic group",
        PAGE,
        help="Partition mode: each group of cells that shares one mean and variance gets a "
        "colour (colours repeat for many groups).",
    )
    split_hw = s.layout == "NCHW" and state.widget(
        opts[1].toggle,
        "split_hw",
        "Show H and W separately",
        PAGE,
        help="Off: H·W is one axis, as in the Group Normalization paper's figure. On: every "
        "image is an H×W slab, side by side.",
    )
    left, right = st.columns(2)
    with left:
        st.markdown("**Block view** (drag to rotate)")
        st.plotly_chart(
            _block_fig(s, cell, partition, split_hw, presenter), theme=None, key="axes_block"
        )
    with right:
        st.markdown("**Flat view** (click a cell to select it)")
        st.plotly_chart(
            _flat_fig(s, cell, partition, presenter),
            theme=None,
            key=FLAT_KEY,
            on_select=functools.partial(_on_flat_click, s.layout, s.shape),
            selection_mode="points",
        )
    st.subheader("The selected group, with numbers")
    try:
        d = _group(s, cell)
    except NormConfigError as e:
        st.error(f"**torch refuses this setting:** {e}.", icon=":material/block:")
        hint = explore.refusal_hint(s.method, s.layout, s.shape, **_figure_kw(s))
        if hint:
            st.info(hint, icon=":material/lightbulb:")
        return
    st.markdown(
        f"The cell **{explore.cell_text(s.layout, cell)}** shares its statistics with "
        f"**m = {d.size_text}** values (highlighted above). Its first values: {d.values_text()}."
    )
    st.latex(d.stats_latex())
    st.latex(d.formula_latex())
    st.latex(d.computation_latex())
    st.caption(
        "γ = 1 and β = 0, as in a freshly initialised layer: training then learns "
        "the scale and shift it wants."
    )


# ---- the other sections --------------------------------------------------------------


def contract_section(s: ns.Settings) -> None:
    card = explore.contract_card(s.method, s.layout, s.shape, **_contract_kw(s))
    st.subheader(f"Contract card: {card.label}")
    st.table({"": [q for q, _ in card.rows()], "answer": [a for _, a in card.rows()]})


def _contract_kw(s: ns.Settings) -> dict:
    kw = dict(s.norm_kwargs())
    kw.pop("eps")
    return kw


def _on_axis_tick(layout: str) -> None:
    """A ticked or unticked axis box: switch to custom axes with the boxes' axes."""
    chosen = [a for a in LAYOUTS[layout].axes if st.session_state.get(f"axcb_{a}")]
    st.session_state["method"] = "custom"
    st.session_state["axes"] = chosen


def custom_axes_section(s: ns.Settings) -> None:
    lay = LAYOUTS[s.layout]
    st.subheader("Custom axes")
    st.markdown(
        "Tick the axes a statistic should pool. The page switches to custom axes and "
        "names the layer that reduces exactly those axes, if there is one."
    )
    if s.method == "custom":
        ticked = set(s.axes)
    else:
        try:
            ticked = set(
                explore.contract_card(s.method, s.layout, s.shape, **_contract_kw(s)).reduces
            )
        except NormConfigError:
            ticked = set()
    cols = st.columns(len(lay.axes))
    for col, a in zip(cols, lay.axes, strict=True):
        st.session_state[f"axcb_{a}"] = a in ticked  # follow the sidebar's choice
        col.checkbox(
            f"{a} ({lay.names[a]})", key=f"axcb_{a}", on_change=_on_axis_tick, args=(s.layout,)
        )
    if s.method == "custom":
        verdict = explore.explain_axes(s.layout, s.axes, s.centred)
        st.info(verdict.text, icon=":material/search:")
    elif "C/G" in explore.contract_card(s.method, s.layout, s.shape, **_contract_kw(s)).reduces:
        st.caption("GroupNorm pools part of C (C/G channels), which no single checkbox can say.")


def confusions_section(s: ns.Settings) -> None:
    for c in explore.confusions(s.method, s.layout, s.shape, **_figure_kw(s)):
        st.info(f"**{c.title}.** {c.text}", icon=":material/warning:")


def side_by_side_section(s: ns.Settings) -> None:
    st.subheader("All methods side by side")
    st.markdown(
        "The same tensor under each method, with the group of the corner cell highlighted. "
        "The pooled axes are the ones the highlight stretches along."
    )
    st.plotly_chart(
        _methods_fig(s.layout, s.shape, s.groups, state.presenter()),
        theme=None,
        key="axes_methods",
    )


def verified_code_section(s: ns.Settings) -> None:
    st.subheader("Verified code")
    st.markdown("The torch code for the current settings, run on this page's tensor:")
    try:
        with st.spinner("Checking against torch…"):
            v = _verify(s)
    except (NormConfigError, ValueError, RuntimeError) as e:
        st.info(f"No live check for this setting: {e}", icon=":material/info:")
        return
    st.code(v.code, language="python")
    ok, text = explore.verification_text(v.module, v.max_abs_diff)
    (st.success if ok else st.warning)(
        text, icon=":material/check_circle:" if ok else ":material/warning:"
    )


# ---- the page ------------------------------------------------------------------------

s = state.settings()
st.title("Axis Explorer")
st.markdown(
    "Every normalization layer computes one mean and one variance per group of values. "
    "Pick a method in the sidebar and a cell below: the cells that share that cell's mean "
    "and variance light up, in 3D and unfolded flat."
)
fresh = [k for k in _cell_keys(s.layout) if k not in st.session_state]
state.page_params(PAGE)
_check_linked_cell(s, fresh)
if state.require(s):
    explorer(s)
    contract_section(s)
    custom_axes_section(s)
    confusions_section(s)
    side_by_side_section(s)
    verified_code_section(s)
elif s.method == "custom":  # unticked every axis: the boxes are the way back
    custom_axes_section(s)
