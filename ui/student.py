"""A student's screen of a live class: the question, their answer, the reveal.

The page's run draws the class as it is then (`page`), and a polling fragment (`poll`,
`run_every`) reads the class and this browser's answer in one database read every few
seconds. While the class is as the page drew it, the poll draws nothing else (a cheap
rerun). Once the teacher reveals the answer or moves the class on, the poll draws the new
view itself, in place of the page's (hidden, `HIDE`), within its own rerun: the page
(app.py, the sidebar, the navigation) does not run again. It used to: the poll called
st.rerun(), every student's page reran in full at once, and those runs wait their turn
(one at a time per process, ui/runs.py), so 300 students saw the answer only after 300
full runs (docs/serving.md). The teacher's screen is ui/projector.py; the class's state
and calls are ui/practice.py's.
"""

from __future__ import annotations

import streamlit as st

from normviz import practice
from normviz.classroom import ClassError, ClassInfo, ClassUnavailable
from normviz.practice import live
from ui import comeback, identity, route
from ui import practice as ui
from ui.safe import md_text

_DRAWN = "pr_drawn"  # (code, question, revealed) as the page's last run drew the class
_SEEN = "pr_seen"  # (ClassInfo, answer) as the poll last read them: kept while the database fails
VIEW = "pr_view"  # the page's view's container key (its CSS class st-key-pr_view)
HIDE = f"<style>.st-key-{VIEW}{{display:none}}</style>"  # the poll's newer view replaces it


def page(info: ClassInfo) -> None:
    """At the page's top level: the class as read now, then its poll."""
    try:
        mine = ui.room().answer_of(info.code, info.question, identity.browser())
    except ClassError as e:
        st.error(md_text(e, limit=300), icon=":material/block:")
        mine = None
    st.session_state[_DRAWN] = (info.code, info.question, info.revealed)
    with st.container(key=VIEW):
        view(info, mine)
    poll(info.code)


@st.fragment(run_every=live.POLL_S)
def poll(code: str) -> None:
    """Every few seconds: the class again; a newer state than the page's is drawn here."""
    comeback.beat()  # the page comes back by itself if this fragment's session is lost
    if route.full_run():  # the page above has just drawn the class
        return
    try:
        info, mine = ui.room().seen_by(code, identity.browser())
    except ClassUnavailable as e:  # keep the last view, and say why it waits
        st.caption(md_text(e, limit=300))
        if (seen := st.session_state.get(_SEEN)) is None or seen[0].code != code:
            return
        info, mine = seen
    except ClassError:  # ended or expired: the page says so (ui.practice.join)
        st.rerun()
        return
    st.session_state[_SEEN] = (info, mine)
    if (info.code, info.question, info.revealed) != st.session_state.get(_DRAWN):
        st.html(HIDE)
        view(info, mine, live_=True)


def view(info: ClassInfo, mine: str | None, live_: bool = False) -> None:
    """The class's question; before the reveal the answer widgets, after it the grade.
    Drawn by the poll (`live_`), its widgets have keys of their own (the page's are hidden)."""
    ex = ui.class_exercise(info.kind, info.seed)
    st.info(live.STUDENT, icon=":material/groups:")
    tag = f"{info.code}-{info.question}" + ("-live" if live_ else "")
    st.caption(f"Question {info.question}")
    ui.question(ex)
    if info.revealed:
        verdict = practice.grade(ex, mine) if mine else None
        ui.grid(ex, tag, verdict, mine or "")
        ui.table(ex)
        if mine is None:
            st.warning(live.NOT_ANSWERED, icon=":material/schedule:")
        ui.feedback(ex, verdict)
        return
    ui.grid(ex, tag, None)
    ui.table(ex)
    answer = ui.answer_input(ex, tag)
    key = "pr_submit_live" if live_ else "pr_submit"
    if st.button("Send my answer", key=key, type="primary", disabled=answer is None):
        mine = ui.submit(info, ex, answer) or mine
        if live_:
            st.session_state[_SEEN] = (info, mine)
    if mine is not None:
        st.success(live.SENT, icon=":material/send:")
