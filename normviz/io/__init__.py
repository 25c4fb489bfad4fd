"""Safe loading of user tensors from .npy, .pt, .safetensors and .csv files.

Nothing here ever unpickles: `.npy` goes through `np.load(allow_pickle=False)`
after its header has been checked, `.pt` through `torch.load(weights_only=True)`
(torch ≥ 2.10 closes the known weights-only escapes), `.safetensors` holds no
code by design, and `.csv` is parsed as text. Every refusal is a
`TensorLoadError` (a ValueError) whose message says what to fix.

A hostile file costs little: every size is checked before the data it describes is
allocated (`checks`), a `.pt` pickle's length before it is unpickled and its
structure walked once per object (`torchfiles`), a `.csv` measured before it is
parsed (`arrays`). Messages are plain text that may quote file names and keys: a
UI showing them as markdown escapes them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from normviz.io import arrays, torchfiles, worker
from normviz.io.checks import (
    MAX_DEPTH,
    MAX_TENSORS,
    SINGLE_KEY,
    TensorLoadError,
    check_shapes,
    check_values,
    file_element_cap,
    key_text,
    max_magnitude,
    short,
    to_plain,
    upload_limit_bytes,
)
from normviz.layouts import LAYOUTS
from normviz.limits import max_elements

FORMATS: dict[str, str] = {
    ".npy": "a NumPy array saved with np.save",
    ".pt": "a tensor, or a dict of tensors, saved with torch.save",
    ".pth": "same as .pt",
    ".safetensors": "named tensors saved with safetensors",
    ".csv": "a matrix of numbers, one row per line, read as (1, T, C)",
}
# The rank of an upload decides its layout: 2-D is one sequence, (T, C) -> (1, T, C).
RANK_LAYOUT: dict[int, str] = {2: "BTC", 3: "BTC", 4: "NCHW"}
_READERS: dict[str, Callable[[bytes], dict[str, torch.Tensor]]] = {
    ".npy": arrays.npy,
    ".pt": torchfiles.pt,
    ".pth": torchfiles.pt,
    ".safetensors": torchfiles.safetensors,
    ".csv": arrays.csv,
}


def load_tensors(data: bytes, filename: str) -> dict[str, torch.Tensor]:
    """Every tensor a file holds, by name ("tensor" for a single unnamed one).

    `.pt` dicts (a state_dict, or a checkpoint of nested dicts) give one entry per
    tensor under dotted keys; non-tensor values are skipped. Values are float32
    (integers, bools and half floats converted) or float64 (kept).

    Raises:
        TensorLoadError: unknown extension, empty, oversized or corrupt file; a file
            that would run code; more values in all than `file_element_cap()`, more
            than MAX_TENSORS tensors or nesting deeper than MAX_DEPTH; object, text,
            complex or unreadable dtypes; NaN, ±inf, or values beyond ±`max_magnitude()`.
    """
    data, ext = _first_checks(data, filename)
    raw = _READERS[ext](data)
    names = {k: k if len(raw) > 1 else SINGLE_KEY for k in raw}
    # sizes from shapes before any copy: a zero-stride (expanded) tensor's numel counts
    check_shapes((names[k], tuple(t.shape)) for k, t in raw.items())
    tensors = {}
    for k, t in raw.items():
        tensors[k] = to_plain(t, names[k])
        check_values(tensors[k], names[k])
    return tensors


def _first_checks(data: object, filename: str) -> tuple[bytes, str]:
    """(the bytes, the extension) once the type, the size and the extension pass."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise TensorLoadError(f"expected the file's bytes, got {type(data).__name__}")
    data = bytes(data)
    name = short(Path(str(filename)).name or str(filename))
    ext = Path(str(filename)).suffix.lower()
    if ext not in _READERS:
        raise TensorLoadError(
            f"{name!r}: unknown file type {short(ext, 20) or '(no extension)'!r}; use "
            + ", ".join(FORMATS)
        )
    limit = upload_limit_bytes()
    if len(data) > limit:
        raise TensorLoadError(
            f"{name!r} is {len(data) / 2**20:.1f} MB, over the upload limit of "
            f"{limit // 2**20} MB: save a slice of it"
        )
    if not data:
        raise TensorLoadError(f"{name!r} is empty (0 bytes)")
    return data, ext


def load_arrays(data: bytes, filename: str) -> dict[str, np.ndarray]:
    """`load_tensors` as NumPy arrays: the bounded worker's job (`read_bounded`)."""
    return {k: t.numpy() for k, t in load_tensors(data, filename).items()}


