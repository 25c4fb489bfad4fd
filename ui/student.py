"""A student's screen of a live class: the question, their answer, the reveal.

The whole screen is one fragment that polls (`run_every`): each of its reruns reads the
class and this browser's answer in one database read and draws the view again, so the
teacher's reveal and the next question arrive within the poll's own rerun. The page
(app.py, the sidebar, the navigation) does not run again for them: a reveal used to
make every student's page rerun in full at once, and those runs wait their turn (one at
a time per process, ui/runs.py), so 300 students saw the answer only after 300 full
runs (docs/serving.md). Picking and sending an answer rerun this fragment alone too.
The teacher's screen is ui/projector.py; the class's state and calls ui/practice.py's.
"""

from __future__ import annotations

import streamlit as st

from normviz import practice
from normviz.classroom import ClassError, ClassInfo, ClassUnavailable
from normviz.practice import live
from ui import comeback, identity
from ui import practice as ui
from ui.safe import md_text

_SEEN = "pr_seen"  # the class as this session last read it: drawn while the database fails


@st.fragment(run_every=live.POLL_S)
def student(code: str) -> None:
    """The student's view of class `code`, redrawn from the database every poll."""
    comeback.beat()  # the page comes back by itself if this fragment's session is lost
    try:
        info, mine = ui.room().seen_by(code, identity.browser())
    except ClassUnavailable as e:  # keep the last view (and its widgets), say why it waits
        st.caption(md_text(e, limit=300))
        seen = st.session_state.get(_SEEN)
        if seen is None or seen[0].code != code:
            return
        info, mine = seen
    except ClassError:  # ended or expired: the page says so (ui.practice.join)
        st.rerun()
        return
    st.session_state[_SEEN] = (info, mine)
    view(info, mine)


def view(info: ClassInfo, mine: str | None) -> None:
    """The class's question; before the reveal the answer widgets, after it the grade."""
    ex = ui.class_exercise(info.kind, info.seed)
    st.info(live.STUDENT, icon=":material/groups:")
    tag = f"{info.code}-{info.question}"
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
    if st.button("Send my answer", key="pr_submit", type="primary", disabled=answer is None):
        mine = ui.submit(info, ex, answer) or mine
        st.session_state[_SEEN] = (info, mine)
    if mine is not None:
        st.success(live.SENT, icon=":material/send:")
