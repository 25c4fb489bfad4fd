"""The app's navigation, and how every full run gets there through app.py.

Streamlit's legacy pages-folder mode runs `pages/<page>.py` on its own, without
app.py (no page config, no shared sidebar), while a `pages/` folder sits beside
app.py and no session has called `st.navigation` yet: on a freshly started
server's first runs, and under AppTest (which resets that mode before every run).
Streamlit documents the way out: "as soon as any session of your app executes the
st.navigation command, your app will ignore the pages/ directory (across all
sessions)". So a page starts with `entry()`: in a run that did not come through
app.py it calls `st.navigation` with the app's own pages and reruns, and the
rerun goes through app.py. No Streamlit internal is read or written. (A startup
hook on `st.App`'s lifespan, which app.py is served by, runs before any session,
but it has no public way to end that mode either: it could only write the same
internal flag.)

app.py marks the runs it drives (`through_app`, a thread-local: a session's
script runs on its own script thread). A fragment's own rerun runs neither app.py
nor the page's top level, so it never reaches `entry()` and never reroutes: only
page-level code calls it. `full_run()` tells a fragment rerun apart (the URL is
then written by the widget that changed, see ui.state.widget).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import streamlit as st

from ui.pages import available

RUN_LOG = "NORMVIZ_RUN_LOG"  # a file: app.py appends one line per run it drives (tests)
_run = threading.local()


def app_pages() -> dict[str, list[st.Page]]:
    """The navigation app.py shows: Home, then every page file, by section."""
    from ui import home  # here: ui.home imports ui.state, which imports this module

    sections: dict[str, list[st.Page]] = {
        "Learn": [st.Page(home.render, title="Home", icon=":material/home:", default=True)]
    }
    for info in available():
        sections.setdefault(info.section, []).append(
            st.Page(str(info.file), title=info.title, icon=info.icon, url_path=info.path)
        )
    return sections


@contextmanager
def through_app(page: str) -> Iterator[None]:
    """Mark the run inside this block as driven by app.py (on page `page`)."""
    log = os.environ.get(RUN_LOG)
    if log:  # the fragment browser test counts app.py's runs here
        with Path(log).open("a") as f:
            f.write(f"app {page}\n")
    _run.active = True
    try:
        yield
    finally:
        _run.active = False


def full_run() -> bool:
    """Is this run one app.py drives (not a fragment's own rerun)?"""
    return bool(getattr(_run, "active", False))


def entry() -> None:
    """A page's first call: reroute through app.py when Streamlit ran the page on its own.

    Call it at a page's top level only, never inside a fragment (see the module's
    docstring). `st.navigation` here only ends the pages-folder mode for every session;
    its page is not run: the rerun runs app.py, which navigates to this page.
    """
    if not full_run():
        st.navigation(app_pages(), position="hidden")
        st.rerun()
