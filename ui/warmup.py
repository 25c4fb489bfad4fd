"""The first import of every entry point: the heavy imports, once, one thread at a time.

On a freshly started server a class arriving at once starts many script runs in
the same second, each on its own thread, each importing torch, pandas, plotly and
the topic packages for the first time. Python locks each module while it
initializes, but two threads that each hold a half-initialized module the other
needs are a deadlock, which Python resolves by handing one of them the partial
module ("partially initialized module 'pandas' has no attribute ..."). So app.py
and every page import this module first, before anything heavy: the first thread
runs the body below, which imports all of it in one fixed order; every other
thread waits on this module's own import lock while holding no other, and finds
everything complete. After the first run it costs nothing (already in
sys.modules).

It also sets the process up for a class: torch on one thread per request (script
runs share the cores; tiny tensors run far slower when torch's threads contend),
glibc's allocator returning large blocks to the system when they are freed
(see `release_memory`), pandas keeping text columns as Python strings
(`STRING_STORAGE`), and the objects of these imports out of the garbage collector's
full passes (`gc.freeze`, see `_freeze`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import importlib
import threading

_LOCK = threading.RLock()  # held for the body: a re-entrant import from it passes

# glibc mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 1 << 20  # blocks of 1 MB and more are mmap'ed: freed = returned
# pandas 3 stores a text column in Arrow by default. Every table of the app is an
# st.table of a Styler (ui.runner.table), and Streamlit draws one by copying the frame
# as text (`astype(str)`) and writing each column's display strings into the copy:
# writing into Arrow-backed strings was most of a table's cost, about 5 ms a table of a
# few rows (benchmarks/run_cost.py, docs/serving.md). Python-backed strings hold the
# same values; the app's tables are a few rows, where Arrow's speed-ups do not show.
STRING_STORAGE = "python"

HEAVY = (
    "numpy",
    "pandas",
    "plotly.graph_objects",
    "plotly.subplots",
    "torch",
    "torch.nn",
    "torch.nn.functional",
    # torch's first optimizer.step() imports torch._dynamo (seconds on a small
    # machine): here, not in a student's first click, and not in a thread of its own
    "torch._dynamo",
    "normviz",
)


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        lib = ctypes.CDLL(name)
        lib.mallopt  # noqa: B018  (glibc only)
        lib.malloc_trim  # noqa: B018
    except (OSError, AttributeError, TypeError):
        return None
    return lib


_LIBC = _libc()


def _tune_allocator() -> None:
    """A fixed mmap threshold: glibc's default one grows to the largest block freed
    (up to 32 MB), after which cap-sized tensors come from the heap and their memory
    stays with the process after a burst."""
    if _LIBC is not None:
        _LIBC.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
        _LIBC.mallopt(_M_TRIM_THRESHOLD, 8 * MMAP_THRESHOLD)


def release_memory() -> None:
    """Give freed heap memory back to the system (glibc's malloc_trim); no-op elsewhere."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def _freeze() -> None:
    """Move every object alive now (the imports: torch, pandas, plotly, streamlit, the
    topics: about 420,000 tracked objects) to the collector's permanent generation.

    A full (generation 2) collection walks every tracked object, and while it runs it
    holds the GIL: every session of the process stops. In a 100-student class on the
    loaded 2-core machine (load average 15-20), each process ran one every 20-30 s,
    of 0.6-1.8 s each with about 470,000 objects to walk: the polls in flight stood
    still, then ended together. Frozen here, about 420,000 of them are left out and a
    full pass took 70-240 ms (docs/serving.md, "A live class in a 300-seat hall").
    Frozen objects are never collected, so the cycles among them are collected first.
    """
    gc.collect()
    gc.freeze()


def _topics() -> tuple[str, ...]:
    from ui.pages import PAGES

    return tuple(p.topic for p in PAGES)


def _import_all() -> None:
    for name in HEAVY:
        importlib.import_module(name)
    for name in _topics():
        importlib.import_module(name)
    # the UI modules every page uses (they import streamlit's runtime pieces)
    for name in (
        "ui.params",
        "ui.route",
        "ui.state",
        "ui.sidebar",
        "ui.runner",
        "ui.inputs",
        "ui.home",
    ):
        importlib.import_module(name)


with _LOCK:
    _tune_allocator()
    _import_all()
    import torch

    torch.set_num_threads(1)
    import pandas as pd

    pd.set_option("mode.string_storage", STRING_STORAGE)
    from normviz import gate

    gate.on_idle.append(release_memory)  # after a burst of heavy work, memory goes back
    _freeze()
