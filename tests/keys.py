"""Page knobs' widget and session keys in tests, through the app's one helper.

A page knob's widget and session key is page-scoped (`ui.state.key(page, name)`,
docs/architecture.md "Keys"), its URL name bare; a shared setting's key is its URL
name. A test says `at.slider(key=keys.key("residual", "depth"))`,
`keys.knob(at, "batchnorm", "sim")`, or in Chromium `p.locator(keys.css("axes",
"partition"))`.
"""

from __future__ import annotations

import re
from typing import Any

from streamlit.testing.v1 import AppTest

from ui import state
from ui.state import key

__all__ = ["css", "key", "knob", "setting"]


def _value(at: AppTest, k: str) -> Any:
    """The value as the page uses it (ui.state.value): its widget's or session's, else the
    link's (a knob whose widget this run did not draw); a list as a tuple."""
    v = at.session_state[k] if k in at.session_state else at.session_state[state.LINK][k]
    return tuple(v) if isinstance(v, list) else v


def knob(at: AppTest, page: str, name: str) -> Any:
    """Page `page`'s knob `name` as the page uses it."""
    return _value(at, key(page, name))


def setting(at: AppTest, name: str) -> Any:
    """Shared setting `name` (its key is its URL name) as the pages use it."""
    return _value(at, name)


def css(page: str | None, name: str) -> str:
    """The CSS class selector of a keyed widget's element in the browser: Streamlit writes
    `st-key-` and the key with every character outside [a-zA-Z0-9_-] as "-". `page` None:
    `name` is the whole key (a shared setting, or a widget that is no knob)."""
    k = name if page is None else key(page, name)
    return ".st-key-" + re.sub(r"[^a-zA-Z0-9_-]", "-", k.strip())
