"""Distributions: what each method does to the values, on generated or uploaded data."""

from __future__ import annotations

import functools
from typing import Any

import streamlit as st

import ui.warmup  # noqa: F401  (first: the heavy imports, one thread at a time)
from normviz import METHODS, elementwise
from normviz import distributions as dist
from normviz.distributions import downloads
from normviz.sections import Section
from ui import inputs, knobs, onpage, route, runner, state
from ui.safe import md_text

route.entry()  # a page Streamlit ran on its own reruns through app.py (ui.route)

PAGE = "distributions"  # the URL path: its own URL parameters are distributions.KNOBS


def knob_widgets(section: Section) -> dict[str, Any]:
    """One widget per knob of `section`, side by side; their values (also in the URL)."""
    if not section.knobs:
        return {}
    cols = st.columns(len(section.knobs)) if len(section.knobs) > 1 else [st.container()]
    return {
        k.name: knobs.draw(k, PAGE, dist, col) for col, k in zip(cols, section.knobs, strict=True)
    }


def show(section: Section, setup: dist.Setup, presenter: bool) -> Any:
    """Heading, intro, knobs, then the runner's result, figure, table and notes."""
    st.subheader(dist.title(section, setup))
    st.markdown(section.intro)
    values = knob_widgets(section)
    return runner.show(PAGE, section, setup, values, presenter, intro=False)


@st.fragment
def show_alone(section: Section, setup: dist.Setup, presenter: bool) -> None:
    """A section with its own knobs: moving them reruns this section only."""
    show(section, setup, presenter)


def offer_downloads(res: downloads.Downloads) -> None:
    """The output and the table, each built only when its button is clicked."""
    build = (
        functools.partial(downloads.output_npy, res),
        functools.partial(downloads.table_csv, res),
    )
    cols = st.columns(2)
    for col, (label, name, mime), data, key in zip(
        cols, res.files(), build, ("dist_dl_npy", "dist_dl_csv"), strict=True
    ):
        col.download_button(
            label,
            data=data,
            file_name=name,
            mime=mime,
            on_click="ignore",
            icon=":material/download:",
            key=key,
        )


st.title("Distributions")
onpage.intro(dist.INTRO)
onpage.method()  # presenter mode: the method above the figures (the sidebar is folded)
state.page_params(PAGE)  # γ/β and the ε section's data, from a link (warns about bad values)
shared = state.settings()
presenter = state.presenter()
upload = inputs.uploader(dist.UPLOAD_HELP, "dist")
s = inputs.settings_for(shared, upload[1] if upload else None)
if upload is not None:
    user = upload[1]
    note = dist.upload_note(md_text(user.key), user.source_shape, user.shape_text)
    st.info(note, icon=":material/upload_file:")
    source: dist.Source = upload[0]
elif (real := state.real_input(s)) is not None:
    source = real  # what it is: the note above the page (ui.realdata)
else:
    source = inputs.Seeded(s.data, s.layout, s.shape, s.seed)
    st.caption(dist.input_caption(source))

if elementwise.applies(s.method):  # no statistics (DyT): its own before/after, no contract
    if runner.guard(s.check_size):
        setup = elementwise.ElementwiseSetup(s.method, s.layout, source, s.groups, s.eps)
        st.subheader(dist.squash.SECTION.label.format(method=METHODS[s.method].label))
        runner.show(PAGE, dist.squash.SECTION, setup, {}, presenter)
elif state.require(s):  # before generating anything: the shape may be over the cap
    whole = dist.Setup(source, s.contract(), s.eps, s.groups, s.seed)
    with dist.GATE.holding():  # at the cap: one queue slot for the whole page, not per section
        for section in dist.sections_for(source):
            setup = dist.setup_for(section, whole)
            if section is dist.PART[0] and (note := dist.part_note(whole, setup)):
                st.info(note, icon=":material/content_cut:")
            if section.knobs:
                show_alone(section, setup, presenter)
                continue
            res = show(section, setup, presenter)
            if res is not None and section is downloads.SECTION:
                offer_downloads(res)
