"""Process loss: a moved student's first click is not lost.

When the process serving a student dies, the browser reconnects to another
process, which starts a new session; the student's next click reaches it as that
session's first run, carrying every widget value of the view (the changed one
included). Those values win over the URL's (ui.state.init_from_url). Here a second
AppTest is the new process: its first run gets the widget states of the first one
after a click, and must show the clicked view.
"""

from __future__ import annotations

import keys
from conftest import run_app, url_value
from streamlit.testing.v1 import AppTest

from benchmarks.common import app_test

LINK = {"layout": "BTC", "B": "4", "T": "6", "C": "8", "method": "layer", "seed": "5"}


def _moved(at: AppTest, page: str, query: dict[str, str]) -> AppTest:
    """A new session (another process) whose first run carries `at`'s widget values."""
    states = at._tree.get_widget_states()
    fresh = app_test(page, query, timeout=60)  # the same entry as run_app's: same widget ids
    fresh._run(widget_state=states)
    return fresh


def test_first_click_after_a_move_wins_over_the_url() -> None:
    at = run_app("distributions", LINK)
    at.number_input(key="seed").set_value(77)
    at.selectbox(key="method").set_value("rms")
    at.number_input(key="B").set_value(3)
    moved = _moved(at, "distributions", LINK)  # the URL still says seed=5, layer, B=4
    assert not moved.exception
    assert moved.session_state["seed"] == 77
    assert moved.session_state["method"] == "rms"
    assert moved.session_state["B"] == 3
    assert [url_value(moved, k) for k in ("seed", "method", "B")] == ["77", "rms", "3"]


def test_page_widget_click_after_a_move_wins_over_the_url() -> None:
    query = {**LINK, "tr_depth": "6", "tr_steps": "20"}
    at = run_app("residual", query)
    at.slider(key=keys.key("residual", "tr_depth")).set_value(9)
    at.select_slider(key=keys.key("residual", "tr_width")).set_value(16)
    moved = _moved(at, "residual", query)
    assert not moved.exception
    assert moved.slider(key=keys.key("residual", "tr_depth")).value == 9
    assert moved.select_slider(key=keys.key("residual", "tr_width")).value == 16
    # untouched: as the URL (and the view)
    assert moved.slider(key=keys.key("residual", "tr_steps")).value == 20
    assert url_value(moved, "tr_depth") == "9"


def test_a_new_visit_still_follows_the_url() -> None:
    at = run_app("distributions", {**LINK, "seed": "11"})
    assert at.session_state["seed"] == 11 and at.session_state["method"] == "layer"
