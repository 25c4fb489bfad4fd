"""normviz.gate: at most `slots` heavy computations at once per process, the rest queued."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from benchmarks.common import app_test
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


def test_the_training_lab_queues_its_runs() -> None:
    """Two lab runs at once in one process: one trains, the other is told it is queued
    and then gets the same result as a run alone (its own seed, its own numbers)."""
    import threading

    from normviz.training.models import Net
    from normviz.training.train import GATE as LAB_GATE
    from normviz.training.train import Grid, train
    from normviz.training.wide import Variant

    assert LAB_GATE.slots == 1
    net = Net("mlp", width=16, depth=2, groups=4)
    grid = Grid(net, (Variant("batch", 0.1, 0),), batch=16, samples=16 * 40)
    alone = train(grid)[0].val_acc
    said: list[str] = []
    inside = threading.Event()

    def first(fraction: float, text: str) -> None:
        inside.set()
        time.sleep(0.05)  # keeps the slot a while, so the second one must wait

    out: list[np.ndarray] = []
    t = threading.Thread(target=lambda: out.append(train(grid, first)[0].val_acc))
    t.start()
    inside.wait(30)
    second = train(grid, lambda f, text: said.append(text))[0].val_acc
    t.join()
    assert any(s.startswith("Queued: 1 training-lab run already running") for s in said)
    np.testing.assert_array_equal(second, alone)
    np.testing.assert_array_equal(out[0], alone)


def _queue_in_order(g: Gate, names: list[str], entered: list[str], work: float = 0.05):
    """Start one thread per name, each queued behind the previous one."""
    threads = []
    for name in names:

        def go(name: str = name) -> None:
            with g.enter():
                entered.append(name)
                time.sleep(work)

        t = threading.Thread(target=go)
        t.start()
        while g.waiting < len(threads) + 1:  # this one is in the line
            time.sleep(0.001)
        threads.append(t)
    return threads


def test_first_come_first_served_and_no_barging_back_in() -> None:
    g = Gate("page runs", slots=1, heavy=False)
    entered: list[str] = []
    release = threading.Event()

    def holder() -> None:
        with g.enter():
            entered.append("holder")
            release.wait(10)
        with g.enter():  # straight back in: behind everyone already waiting
            entered.append("holder again")

    h = threading.Thread(target=holder)
    h.start()
    while g._inside == 0:
        time.sleep(0.001)
    threads = _queue_in_order(g, ["a", "b", "c", "d"], entered)
    release.set()
    for t in [h, *threads]:
        t.join(10)
    assert entered == ["holder", "a", "b", "c", "d", "holder again"]
    assert g.waiting == 0 and g._inside == 0 and g._free == 1


def test_a_run_stopped_while_queued_leaves_the_line() -> None:
    g = Gate("x", slots=1)
    release, stopped = threading.Event(), []

    def holder() -> None:
        with g.enter():
            release.wait(10)

    def quitter() -> None:
        def progress(fraction: float, text: str) -> None:
            raise KeyboardInterrupt  # what Streamlit's stop looks like to the gate: any raise

        try:
            with g.enter(progress):
                stopped.append("entered")  # never
        except KeyboardInterrupt:
            stopped.append("left")

    h, q = threading.Thread(target=holder), threading.Thread(target=quitter)
    h.start()
    while g._inside == 0:
        time.sleep(0.001)
    q.start()
    q.join(10)
    assert stopped == ["left"] and g.waiting == 0
    release.set()
    h.join(10)
    assert g._inside == 0 and g._free == 1
    with g.enter():  # the gate still works
        assert g._inside == 1


def test_a_run_steps_out_of_its_turn_while_in_a_heavy_gate(monkeypatch) -> None:
    runs = Gate("page runs", slots=1, heavy=False)
    heavy = Gate("training runs", slots=1)
    monkeypatch.setattr(gate_mod, "around", [runs.outside])
    in_heavy, light_done, log = threading.Event(), threading.Event(), []

    def trainer() -> None:
        with runs.enter():
            with heavy.enter():
                log.append("training")
                in_heavy.set()
                light_done.wait(10)  # a light run gets the run slot meanwhile
            log.append(f"back in its turn: {runs._inside}")

    def light() -> None:
        in_heavy.wait(10)
        with runs.enter():
            log.append("light run")
        light_done.set()

    threads = [threading.Thread(target=trainer), threading.Thread(target=light)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert log == ["training", "light run", "back in its turn: 1"]
    assert runs._inside == 0 and heavy._inside == 0


def test_a_page_run_waits_for_its_turn_in_the_process() -> None:
    """app.py takes one of ui.runs' slots: while another run holds it, a page waits in
    line, and it runs once the slot is free."""
    from ui.runs import RUNS, SLOTS

    at = app_test("axes")
    done: list[bool] = []
    runner = threading.Thread(target=lambda: done.append(not at.run().exception))
    release, holding = threading.Event(), threading.Semaphore(0)

    def hold() -> None:  # another session's run, in its own thread
        with RUNS.enter():
            holding.release()
            release.wait(600)

    holders = [threading.Thread(target=hold) for _ in range(SLOTS)]
    for h in holders:
        h.start()
        holding.acquire()
    try:
        runner.start()
        for _ in range(600):  # the page's run joins the line (not a speed limit: 60 s)
            if RUNS.waiting:
                break
            time.sleep(0.1)
        assert RUNS.waiting == 1 and not done
    finally:
        release.set()
    for h in holders:
        h.join(60)
    runner.join(600)
    assert done == [True] and RUNS.waiting == 0 and RUNS._inside == 0


def test_a_one_slot_gate_names_its_one_computation_in_the_singular() -> None:
    """ "Queued: 1 training runs" was the message; every one-slot gate has a singular."""
    import normviz.pretrained.smollm2 as smollm2
    import normviz.residual.depth as residual_depth
    import normviz.residual.training as residual_training
    import normviz.training.train as lab

    for gate in (lab.GATE, residual_training.GATE, residual_depth.GATE, smollm2.GATE):
        assert gate.slots == 1 and gate.one != gate.name
        assert gate.queued_text(0).startswith(f"Queued: 1 {gate.one} already running")
    assert Gate("file reads", 2).queued_text(3).startswith("Queued: 2 file reads already")
