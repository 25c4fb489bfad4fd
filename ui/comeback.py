"""A live class's page comes back by itself after its session was lost.

When the server process behind a page dies (kill -9 behind nginx) or restarts, the
browser reconnects to a new session and keeps showing the old page, asking for no
run; the new session knows none of the page's fragments, so Streamlit drops their
timed reruns (`run_every`) and the live views (ui.student.poll, ui.projector.tally) would stand
still: a student would miss the reveal. Each of those fragment runs draws a beat (a
hidden counter); a small component outside any fragment watches it in the browser
and, when it has not moved for `STALE_S` while the page is visible, sends one value,
which makes a full run: the new session draws the page and its fragments again (the
browser id cookie brings back the student's answer and the teacher's role).
"""

from __future__ import annotations

import streamlit as st

from normviz.practice import live

STALE_S = max(10.0, 4 * live.POLL_S)  # a busy server's slow poll is not a lost session
_BEAT = "pr_beat"

_JS = """
export default function (component) {
  const { data, setTriggerValue } = component;
  const beat = () => {
    const el = document.querySelector("span.normviz-beat");
    return el ? el.getAttribute("data-n") : null;
  };
  let seen = beat();
  let since = Date.now();
  const timer = setInterval(() => {
    const now = Date.now();
    const n = beat();
    if (n !== seen || document.visibilityState !== "visible") {
      seen = n;
      since = now;
    } else if (now - since > data.stale_ms) {
      since = now;  // at most once per stale period
      setTriggerValue("stale", now);
    }
  }, 1000);
  return () => clearInterval(timer);
}
"""
_watch = st.components.v2.component("normviz_live_watch", js=_JS)


def beat() -> None:
    """In a live view's fragment: show the browser that this session's polls still run."""
    n = st.session_state[_BEAT] = st.session_state.get(_BEAT, 0) + 1
    st.html(f'<span class="normviz-beat" data-n="{int(n)}" hidden></span>')


def watch() -> None:
    """Once per live-class page, outside every fragment: rerun the page if beats stop."""
    _watch(key="pr_watch", data={"stale_ms": int(STALE_S * 1000)}, on_stale_change=lambda: None)
