"""BatchNorm lab: training vs evaluation, tiny batches, running statistics (/batchnorm)."""

from __future__ import annotations

from typing import Any

import streamlit as st

import ui.warmup  # noqa: F401  (first: the heavy imports, one thread at a time)
from normviz import batchnorm as bn
from normviz.knobs import Knob
from normviz.sections import Section
from ui import knobs, onpage, route, runner, state, stepper
from ui import params as ns

route.entry()  # a page Streamlit ran on its own reruns through app.py (ui.route)

PAGE = "batchnorm"
TAB_KEY = "bn_tab"
RULE_KEY = "_bn_momentum_rule"  # which convention the momentum number is written in
SNAP_KEY = "_bn_batch_snapped"  # (note, batch size) after a link's batch size was snapped


def _on_convention() -> None:
    """Switching PyTorch ↔ Keras rewrites the momentum so the running mean stays the same."""
    new = st.session_state[state.key(PAGE, "convention")]
    rule, momentum = st.session_state.get(RULE_KEY, "pytorch"), state.key(PAGE, "momentum")
    if new in ("pytorch", "keras") and new != rule:
        m = float(st.session_state[momentum])
        st.session_state[momentum] = bn.convert_momentum(m, rule, new)
        st.session_state[RULE_KEY] = new


def controls(s: ns.Settings) -> bn.LabSetup:
    """Batch size, steps, update rule and momentum: they change every section."""
    if RULE_KEY not in st.session_state:
        conv = state.value(state.key(PAGE, "convention"))
        st.session_state[RULE_KEY] = conv if conv in ("pytorch", "keras") else "pytorch"
    cols = st.columns([1, 1, 1.3, 1])
    with cols[0]:
        b = _batch_size()
    with cols[1]:
        steps = _widget(st.slider, "steps")
    with cols[2]:
        conv = _widget(
            st.radio, "convention", format_func=bn.CONVENTION_LABELS.get, on_change=_on_convention
        )
    with cols[3]:
        momentum = _widget(
            st.slider, "momentum", step=0.001, format="%.3f", disabled=conv == "cumulative"
        )
    setup = bn.LabSetup(
        layout=s.layout,
        sample_shape=s.shape[1:],
        data=s.data,
        seed=s.seed,
        eps=s.eps,
        groups=s.groups,
        batch_size=int(b),
        steps=int(steps),
        momentum=float(momentum),
        convention=str(conv),
    )
    st.caption(bn.setup_caption(setup))
    note, snapped = st.session_state.get(SNAP_KEY, ("", 0))
    if note and snapped == setup.batch_size:  # shown until the batch size changes
        st.info(note, icon=":material/straighten:")
    return setup


def _batch_size() -> int:
    """Batch size on a log scale (powers of two); a link's other value snaps to the nearest."""
    key = state.key(PAGE, "batch_size")
    asked = int(state.value(key))
    if asked not in bn.BATCH_SIZES:
        st.session_state[key] = used = bn.snap_batch(asked)
        st.session_state[SNAP_KEY] = (bn.snap_note(asked, used), used)
    return int(_widget(st.select_slider, "batch_size", options=list(bn.BATCH_SIZES)))


def _widget(fn: Any, name: str, **kw: Any) -> Any:
    """The widget of one of the page's knobs, labelled and explained by the package."""
    k = next(k for k in bn.KNOBS if k.name == name)
    return state.widget(fn, name, k.label, PAGE, help=bn.HELP.get(name), **kw)


def _channel(C: int, k: Knob) -> int:
    """Which channel a plot follows (in the URL; one past the sidebar's C: channel 0)."""
    key = state.key(PAGE, k.name)
    if int(state.value(key)) >= C:
        st.session_state[key] = 0
    return int(_widget(st.columns([1, 4])[0].number_input, k.name, max_value=C - 1, step=1))


def _step(section: Section, setup: bn.LabSetup, values: dict, channel: int, presenter: bool) -> int:
    """The batch a step view stops at: the browser's player (ui.stepper); 0: every batch."""
    name = bn.STEP_VIEWS[section.slug].name
    res = runner.result(PAGE, section, setup, values)
    if res is None:
        return 0
    frames = bn.STEP_FRAMES[section.slug](res, channel)
    key = state.key(PAGE, name)
    st.session_state[key] = stepper.play(f"{name}_player", frames, state.value(key), presenter)
    if not route.full_run():  # a fragment's own rerun: app.py's end-of-run write will not come
        state.write_url(PAGE)
    return int(st.session_state[key])


def _knobs(section: Section) -> dict[str, Any]:
    """A section's own widgets, side by side; their values."""
    cols = st.columns(len(section.knobs)) if section.knobs else []
    return {
        k.name: knobs.draw(k, PAGE, bn, col) for k, col in zip(section.knobs, cols, strict=True)
    }


@st.fragment
def show(section: Section, setup: bn.LabSetup, presenter: bool) -> None:
    """One section with its own widgets (they rerun only this)."""
    st.markdown(section.intro)
    values = _knobs(section)
    view: dict[str, Any] = {}
    if section.slug in bn.CHANNEL_VIEWS:
        view["channel"] = _channel(setup.C, bn.CHANNEL_VIEWS[section.slug])
    if section.slug in bn.STEP_VIEWS:
        view["step"] = _step(section, setup, values, view.get("channel", 0), presenter)
    res = runner.show(PAGE, section, setup, values, presenter, intro=False, view=view)
    for part in bn.PARTS.get(section.slug, ()):
        part_setup = bn.part_setup(part, setup, res)
        if part_setup is not None:
            st.subheader(part.label)
            st.markdown(part.intro)
            runner.show(PAGE, part, part_setup, _knobs(part), presenter, intro=False)


st.title(bn.TITLE)
onpage.intro(bn.INTRO)
params = state.page_params(PAGE)
lab = controls(state.settings())
if runner.guard(lambda: bn.check(lab)):  # no st.stop: app.py writes the URL after the page
    labels = {s.slug: s.label for s in bn.SECTIONS}
    # the first tab comes from the URL; `default` must then stay fixed, or the tabs would reset
    first = st.session_state.setdefault("_bn_first_tab", labels[params["sim"]])
    tabs = st.tabs(list(labels.values()), key=TAB_KEY, on_change="rerun", default=first)
    open_label = st.session_state.get(TAB_KEY, first)
    for section, tab in zip(bn.SECTIONS, tabs, strict=True):
        if section.label == open_label:
            st.session_state[state.key(PAGE, "sim")] = section.slug
            with tab:
                show(section, lab, state.presenter())
