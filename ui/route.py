"""Did this run come through app.py? Decided per run, not by Streamlit's global flag.

While Streamlit's legacy pages-folder mode is on (a `pages/` folder exists beside
app.py and no run has called `st.navigation` yet: on a freshly started server, or
under AppTest before every run), a deep link runs `pages/<page>.py` on its own,
without app.py: no page config, no shared sidebar, file names as the navigation.
That mode is one process-wide flag, so one session cannot tell from it what
happened to its own run. app.py marks the runs it drives (a thread-local: each
script run executes on its session's script thread); a page that finds no mark
switches the legacy mode off and reruns, and the rerun goes through app.py.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager

_run = threading.local()


@contextmanager
def through_app() -> Iterator[None]:
    """Mark the page run inside this block as driven by app.py."""
    _run.active = True
    try:
        yield
    finally:
        _run.active = False


def came_through_app() -> bool:
    return bool(getattr(_run, "active", False))


def ensure_entrypoint() -> None:
    """Rerun through app.py when Streamlit ran this page file on its own."""
    if not came_through_app():
        # No supported switch exists for this: st.navigation itself clears the flag
        # on its first call; a run that reached a page without it clears it here.
        PagesManager.uses_pages_directory = False
        st.rerun()
