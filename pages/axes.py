"""Axis Explorer: shape a tensor, pick a method, see which cells share one mean and variance."""

from __future__ import annotations

import functools
from dataclasses import replace

import streamlit as st

import ui.warmup  # noqa: F401  (first: the heavy imports, one thread at a time)
from normviz import LAYOUTS, axes, elementwise
from normviz.axes import gridview
from ui import onpage, route, runner, state, tensorgrid

route.entry()  # a page Streamlit ran on its own reruns through app.py (ui.route)

PAGE = "axes"  # the URL path; its own URL parameters are axes.KNOBS
FLAT_KEY = "axes_flat_view"  # the tensor grid's key (the flat view, answered in the browser)
BLOCK, FLAT, GROUP = axes.SELECTION
KNOB_LABELS = {k.name: k.label for k in axes.KNOBS}


def _on_pick(layout: str, shape: tuple[int, ...]) -> None:
    """A pick in the grid (click, tap, Enter) selects that cell for the URL and the numbers."""
    # callbacks get the settings as arguments: they run before app.py draws the sidebar
    cell = tensorgrid.picked_cell(FLAT_KEY, shape)  # a crafted value: None
    for k, i in zip(axes.cell_keys(layout), cell or (), strict=False):
        st.session_state[state.key(PAGE, k)] = i


def _cell_inputs(setup: axes.AxesSetup) -> tuple[int, ...]:
    """One number input per axis (the keyboard way to pick a cell), clamped to the shape."""
    con = setup.contract
    lay, names = LAYOUTS[con.layout], axes.cell_keys(con.layout)
    keys = [state.key(PAGE, k) for k in names]  # their session keys
    cell = axes.clamp_cell(con.shape, [int(state.value(k)) for k in keys])
    cols = st.columns(len(lay.axes) + 1)
    cols[0].markdown("**Selected cell**")
    for col, a, name, k, i, n in zip(cols[1:], lay.axes, names, keys, cell, con.shape, strict=True):
        if state.value(k) != i:  # clamped: the shape may have shrunk
            st.session_state[k] = i
        state.widget(col.number_input, name, f"{a} ({lay.names[a]})", PAGE, max_value=n - 1, step=1)
    return axes.clamp_cell(con.shape, [int(state.value(k)) for k in keys])


def _toggle(col, name: str) -> bool:
    return state.widget(col.toggle, name, KNOB_LABELS[name], PAGE, help=axes.HELP[name])


@st.fragment
def explorer(setup: axes.AxesSetup) -> None:
    """The selected cell, the block, the flat view and the group's numbers (reruns alone)."""
    presenter, con = state.presenter(), setup.contract
    setup = replace(setup, cell=_cell_inputs(setup))
    opts = st.columns(2)
    knobs = {"partition": _toggle(opts[0], "partition")}
    knobs["split_hw"] = con.layout == "NCHW" and _toggle(opts[1], "split_hw")
    left, right = st.columns(2)
    with left:
        runner.show(PAGE, BLOCK, setup, knobs, presenter)
    with right:
        st.markdown(FLAT.intro)
        grid = runner.result(PAGE, gridview.SECTION, setup, knobs)
        if grid is not None:
            tensorgrid.show(grid, FLAT_KEY, functools.partial(_on_pick, con.layout, con.shape))
    st.subheader(GROUP.label)
    runner.show(PAGE, GROUP, setup, knobs, presenter)


def _on_axis_tick(layout: str) -> None:
    """A ticked or unticked axis box: switch to custom axes with the boxes' axes."""
    chosen = [a for a in LAYOUTS[layout].axes if st.session_state.get(f"axcb_{a}")]
    st.session_state["method"] = "custom"
    st.session_state["axes"] = chosen


def axis_boxes(layout: str, ticked: tuple[str, ...]) -> None:
    """One checkbox per axis, ticked as the sidebar's setting pools them."""
    lay = LAYOUTS[layout]
    for col, a in zip(st.columns(len(lay.axes)), lay.axes, strict=True):
        st.session_state[f"axcb_{a}"] = a in ticked  # follow the sidebar's choice
        col.checkbox(
            f"{a} ({lay.names[a]})", key=f"axcb_{a}", on_change=_on_axis_tick, args=(layout,)
        )


def fold_key(slug: str) -> str:
    """The session key of a folded section's fold (open or not; not in the URL)."""
    return f"axes_fold_{slug}"


# ---- the page ------------------------------------------------------------------------

s = state.settings()
st.title(axes.TITLE)
onpage.intro(axes.INTRO)
onpage.method()  # presenter mode: the method above the figure (the sidebar is folded)
fresh = [k for k in axes.cell_keys(s.layout) if not state.known(state.key(PAGE, k))]
values = state.page_params(PAGE)
for key, warning in axes.linked_cell_warnings(s.layout, s.sizes, values, fresh):
    st.warning(warning, icon=":material/warning:")
    st.session_state[state.key(PAGE, key)] = 0
if elementwise.applies(s.method):  # no statistics (DyT): nothing to pool, no contract
    if runner.guard(s.check_size):
        real = state.real_input(s)
        setup = axes.pointwise.setup_for(s.method, s.layout, s.shape, s.data, s.seed, real)
        st.subheader(axes.pointwise.SECTION.label)
        runner.show(PAGE, axes.pointwise.SECTION, setup, {}, state.presenter())
elif runner.guard(s.contract):  # a G that does not divide C, the element cap, no axis...
    con = s.contract()
    setup = axes.AxesSetup(con, s.eps, s.data, s.seed, s.groups, real=state.real_input(s))
    explorer(setup)
    for section in axes.REST:
        st.subheader(section.label)
        st.markdown(section.intro)
        if section is axes.custom.SECTION:
            axis_boxes(s.layout, axes.custom.ticked(con))
        if section in axes.FOLDED:  # drawn once opened (the open fold reruns the page)
            fold = st.expander(axes.FOLD_LABEL, key=fold_key(section.slug), on_change="rerun")
            if fold.open:
                with fold:
                    runner.show(PAGE, section, setup, {}, state.presenter(), intro=False)
            continue
        runner.show(PAGE, section, setup, {}, state.presenter(), intro=False)
elif s.method == "custom":  # unticked every axis: the boxes are the way back
    st.subheader(axes.custom.SECTION.label)
    st.markdown(axes.custom.SECTION.intro)
    axis_boxes(s.layout, s.axes)
    st.markdown(axes.custom.explain_axes(s.layout, s.axes, s.centred).text)
