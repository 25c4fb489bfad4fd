"""Test-only: a server that starts slowly on every run, as a loaded one does.

On PYTHONPATH of a server started by tests/test_practice_browser.py (never of the app).
A fragment run (a live class's poll) waits before it applies the widget values the
browser sent with it, and a full run waits after applying them: the window in which a
second run of the same session could start and write the session's widget values.
"""

from __future__ import annotations

import time

from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx
from streamlit.runtime.state.session_state import SessionState

FRAGMENT_WAIT_S = 1.8  # of the poll's 2 s
FULL_RUN_WAIT_S = 2.0

_apply = SessionState.on_script_will_rerun


def _slow_apply(self, fresh_widget_states, **kw):  # type: ignore[no-untyped-def]
    ctx = get_script_run_ctx()
    fragment = bool(ctx is not None and ctx.fragment_ids_this_run)
    if fragment:
        time.sleep(FRAGMENT_WAIT_S)
    out = _apply(self, fresh_widget_states, **kw)
    if not fragment:
        time.sleep(FULL_RUN_WAIT_S)
    return out


SessionState.on_script_will_rerun = _slow_apply