# A file at the upload limit parses in about 4 CPU-s (a 50 MB CSV), after the worker's
# imports (torch: about 1.3 CPU-s, 0.65 GB of address space).
TENSOR_BUDGET = worker.Budget(cpu_s=10.0, memory=3 * 2**30)


def read_bounded(data: bytes, filename: str) -> dict[str, np.ndarray]:
    """Every tensor of a file as read-only NumPy arrays (float32, or float64 kept), read
    by `load_tensors` in a worker process bounded by TENSOR_BUDGET (`worker`): no file
    costs the server more than that. The cheap refusals (type, size) come first, here.

    Raises:
        TensorLoadError: everything `load_tensors` refuses, and a file whose reading
            would exceed the budget.
    """
    data, _ = _first_checks(data, filename)
    return worker.run("normviz.io:load_arrays", data, filename, TENSOR_BUDGET, TensorLoadError)


@dataclass(frozen=True)
class UserTensor:
    """An uploaded tensor ready for normalize(): its layout follows from its rank."""

    tensor: torch.Tensor  # (B, T, C) or (N, C, H, W); float32 or float64
    layout: str  # "BTC" or "NCHW"
    key: str  # which tensor of the file
    source_shape: tuple[int, ...]  # the shape in the file (2-D gains a leading 1)

    @property
    def shape_text(self) -> str:
        return LAYOUTS[self.layout].shape_text(tuple(self.tensor.shape))


def as_input(t: torch.Tensor, key: str = SINGLE_KEY) -> UserTensor:
    """Check a loaded tensor's rank and size and give it a layout.

    2-D (T, C) is read as (1, T, C), 3-D as (B, T, C), 4-D as (N, C, H, W).

    Raises:
        TensorLoadError: a rank the layouts cannot hold, an empty axis, or more
            elements than the app's cap.
    """
    shape = tuple(t.shape)
    what = key_text(key)
    if t.ndim not in RANK_LAYOUT:
        raise TensorLoadError(
            f"{what}has shape {shape} ({t.ndim}-D); the app reads 2-D as (T, C), 3-D as "
            "(B, T, C) and 4-D as (N, C, H, W): reshape it to one of these"
        )
    if 0 in shape:
        raise TensorLoadError(f"{what}has shape {shape}: an axis of size 0 holds no values")
    cap = max_elements()
    if t.numel() > cap:
        raise TensorLoadError(
            f"{what}has shape {shape} = {t.numel():,} elements, over the app's cap of "
            f"{cap:,}: save a slice of it (fewer samples or tokens)"
        )
    x = t.unsqueeze(0) if t.ndim == 2 else t
    return UserTensor(x, RANK_LAYOUT[t.ndim], key, shape)


def pick(tensors: dict[str, torch.Tensor], key: str | None = None) -> tuple[str, torch.Tensor]:
    """One (key, tensor) of a file: `key`, or the only one there is.

    Raises:
        TensorLoadError: `key` is not in the file, or no key with several tensors.
    """
    if key is None:
        if len(tensors) == 1:
            return next(iter(tensors.items()))
        raise TensorLoadError(
            f"the file holds {len(tensors)} tensors ({_key_list(tensors)}): choose one by its key"
        )
    if key not in tensors:
        raise TensorLoadError(
            f"the file has no tensor named {short(key)!r}; it holds {_key_list(tensors)}"
        )
    return key, tensors[key]


def _key_list(tensors: dict[str, torch.Tensor], n: int = 6) -> str:
    keys = [short(k, 40) for k in tensors]
    return ", ".join(keys[:n]) + (f", … ({len(keys) - n} more)" if len(keys) > n else "")


def load_tensor(data: bytes, filename: str, key: str | None = None) -> torch.Tensor:
    """The one tensor a file holds (or the one named `key`), as (B,T,C) or (N,C,H,W).

    Raises:
        TensorLoadError: everything `load_tensors` refuses, several tensors and no
            `key`, a rank other than 2, 3 or 4, an empty axis, more elements than
            the app's cap.
    """
    name, t = pick(load_tensors(data, filename), key)
    return as_input(t, name).tensor


__all__ = [
    "FORMATS",
    "MAX_DEPTH",
    "MAX_TENSORS",
    "RANK_LAYOUT",
    "SINGLE_KEY",
    "TensorLoadError",
    "UserTensor",
    "as_input",
    "file_element_cap",
    "load_tensor",
    "load_tensors",
    "max_magnitude",
    "pick",
    "read_bounded",
    "upload_limit_bytes",
]
