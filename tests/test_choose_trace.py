"""The audit's torch.fx trace beside other sessions' threads running torch modules.

torch.fx patches torch.nn.Module.__call__ for the whole process while it traces; a
server runs every session in its own thread. Found by 30 deep links at once on a fresh
server: /residual's forward pass died with "module is not installed as a submodule"
while another session's /choose audit was tracing.
"""

from __future__ import annotations

import threading

import torch
from torch import nn

from normviz.choose import engine


class _Paused(nn.Module):
    """A model whose trace stops half-way until the test says go on."""

    def __init__(self, tracing: threading.Event, go_on: threading.Event) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.norm = nn.LayerNorm(4)
        self.tracing, self.go_on = tracing, go_on

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x)
        self.tracing.set()
        assert self.go_on.wait(30)
        return x + self.norm(h)


def _while_tracing(work) -> tuple[object, list[BaseException]]:
    """Run `work()` in this thread while another thread is inside a trace."""
    tracing, go_on = threading.Event(), threading.Event()
    graphs: list[object] = []
    errors: list[BaseException] = []

    def tracer() -> None:
        try:
            graphs.append(engine.trace(_Paused(tracing, go_on)))
        except BaseException as e:  # reported by the test
            errors.append(e)

    t = threading.Thread(target=tracer)
    t.start()
    assert tracing.wait(30)
    try:
        out = work()
    finally:
        go_on.set()
        t.join(30)
    assert not errors, errors
    return out, graphs


def test_other_threads_modules_run_as_usual_during_a_trace() -> None:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.LayerNorm(5))
    x = torch.randn(2, 3)
    want = net(x)
    got, graphs = _while_tracing(lambda: net(x))
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    # and the trace itself saw only its own model's modules
    (graph,) = graphs
    called = [str(n.target) for n in graph.nodes if n.op == "call_module"]
    assert called == ["fc", "norm"]


def test_a_second_trace_waits_and_the_patches_come_off() -> None:
    """Two audits at once: the second traces after the first; afterwards no fx patch is
    left on torch.nn.Module (a model called later runs plain torch)."""
    plain_call = nn.Module.__call__
    model = nn.Sequential(nn.Linear(3, 3), nn.LayerNorm(3))
    result: list[object] = []
    second = threading.Thread(target=lambda: result.append(engine.trace(model)))

    def start_second() -> None:
        second.start()
        second.join(0.2)  # it cannot get in while the first holds the lock
        assert second.is_alive()

    _while_tracing(start_second)
    second.join(30)
    (graph,) = result
    assert [str(n.target) for n in graph.nodes if n.op == "call_module"] == ["0", "1"]
    assert nn.Module.__call__ is plain_call
