"""Uploaded files, parsed once: the one way a page reads a file a visitor sent.

`parsed(file)` returns every tensor of an uploaded file as NumPy arrays (raising
`TensorLoadError` with a message), cached on the file's SHA-256 and extension;
`photo(data, digest)` a photo as the model's (224, 224, 3) input. The cache is sized
by bytes, not entries: a parsed upload may hold up to `normviz.io.file_element_cap()`
values (52 MB of float32), so "3 entries" could be anything from kilobytes to 300 MB.
The arrays are read-only: every session that sends the same file shares them
(`tensor(arr)` gives a torch copy to work on).

Reading a file never holds up the class. It runs in a worker process bounded in CPU
time and memory (`normviz.io.read_bounded`, `photos.read_upload`), behind a gate of
its own (READS, two at a time) that, like the heavy gates, steps out of the page-run
turn (`ui/runs.py`) while it waits and reads; hashing a large file steps out too. A
bystander's click on another page is not queued behind anyone's upload.

Refusals are remembered apart (REFUSED, by content hash, a few hundred bytes each,
never evicted by parsed files): a hostile file costs its worker once, and is refused
again at once on every rerun and every re-upload. `refusal(name, err)` shows a
refusal with the file name and message escaped.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import streamlit as st
import torch

from normviz import NormConfigError, gate, io
from normviz.pretrained import photos
from ui.safe import md_text

# Parsed uploads kept across sessions and reruns, in all: a few files of a class.
CACHE_BYTES = 256 * 2**20
_ENTRY_OVERHEAD = 1024  # bytes charged per entry beyond its arrays (keys, the dict)


class Upload(Protocol):
    """What the pages pass: st.file_uploader's UploadedFile (or anything alike)."""

    name: str

    def getvalue(self) -> bytes: ...


Entry = dict[str, np.ndarray] | io.TensorLoadError


class ByteLRU:
    """A least-recently-used map bounded by the bytes of its values, thread-safe
    (Streamlit runs each session's script on its own thread). `size(value)` gives a
    value's bytes (default: a parsed upload's)."""

    def __init__(self, budget: int, size: Callable[[Any], int] | None = None) -> None:
        self.budget = budget
        self._size = size or _size
        self._items: OrderedDict[Any, tuple[Any, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any | None:
        with self._lock:
            hit = self._items.get(key)
            if hit is None:
                return None
            self._items.move_to_end(key)
            return hit[0]

    def put(self, key: Any, value: Any) -> None:
        size = self._size(value)
        if size > self.budget:
            return  # never cached: it would evict everything else
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            self._items[key] = (value, size)
            self._bytes += size
            while self._bytes > self.budget:
                _, (_, freed) = self._items.popitem(last=False)
                self._bytes -= freed

    @property
    def nbytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0


def _size(value: Entry) -> int:
    if isinstance(value, io.TensorLoadError):
        return _ENTRY_OVERHEAD + len(str(value))
    return _ENTRY_OVERHEAD + sum(a.nbytes + len(k) for k, a in value.items())


_ByteLRU = ByteLRU  # the name the tests know
_CACHE = ByteLRU(CACHE_BYTES)
# Refusals by cache key (their messages): 4,000 or more of them in 2 MB.
REFUSED = ByteLRU(2 * 2**20, size=lambda msg: 256 + len(msg))
# Files read at once per process (each in its own bounded worker): a heavy gate, so a
# run waiting for it, or reading, steps out of the page-run turn.
READS = gate.Gate("file reads", 2)
_HASH_OUTSIDE = 2**20  # a larger file is hashed outside the turn (50 MB: about 0.1 s)


@contextmanager
def _off_turn() -> Iterator[None]:
    """The block runs outside this thread's page-run turn (the gates' `around` hooks)."""
    with ExitStack() as stack:
        for hook in gate.around:
            stack.enter_context(hook())
        yield


def key_of(data: bytes, name: str) -> str:
    """The cache key of a file: its SHA-256 and its extension (which decides the parser)."""
    if len(data) > _HASH_OUTSIDE:
        with _off_turn():
            digest = hashlib.sha256(data).hexdigest()
    else:
        digest = hashlib.sha256(data).hexdigest()
    return f"{digest}|{Path(str(name)).suffix.lower()}"


def cached(key: str) -> dict[str, np.ndarray] | None:
    """The parsed file under `key` if the cache still holds it (a refusal: None)."""
    hit = _CACHE.get(key)
    return dict(hit) if isinstance(hit, dict) else None


def _read(key: str, error: type[ValueError], read: Callable[[], Any]) -> Any:
    """`read()` through READS, its refusal remembered under `key`; a refusal already
    remembered is raised at once, `read` not called."""
    said = REFUSED.get(key)
    if said is None:
        try:
            with READS.enter():
                return read()
        except error as e:
            said = str(e)
            REFUSED.put(key, said)
    raise error(said)


def parsed_bytes(data: bytes, name: str) -> dict[str, np.ndarray]:
    """Every tensor of a file's bytes, by key (`normviz.io.load_tensors`), as arrays.

    The arrays are read-only and shared by every session that sends the same file:
    `tensor(arr)` gives a torch copy.

    Raises:
        TensorLoadError: the file is refused; the message says why (plain text: show
            it with `refusal`).
    """
    key = key_of(data, name)
    hit = _CACHE.get(key)
    if hit is None:
        hit = _read(key, io.TensorLoadError, lambda: io.read_bounded(data, name))
        _CACHE.put(key, hit)
    return dict(hit)


def photo(data: bytes, digest: str) -> np.ndarray:
    """An uploaded photo as the model's (224, 224, 3) uint8 input (read-only), decoded
    in a bounded worker (`photos.read_upload`); `digest` is its SHA-256 (the caller
    caches the result under it).

    Raises:
        NormConfigError: the photo is refused; the message says why.
    """
    return _read(f"{digest}|photo", NormConfigError, lambda: photos.read_upload(data))


def tensor(arr: np.ndarray) -> torch.Tensor:
    """A torch tensor of a cached (shared, read-only) array: a copy, this run's own."""
    return torch.from_numpy(np.array(arr))


def parsed(file: Upload) -> dict[str, np.ndarray]:
    """Every tensor of an uploaded file, by key, as arrays (see `parsed_bytes`).

    Raises:
        TensorLoadError: the file is refused; the message says why.
    """
    return parsed_bytes(file.getvalue(), file.name)


def refusal_text(name: str, err: Exception) -> str:
    """The markdown of a refusal: the file name and the message escaped (both may
    quote what the visitor chose: a file name, a tensor key)."""
    return f"**{md_text(name)} was refused:** {md_text(err, limit=600)}."


def refusal(name: str, err: Exception) -> None:
    """Show that file `name` was refused and why, as an error box."""
    st.error(refusal_text(name, err), icon=":material/block:")
