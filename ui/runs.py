"""Script runs take turns: one session at a time runs the page in a process.

Streamlit runs every session's script in its own thread and the threads share one GIL.
When a whole class clicks at once, sixty runs interleaved in one process all finish
near the end of the burst, and switching between them costs CPU of its own. Measured
with `python -m benchmarks.load --levels 64 --balanced 1,2` (docs/serving.md): one
process went from 0.09-0.10 CPU-s a run and a median first page load of about 7 s to
0.06 CPU-s and 2.3 s with one run at a time; two runs at a time (NORMVIZ_RUNS=2) gave
0.07 CPU-s, three 0.07 and slower clicks than one. The waiting runs are served first
come, first served (`normviz.gate`).

A run waiting for, or busy in, a heavy computation's gate (a training run, a cap-sized
section) steps out of its turn meanwhile, so it never holds up the class's light runs.
Fragment reruns (a chart click, the live class's poll) run only their fragment, not
app.py, and so do not take a turn. What is left to wait for is a light run's own work:
under 0.6 s at the default sizes and up to about 1 s at the element cap (page_times).
"""

from __future__ import annotations

import os

from normviz import gate


def _slots(text: str | None) -> int:
    """Runs of app.py at once per process (NORMVIZ_RUNS): one was fastest, measured above."""
    try:
        return max(1, int(text or 1))
    except ValueError:
        return 1


SLOTS = _slots(os.environ.get("NORMVIZ_RUNS"))
RUNS = gate.Gate("page runs", SLOTS, heavy=False)
gate.around.append(RUNS.outside)


def turn():
    """The block runs in one of the process's run slots (re-entrant in one thread)."""
    return RUNS.enter()
