"""Script runs take turns: at most a few of a process's sessions run the page at once.

Streamlit runs every session's script in its own thread and the threads share one GIL.
When a whole class clicks at once, sixty runs interleaved in one process all finish
near the end of the burst, and switching between them costs CPU of its own: measured
with `python -m benchmarks.load --levels 64` on one process, 0.09 to 0.10 CPU-s a run
and a first page load of about 7 s for the median student. With two runs at a time the
others wait in line, and the same burst took 0.07 to 0.08 CPU-s a run and 2 to 3 s
for the median first load (docs/serving.md).

A run waiting for, or busy in, a heavy computation's gate (`normviz.gate`: a training
run, a cap-sized section) steps out of this one meanwhile, so it never holds up the
class's light runs. Fragment reruns (a chart click, the live class's poll) run only
their fragment, not app.py, and so do not take a turn.
"""

from __future__ import annotations

import os

from normviz import gate

# Runs of app.py at once per process: two, so one run's torch code (which releases the
# GIL) overlaps another's Python; NORMVIZ_RUNS sets it.
SLOTS = max(1, int(os.environ.get("NORMVIZ_RUNS", "2")))
RUNS = gate.Gate("page runs", SLOTS, heavy=False)
gate.around.append(RUNS.outside)


def turn():
    """The block runs in one of the process's run slots (re-entrant in one thread)."""
    return RUNS.enter()
