"""normviz.gate: at most `slots` heavy computations at once per process, the rest queued."""

from __future__ import annotations

import threading
import time

import pytest

from normviz import gate as gate_mod
from normviz.distributions import GATE as DIST_GATE
from normviz.gate import Gate
from normviz.residual.training import GATE as TRAIN_GATE


def _crowd(g: Gate, n: int, work: float, hold: bool = False) -> tuple[int, list[str]]:
    """n threads through the gate at once (two sections each when `hold`); the most
    inside at one time, and the progress texts the queued ones saw."""
    inside, most, seen = [0], [0], []
    lock = threading.Lock()

    def section() -> None:
        with g.enter(lambda f, text: seen.append(text)):
            with lock:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            time.sleep(work)
            with lock:
                inside[0] -= 1

    def student() -> None:
        if hold:
            with g.holding():
                section()
                section()
        else:
            section()

    threads = [threading.Thread(target=student) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return most[0], seen


@pytest.mark.parametrize("hold", [False, True])
def test_at_most_slots_at_once_and_the_rest_told_they_wait(hold: bool) -> None:
    g = Gate("cap-sized computations", slots=2)
    most, seen = _crowd(g, 8, 0.6, hold)
    assert most == 2
    assert seen and all(t.startswith("Queued: 2 cap-sized computations") for t in seen)
    assert g.waiting == 0 and g._inside == 0


def test_reentrant_and_idle_hook(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(gate_mod, "on_idle", [lambda: calls.append(1)])
    g = Gate("x", slots=1)
    with g.enter(), g.enter():  # nested in one thread: no deadlock
        pass
    with g.holding():
        with g.enter():
            pass
        with g.enter():  # the kept slot: no second acquire
            pass
        assert calls == [1]  # still held
    assert calls == [1, 1]


def test_the_app_gates() -> None:
    assert DIST_GATE.slots == 2 and TRAIN_GATE.slots == 1
