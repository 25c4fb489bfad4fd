"""The step-through player: precomputed frames played, paused and stepped in the browser.

A Streamlit Components v2 component (inline HTML, CSS and JS: ui/stepper.css,
ui/stepper.js; no iframe, no build step). It receives a `normviz.frames.Frames` once
per server run and plays it client-side: buttons, a scrubber, Space to play or pause,
←/→ to step, a visible focus ring, ARIA labels, and a live region that announces each
step a student stops at in the words of `Frames.text(k)`. Python hears only where the
student stopped (a pause, a step, a scrub, after `REPORT_DELAY_MS` of stillness),
never each frame of a play; inside an `st.fragment` that reruns the fragment alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import streamlit as st

from normviz.frames import Frames

_HERE = Path(__file__).parent
REPORT_DELAY_MS = 400  # stillness before a stop reaches the server (a held arrow key: once)

_player = st.components.v2.component(
    "normviz.stepper",
    html='<div class="nv-stepper"></div>',
    css=(_HERE / "stepper.css").read_text(encoding="utf-8"),
    js=(_HERE / "stepper.js").read_text(encoding="utf-8"),
)


def _noop() -> None:
    """A stop only needs to be stored (the component's state), not acted on here."""


def play(key: str, frames: Frames, start: int = 0, presenter: bool = False) -> int:
    """Draw the player for `frames`, opened at frame `start` (1-based; 0: the last one).

    Returns the frame the student stopped at (1-based), or `start` before they stop.
    """
    held = st.session_state.get(key)  # the state the browser last sent (a mapping), if any
    if isinstance(held, Mapping) and held.get("step") is not None:
        start = _frame(held["step"], frames, start)
    start = 0 if start <= 0 else frames.clamp(start)
    res = _player(
        key=key,
        data={
            "frames": frames.data(),
            "start": start,
            "presenter": presenter,
            "delay": REPORT_DELAY_MS,
        },
        default={"step": start},
        on_step_change=_noop,
    )
    return _frame(getattr(res, "step", start), frames, start)


def _frame(step: object, frames: Frames, fallback: int) -> int:
    """A frame number sent by the browser, clamped (0: every frame); `fallback` if not one."""
    try:
        k = int(step)  # type: ignore[call-overload]
    except (TypeError, ValueError, OverflowError):  # a crafted state
        return fallback
    return 0 if k <= 0 else frames.clamp(k)
