"""Drawn once seen: a part of a page far below the fold is drawn when it scrolls into view.

A first load then sends only what the first screen shows: every Plotly chart costs the
browser a draw (and the first one Plotly's 4.6 MB script), a code block the highlighter,
st.latex KaTeX (docs/serving.md, "First draw"). Until it is seen, the part is a
placeholder about its height: a tiny Streamlit Components v2 element (ui/lazy/lazy.js,
no iframe) whose IntersectionObserver sends the trigger "seen" when it comes within
`MARGIN_PX` of the window, or when its button is pressed (keyboard, print, a browser
without the observer). The part's fragment then reruns alone and draws it; from then on
it is drawn on every run of the session (`seen_key` in the session state). AppTest
cannot scroll: its runs set `ALL`, which draws every part at once (benchmarks.common).

    lazy.when_seen("dist_eps", functools.partial(draw_eps, setup), label="ε on constant data")
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import streamlit as st

_HERE = Path(__file__).with_name("lazy")
NAME = "normviz.lazy"
PREFIX = "nvlazy_"  # the placeholder's key: its element carries the class st-key-nvlazy_…
MARGIN_PX = 120  # drawn this far before it enters the window (scrolling a little ahead)
HEIGHT_PX = 420  # a placeholder's default height: about one chart's
TEXT = "Drawn when you scroll here."
BUTTON = "Draw it now"

_WATCH = st.components.v2.component(
    NAME,
    html="",
    css=(_HERE / "lazy.css").read_text(encoding="utf-8"),
    js=(_HERE / "lazy.js").read_text(encoding="utf-8"),
)


ALL = f"{PREFIX}all"  # set in the session state: every part is drawn at once (AppTest)


def seen_key(name: str) -> str:
    """The session key that says part `name` was seen (then it is drawn on every run)."""
    return f"{PREFIX}seen_{name}"


def _mark(name: str) -> None:
    st.session_state[seen_key(name)] = True


def when_seen(name: str, draw: Callable[[], object], label: str, height: int = HEIGHT_PX) -> None:
    """Call `draw()` here once the reader scrolls to it; until then a placeholder
    `height` px tall, labelled `label` (what will be drawn) for screen readers."""
    _part(name, draw, label, height)


@st.fragment  # seen: this part reruns alone and draws
def _part(name: str, draw: Callable[[], object], label: str, height: int) -> None:
    if st.session_state.get(ALL) or st.session_state.get(seen_key(name)):
        draw()
        return
    _WATCH(
        key=PREFIX + name,
        data={
            "height": height,
            "margin": MARGIN_PX,
            "label": f"{label}: {TEXT}",
            "text": TEXT,
            "button": BUTTON,
        },
        on_seen_change=functools.partial(_mark, name),
        width="stretch",
        height="content",
    )
