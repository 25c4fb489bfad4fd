"""Practice: exercises graded by the app, and a live class that answers together."""

from __future__ import annotations

import streamlit as st

import ui.warmup  # first: the heavy imports, one thread at a time
from normviz import practice
from ui import practice as ui
from ui import projector, route, state, student

route.entry()  # a page Streamlit ran on its own reruns through app.py (ui.route)

PAGE = "practice"  # the URL path; its knobs are practice.KNOBS (ui.params.PAGE_PARAMS[PAGE])
LABELS = {s.slug: s.label for s in practice.SECTIONS}


def solo(kind: str, seed: int) -> None:
    """One exercise: answer, check, read why, next."""
    ex = ui.exercise(kind, seed)
    if ex is None:
        return
    tag = f"{kind}-{seed}"
    done = ui.checked(tag)
    verdict = practice.grade(ex, done[0]) if done else None
    ui.question(ex)
    ui.start_button(kind, seed)
    ui.grid(ex, tag, verdict, done[0] if done else None)
    ui.table(ex)
    answer = ui.answer_input(ex, tag, disabled=done is not None)
    if done is None:
        if st.button("Check", key="pr_check", type="primary", disabled=answer is None):
            ui.check(ex, tag, answer)
            st.rerun()
    else:
        ui.feedback(ex, verdict)
    st.button(
        "Next exercise",
        key="pr_next",
        icon=":material/arrow_forward:",
        on_click=ui.next_seed,
        args=(seed,),
    )
    st.caption(ui.score())
    ui.teach_form()


head = st.container()  # the title, above a link's message, except on the projected screen
knobs = ui.params()
info = ui.join(str(knobs["class"]))
teaching = info is not None and ui.teaches(info.code)
if not teaching:  # the projector's screen keeps its height for the class (ui.projector)
    head.title("Practice")
ui.errors()
if info is not None:  # the class's exercise, also in the URL (not the solo default)
    st.session_state[ui.KIND] = info.kind
if info is None:
    kind = state.widget(
        st.radio, "kind", "Exercise", PAGE, horizontal=True, format_func=LABELS.__getitem__
    )
    solo(kind, state.settings().seed)
elif teaching:
    projector.teacher(info)
else:
    student.page(info)
