"""Who asks, in a live class: this browser, its address, and the teacher key it holds.

A browser is its id cookie (ui/browser.py; `streamlit run app.py` hands one out to
every page), so a reload, a reconnect, a move to another server process or a restart
keeps it; without a cookie (AppTest, a browser that refuses cookies) this session's
own id stands in. A student is that id; a teacher is a browser the class knows
(normviz.classroom: the one that opened it, or one the teacher key was typed into), so
nothing on the screen makes a teacher. The key itself is kept by the session that
opened or resumed the class, only to be shown when the teacher asks (`held_key`).
"""

from __future__ import annotations

import streamlit as st

from normviz.classroom import new_student_id
from ui import browser as cookie

_SESSION = "pr_student"  # this session's own id, when the browser sent no cookie
_KEYS = "pr_teaching"  # class code -> teacher key, for the classes this session opened
_SEEN = "pr_taught"  # class codes this session has shown the teacher's view of


def browser() -> str:
    """The browser's id (its cookie), else this session's own."""
    if (held := cookie.browser_id()) is not None:
        return held
    if _SESSION not in st.session_state:
        st.session_state[_SESSION] = new_student_id()
    return st.session_state[_SESSION]


def address() -> str:
    """The asker's address, for the class-opening limit: the direct peer, else (behind
    nginx) the last X-Forwarded-For entry, which nginx appends."""
    fwd = (st.context.headers.get("X-Forwarded-For") or "").split(",")[-1].strip()
    return st.context.ip_address or fwd or "unknown"


def keep_key(code: str, key: str) -> None:
    st.session_state.setdefault(_KEYS, {})[code] = key


def held_key(code: str) -> str | None:
    """The class's teacher key, if this session opened or resumed the class with it."""
    return st.session_state.get(_KEYS, {}).get(code)


def first_teacher_run(code: str) -> bool:
    """True once per session and class, unless this session opened or resumed it: the
    teacher's view came back in a new session (a reload, a lost process, a restart)."""
    seen = st.session_state.setdefault(_SEEN, set())
    first = code not in seen and held_key(code) is None
    seen.add(code)
    return first
