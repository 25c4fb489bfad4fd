"""The one shared one-thread helper: torch on one thread inside, the caller's count after."""

from __future__ import annotations

import pytest
import torch

from normviz.batchnorm import lab
from normviz.pretrained import minilm
from normviz.threads import one_thread, single_threaded
from normviz.training import train


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def test_a_block_runs_on_one_thread_and_restores_the_count(two_threads: None) -> None:
    with one_thread():
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2
    with pytest.raises(RuntimeError), one_thread():
        raise RuntimeError("boom")
    assert torch.get_num_threads() == 2  # restored after an error too


def test_as_decorators(two_threads: None) -> None:
    @one_thread()
    def a() -> int:
        return torch.get_num_threads()

    @single_threaded
    def b(x: int) -> int:
        return torch.get_num_threads() + x

    assert a() == 1 and a() == 1  # the decorator is reusable
    assert b(10) == 11 and b.__name__ == "b"
    assert torch.get_num_threads() == 2


def test_one_helper_everywhere() -> None:
    assert lab.one_thread is one_thread
    assert train.single_threaded is single_threaded
    assert minilm.one_thread is one_thread
    assert not hasattr(minilm, "_one_thread")
