"""torch on one thread: for the many tiny tensors of the labs and the models' short passes.

    with one_thread(): ...        # a block
    @one_thread()                 # a function (a context manager is also a decorator)
    @single_threaded              # the same, without the call

Waking a second thread for each tiny tensor costs more than it saves, and far more when
other work keeps the cores busy. With torch's OpenMP backend the setting belongs to the
calling thread, so other sessions of the server keep theirs; the count is restored after.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import torch

F = TypeVar("F", bound=Callable[..., Any])


@contextmanager
def one_thread() -> Iterator[None]:
    """Run torch on one thread inside the block (and restore the caller's count after)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def single_threaded(fn: F) -> F:
    """`fn` run with torch on one thread (a decorator: `one_thread()` around every call)."""
    return one_thread()(fn)
