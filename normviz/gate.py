"""Process-wide gates: at most a few heavy computations run at once, the rest queue.

A Streamlit process runs every session's script in its own thread. Thirty sessions
opening a cap-sized page at once would each hold their tensors at the same moment
(measured: 0.45 → 5.6 GB); four students training the largest residual stack at
once would share the cores and all wait the sum. A gate lets `slots` computations
in at a time; the others wait in line, told so through their progress callback
(which also lets Streamlit stop a waiting run that the student left). The memory of
a burst is then about `slots` times one computation's, whatever the class size.

Re-entrant per thread: a computation already inside a gate passes through it again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

POLL_S = 0.5  # how often a queued computation reports (and can be stopped)
# Called (no arguments) when a gate empties: nothing running in it, nobody waiting.
# The UI registers the allocator's trim here (ui/warmup.py): the memory of a burst
# goes back to the system once the burst is over, not after every computation.
on_idle: list[Callable[[], None]] = []


class Gate:
    """At most `slots` computations at once in this process; the rest wait their turn."""

    def __init__(self, name: str, slots: int) -> None:
        self.name = name
        self.slots = slots
        self._sem = threading.BoundedSemaphore(slots)
        self._lock = threading.Lock()
        self._waiting = 0
        self._mine = threading.local()
        self._inside = 0

    @property
    def waiting(self) -> int:
        """How many computations are queued right now."""
        return self._waiting

    @contextmanager
    def holding(self) -> Iterator[None]:
        """A slot this thread takes inside the block is kept until the block ends.

        A page wraps its sections in this: the first section that computes waits for a
        slot, the following ones run in it (their shared input stays in the UI's cache
        meanwhile), and a rerun whose sections are all cached never waits.
        """
        self._mine.hold = getattr(self._mine, "hold", 0) + 1
        try:
            yield
        finally:
            self._mine.hold -= 1
            if not self._mine.hold and getattr(self._mine, "kept", False):
                self._mine.kept = False
                self._release()

    @contextmanager
    def enter(self, progress: Callable[[float, str], None] | None = None) -> Iterator[None]:
        """Run the block once a slot is free; while queued, `progress(0, "queued…")`."""
        if getattr(self._mine, "depth", 0) or getattr(self._mine, "kept", False):
            self._mine.depth += 1
            try:
                yield
            finally:
                self._mine.depth -= 1
            return
        if not self._sem.acquire(blocking=False):
            with self._lock:
                self._waiting += 1
            try:
                while not self._sem.acquire(timeout=POLL_S):
                    if progress is not None:
                        ahead = max(0, self._waiting - 1)
                        progress(0.0, self.queued_text(ahead))
            finally:
                with self._lock:
                    self._waiting -= 1
        self._mine.depth = 1
        with self._lock:
            self._inside += 1
        try:
            yield
        finally:
            self._mine.depth = 0
            if getattr(self._mine, "hold", 0):
                self._mine.kept = True  # released when the holding block ends
            else:
                self._release()

    def _release(self) -> None:
        with self._lock:
            self._inside -= 1
            idle = self._inside == 0 and self._waiting == 0
        self._sem.release()
        if idle:
            for hook in on_idle:
                hook()

    def queued_text(self, ahead: int) -> str:
        others = f"; {ahead} more waiting" if ahead else ""
        return (
            f"Queued: {self.slots} {self.name} already running on this server{others}. "
            "Yours starts when one finishes."
        )
