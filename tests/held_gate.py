"""A computation started while another holds its gate: what it says, and what it returns.

Shared by the sections that take a one-slot gate (tests/test_residual.py's init sweep,
tests/test_batchnorm_renorm.py's Batch Renorm run): a thread holds the gate until the
section reports "Queued", so the section must wait, say so, and then run.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from normviz.gate import Gate

T = TypeVar("T")
Progress = Callable[[float, str], None]


def run_behind_held(gate: Gate, run: Callable[[Progress], T]) -> tuple[T, list[str]]:
    """Hold `gate` in another thread, call `run(progress)`; (its result, what it said).
    The holder lets go once the run says it is queued (bounded: 60 s at most)."""
    queued, held = threading.Event(), threading.Event()

    def other() -> None:
        with gate.enter():
            held.set()
            queued.wait(60)

    said: list[str] = []

    def progress(fraction: float, text: str) -> None:
        said.append(text)
        if text.startswith("Queued"):
            queued.set()

    t = threading.Thread(target=other)
    t.start()
    held.wait(30)
    try:
        return run(progress), said
    finally:
        t.join(60)
        assert queued.is_set(), "the run never said it was queued"
