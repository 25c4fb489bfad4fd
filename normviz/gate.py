"""Process-wide gates: at most a few heavy computations run at once, the rest queue.

A Streamlit process runs every session's script in its own thread. Thirty sessions
opening a cap-sized page at once would each hold their tensors at the same moment
(measured: 0.45 → 5.6 GB); four students training the largest residual stack at
once would share the cores and all wait the sum. A gate lets `slots` computations
in at a time; the others wait in line, told so through their progress callback
(which also lets Streamlit stop a waiting run that the student left). The memory of
a burst is then about `slots` times one computation's, whatever the class size.

Re-entrant per thread: a computation already inside a gate passes through it again.
First come, first served: a freed slot goes to the longest waiter, never to a newcomer
(with a plain semaphore, a session that clicks again at once could take the slot back
and leave the queue's head waiting for many turns).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager

POLL_S = 0.5  # how often a queued computation reports (and can be stopped)
# Called (no arguments) when a gate empties: nothing running in it, nobody waiting.
# The UI registers the allocator's trim here (ui/warmup.py): the memory of a burst
# goes back to the system once the burst is over, not after every computation.
on_idle: list[Callable[[], None]] = []
# Entered around every wait for, and stay in, a gate's slot: the UI steps out of its
# gate on script runs there (ui/runs.py), so a run queued for a heavy computation, or
# busy in one, does not keep a light run from starting.
around: list[Callable[[], AbstractContextManager[object]]] = []


class Gate:
    """At most `slots` computations at once in this process; the rest wait their turn."""

    def __init__(self, name: str, slots: int, heavy: bool = True, one: str = "") -> None:
        """`name` the computations in the plural, `one` a single one (needed when
        `slots` is 1); `heavy`: a gate for heavy computations (runs `around` and `on_idle`)."""
        self.name = name
        self.one = one or name
        self.slots = slots
        self.heavy = heavy
        self._lock = threading.Lock()
        self._free = slots
        self._queue: deque[threading.Event] = deque()  # the waiters, first come first
        self._mine = threading.local()
        self._inside = 0

    @property
    def waiting(self) -> int:
        """How many computations are queued right now."""
        return len(self._queue)

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
        with ExitStack() as stack:
            for hook in around if self.heavy else ():
                stack.enter_context(hook())
            self._acquire(progress)
            self._mine.depth = 1
            try:
                yield
            finally:
                self._mine.depth = 0
                if getattr(self._mine, "hold", 0):
                    self._mine.kept = True  # released when the holding block ends
                else:
                    self._release()

    @contextmanager
    def outside(self) -> Iterator[None]:
        """Give up this thread's slot for the block, if it holds one; wait for one after."""
        depth = getattr(self._mine, "depth", 0)
        if not depth:
            yield
            return
        self._mine.depth = 0
        self._release()
        try:
            yield
        finally:
            self._acquire(None)
            self._mine.depth = depth

    def _acquire(self, progress: Callable[[float, str], None] | None) -> None:
        """Take a free slot, or queue until `_release` hands one over."""
        with self._lock:
            if self._free and not self._queue:
                self._free -= 1
                self._inside += 1
                return
            turn = threading.Event()
            self._queue.append(turn)
        try:
            while not turn.wait(POLL_S):
                if progress is not None:
                    with self._lock:
                        ahead = self._queue.index(turn) if turn in self._queue else 0
                    progress(0.0, self.queued_text(ahead))
        except BaseException:  # stopped while queued: leave the line, or pass the slot on
            with self._lock:
                handed = turn.is_set()
                if not handed:
                    self._queue.remove(turn)
            if handed:
                self._release()
            raise

    def _release(self) -> None:
        with self._lock:
            if self._queue:  # hand the slot to the longest waiter: it counts as inside
                self._queue.popleft().set()
                return
            self._inside -= 1
            self._free += 1
            idle = self._inside == 0
        if idle and self.heavy:
            for hook in on_idle:
                hook()

    def queued_text(self, ahead: int) -> str:
        others = f"; {ahead} more ahead of yours" if ahead else ""
        return (
            f"Queued: {self.slots} {self.name if self.slots > 1 else self.one} already "
            f"running on this server{others}. "
            "Yours starts when one finishes."
        )
