"""A packaged model loads once per process, whichever session asks first."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any


def once(lock: threading.RLock | threading.Lock) -> Callable[[Any], Any]:
    """Cache a no-argument loader for the process; its first call runs under `lock`, so
    two sessions asking at once load it once (one lock per model: loading one model
    never waits for another)."""

    def decorate(fn: Any) -> Any:
        cached = functools.cache(fn)

        @functools.wraps(fn)
        def wrapper() -> Any:
            with lock:
                return cached()

        wrapper.cache_clear = cached.cache_clear  # type: ignore[attr-defined]
        wrapper.cache_info = cached.cache_info  # type: ignore[attr-defined]
        return wrapper

    return decorate
