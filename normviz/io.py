"""Safe loading of user tensors from .npy, .pt, .safetensors and .csv files.

Nothing here ever unpickles: `.npy` goes through `np.load(allow_pickle=False)`
after its header has been checked, `.pt` through `torch.load(weights_only=True)`
(torch ≥ 2.10 closes the known weights-only escapes), `.safetensors` holds no
code by design, and `.csv` is parsed as text. Every refusal is a
`TensorLoadError` (a ValueError) whose message says what to fix.
"""

from __future__ import annotations

import io
import math
import pickle
import re
import tomllib
import zipfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from normviz.layouts import LAYOUTS
from normviz.limits import max_elements

FORMATS: dict[str, str] = {
    ".npy": "a NumPy array saved with np.save",
    ".pt": "a tensor, or a dict of tensors, saved with torch.save",
    ".pth": "same as .pt",
    ".safetensors": "named tensors saved with safetensors",
    ".csv": "a matrix of numbers, one row per line, read as (1, T, C)",
}
# A .pt/.npy file with one unnamed tensor is returned under this key.
SINGLE_KEY = "tensor"
# The rank of an upload decides its layout: 2-D is one sequence, (T, C) -> (1, T, C).
RANK_LAYOUT: dict[int, str] = {2: "BTC", 3: "BTC", 4: "NCHW"}
_CONFIG = Path(__file__).resolve().parent.parent / ".streamlit" / "config.toml"
_DEFAULT_UPLOAD_MB = 50
# A .pt zip may compress its members; refuse archives that would unpack to far more
# than the upload itself (a zip bomb) before torch reads them.
_MAX_UNPACK_RATIO = 4


class TensorLoadError(ValueError):
    """A file that cannot be read as a tensor; the message says why."""


@lru_cache(maxsize=1)
def upload_limit_bytes() -> int:
    """The upload limit in bytes: server.maxUploadSize of .streamlit/config.toml (MB)."""
    try:
        with _CONFIG.open("rb") as f:
            mb = int(tomllib.load(f)["server"]["maxUploadSize"])
    except (OSError, KeyError, TypeError, ValueError, tomllib.TOMLDecodeError):
        mb = _DEFAULT_UPLOAD_MB
    return max(1, mb) * 1024 * 1024


def _short(name: str, n: int = 60) -> str:
    """A file or key name safe to quote in a message (trimmed, one line)."""
    name = " ".join(str(name).split())
    return name if len(name) <= n else name[: n - 1] + "…"


# ---- the formats ---------------------------------------------------------------------


def _npy(data: bytes) -> dict[str, torch.Tensor]:
    """An .npy file: header checked first, so a hostile shape allocates nothing."""
    fp = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(fp)
    except ValueError:
        raise TensorLoadError(
            "this is not a .npy file (it does not start with NumPy's magic bytes): "
            "save the array with np.save"
        ) from None
    try:
        if version == (1, 0):
            shape, _fortran, dtype = np.lib.format.read_array_header_1_0(fp)
        elif version == (2, 0):
            shape, _fortran, dtype = np.lib.format.read_array_header_2_0(fp)
        else:
            raise TensorLoadError(
                f".npy format version {version[0]}.{version[1]} is not supported: "
                "save a plain numeric array with np.save"
            )
    except TensorLoadError:
        raise
    except Exception as e:  # any malformed header
        raise TensorLoadError(f"the .npy header is corrupt ({_short(str(e), 80)})") from None
    _check_np_dtype(dtype, SINGLE_KEY)
    n = math.prod(shape)
    need = n * dtype.itemsize
    have = len(data) - fp.tell()
    if have < need:
        raise TensorLoadError(
            f"the .npy file is truncated: its header promises shape {tuple(shape)} "
            f"({need:,} bytes of data) but only {have:,} bytes follow"
        )
    try:
        arr = np.load(io.BytesIO(data), allow_pickle=False)
    except ValueError as e:  # object arrays land here too: allow_pickle=False refuses them
        reason = _short(str(e), 80)
        raise TensorLoadError(f"the .npy file could not be read safely ({reason})") from None
    return {SINGLE_KEY: _from_numpy(arr, SINGLE_KEY)}


def _check_np_dtype(dtype: np.dtype, name: str) -> None:
    """Refuse every NumPy dtype that is not a real number."""
    if dtype.hasobject or dtype.kind == "O":
        raise TensorLoadError(
            f"{_key_text(name)}holds Python objects (dtype object); loading it would mean "
            "unpickling, which can run code. Save a numeric array instead"
        )
    if dtype.kind == "c":
        raise TensorLoadError(
            f"{_key_text(name)}holds complex numbers ({dtype}); normalization needs real "
            "values: save x.real or abs(x)"
        )
    if dtype.kind in "US":
        raise TensorLoadError(f"{_key_text(name)}holds text ({dtype}), not numbers")
    if dtype.kind not in "biuf" or dtype.fields is not None:
        raise TensorLoadError(
            f"{_key_text(name)}has dtype {dtype}, which is not a plain number type: "
            "save a float or integer array"
        )


def _key_text(name: str) -> str:
    return "the file " if name == SINGLE_KEY else f"tensor {_short(name)!r} "


def _from_numpy(arr: np.ndarray, name: str) -> torch.Tensor:
    _check_np_dtype(arr.dtype, name)
    if arr.dtype.kind == "f" and arr.dtype.itemsize > 8:  # long double: keep float64
        arr = arr.astype(np.float64)
    elif arr.dtype.kind != "f" or arr.dtype.itemsize < 4:
        arr = arr.astype(np.float32)  # ints, bools, float16
    # not np.ascontiguousarray: it turns a 0-D array into 1-D
    return torch.from_numpy(arr if arr.flags.c_contiguous else arr.copy(order="C"))


def _pt(data: bytes) -> dict[str, torch.Tensor]:
    """A torch.save file, loaded with weights_only=True (no arbitrary unpickling)."""
    if not data.startswith(b"PK\x03\x04"):
        raise TensorLoadError(
            "this .pt file is not in torch's zip format (it may be corrupt, or saved by a "
            "very old torch): re-save it with torch.save in a current torch"
        )
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            unpacked = sum(i.file_size for i in zf.infolist())
    except (zipfile.BadZipFile, ValueError, OSError) as e:
        raise TensorLoadError(f"the .pt file is corrupt ({_short(str(e), 80)})") from None
    if unpacked > _MAX_UNPACK_RATIO * max(len(data), upload_limit_bytes() // 8):
        raise TensorLoadError(
            f"the .pt archive would unpack to {unpacked:,} bytes from {len(data):,}: "
            "refused as a possible zip bomb; save it with torch.save (uncompressed)"
        )
    try:
        obj = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True, mmap=False)
    except pickle.UnpicklingError as e:
        found = _unsafe_global(str(e))
        raise TensorLoadError(
            "refused: this .pt file holds Python objects other than tensors"
            + (f" ({found})" if found else "")
            + ". Loading it would mean unpickling them, which can run arbitrary code, so "
            "nothing in it was run. Save only tensors: torch.save(tensor) or "
            "torch.save(model.state_dict())"
        ) from None
    except Exception as e:  # torch raises RuntimeError, EOFError, KeyError, ... on bad files
        raise TensorLoadError(f"the .pt file is corrupt ({_short(str(e), 80)})") from None
    tensors = _flatten(obj)
    if not tensors:
        raise TensorLoadError(
            f"the .pt file holds no tensors (it holds a {type(obj).__name__}): save a tensor "
            "or a dict of tensors"
        )
    return {k: _from_torch(t, k if len(tensors) > 1 else SINGLE_KEY) for k, t in tensors.items()}


def _unsafe_global(msg: str) -> str:
    """The Python name torch's weights-only unpickler refused (`posix.system`), if it says."""
    m = re.search(r"GLOBAL\s+([\w.<>]+)", msg)
    return f"it refers to {_short(m.group(1), 60)}" if m else ""


def _flatten(obj: object, prefix: str = "") -> dict[str, torch.Tensor]:
    """Every tensor in a (nested) dict/list/tuple, under dotted keys; other leaves skipped."""
    if isinstance(obj, torch.Tensor):
        return {prefix or SINGLE_KEY: obj}
    out: dict[str, torch.Tensor] = {}
    if isinstance(obj, dict):
        items = [(str(k), v) for k, v in obj.items()]
    elif isinstance(obj, list | tuple):
        items = [(str(i), v) for i, v in enumerate(obj)]
    else:
        return out
    for k, v in items:
        out |= _flatten(v, f"{prefix}.{k}" if prefix else k)
    return out


def _from_torch(t: torch.Tensor, name: str) -> torch.Tensor:
    """A plain, dense, real CPU tensor: float32, or float64 kept."""
    if t.layout != torch.strided:
        raise TensorLoadError(f"{_key_text(name)}is a sparse tensor: save t.to_dense()")
    if t.is_quantized:
        raise TensorLoadError(f"{_key_text(name)}is quantized: save t.dequantize()")
    if t.is_complex():
        raise TensorLoadError(
            f"{_key_text(name)}holds complex numbers ({t.dtype}); normalization needs real "
            "values: save t.real or t.abs()"
        )
    if t.device.type != "cpu":
        raise TensorLoadError(f"{_key_text(name)}has no data (device {t.device.type})")
    t = t.detach()
    if type(t) is not torch.Tensor:  # nn.Parameter and other subclasses
        t = t.as_subclass(torch.Tensor)
    if t.dtype != torch.float64:
        t = t.to(torch.float32)
    return t.contiguous()


def _safetensors(data: bytes) -> dict[str, torch.Tensor]:
    """A .safetensors file: a JSON header and raw buffers, no code by design."""
    from safetensors import SafetensorError
    from safetensors.torch import load

    try:
        tensors = load(data)
    except (SafetensorError, ValueError, TypeError, RuntimeError, OverflowError) as e:
        raise TensorLoadError(f"the .safetensors file is corrupt ({_short(str(e), 80)})") from None
    if not tensors:
        raise TensorLoadError("the .safetensors file holds no tensors")
    return {k: _from_torch(t, k if len(tensors) > 1 else SINGLE_KEY) for k, t in tensors.items()}


def _csv(data: bytes) -> dict[str, torch.Tensor]:
    """A CSV matrix of numbers (an optional header row of names is skipped)."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise TensorLoadError("the .csv file is not UTF-8 text") from None
    lines = [(i + 1, line) for i, line in enumerate(text.splitlines()) if line.strip()]
    if not lines:
        raise TensorLoadError("the .csv file has no rows of numbers")
    first = lines[0][1]
    delim = next((d for d in (",", "\t", ";") if d in first), ",")
    if all(not _is_number(f) for f in first.split(delim)):  # a header row of names
        lines = lines[1:]
        if not lines:
            raise TensorLoadError("the .csv file has a header row but no rows of numbers")
    try:
        arr = np.loadtxt(
            io.StringIO("\n".join(line for _, line in lines)),
            delimiter=delim,
            ndmin=2,
            dtype=np.float64,
        )
    except ValueError:
        raise TensorLoadError(_csv_problem(lines, delim)) from None
    return {SINGLE_KEY: torch.from_numpy(arr.astype(np.float32))}


def _is_number(field: str) -> bool:
    try:
        float(field)
    except ValueError:
        return False
    return True


def _csv_problem(lines: list[tuple[int, str]], delim: str) -> str:
    """Find the first bad line of a CSV that failed to parse, for the message."""
    width = len(lines[0][1].split(delim))
    for lineno, line in lines:
        fields = line.split(delim)
        if len(fields) != width:
            return (
                f"the .csv file is ragged: line {lineno} has {len(fields)} values but the "
                f"first row has {width}; every row needs the same number of columns"
            )
        for col, f in enumerate(fields, start=1):
            if not f.strip():
                return f"the .csv file has an empty value at line {lineno}, column {col}"
            if not _is_number(f):
                return (
                    f"the .csv file has {_short(f.strip(), 20)!r} at line {lineno}, column "
                    f"{col}, which is not a number"
                )
    return "the .csv file could not be read as a matrix of numbers"


_READERS = {
    ".npy": _npy,
    ".pt": _pt,
    ".pth": _pt,
    ".safetensors": _safetensors,
    ".csv": _csv,
}


# ---- public API ----------------------------------------------------------------------


def load_tensors(data: bytes, filename: str) -> dict[str, torch.Tensor]:
    """Every tensor a file holds, by name ("tensor" for a single unnamed one).

    `.pt` dicts (a state_dict, or a checkpoint of nested dicts) give one entry per
    tensor under dotted keys; non-tensor values are skipped. Values are float32
    (integers, bools and half floats converted) or float64 (kept).

    Raises:
        TensorLoadError: unknown extension, empty, oversized or corrupt file; a file
            that would run code; object, text or complex dtypes; NaN or ±inf values.
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise TensorLoadError(f"expected the file's bytes, got {type(data).__name__}")
    data = bytes(data)
    name = _short(Path(str(filename)).name or str(filename))
    ext = Path(str(filename)).suffix.lower()
    if ext not in _READERS:
        raise TensorLoadError(
            f"{name!r}: unknown file type {_short(ext, 20) or '(no extension)'!r}; use "
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
    tensors = _READERS[ext](data)
    for key, t in tensors.items():
        _check_finite(t, key)
    return tensors


def _check_finite(t: torch.Tensor, name: str) -> None:
    """Refuse NaN and ±inf, saying how many of each."""
    if t.numel() == 0 or bool(torch.isfinite(t).all()):
        return
    parts = []
    for label, mask in (
        ("NaN", torch.isnan(t)),
        ("+inf", torch.isposinf(t)),
        ("−inf", torch.isneginf(t)),
    ):
        n = int(mask.sum())
        if n:
            parts.append(f"{n:,} {label}")
    raise TensorLoadError(
        f"{_key_text(name)}holds {_and(parts)} out of {t.numel():,} values; "
        "normalization needs finite numbers: replace them (e.g. torch.nan_to_num) or "
        "drop those rows"
    )


def _and(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


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
    what = _key_text(key)
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
            f"the file has no tensor named {_short(key)!r}; it holds {_key_list(tensors)}"
        )
    return key, tensors[key]


def _key_list(tensors: dict[str, torch.Tensor], n: int = 6) -> str:
    keys = [_short(k, 40) for k in tensors]
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
    "RANK_LAYOUT",
    "SINGLE_KEY",
    "TensorLoadError",
    "UserTensor",
    "as_input",
    "load_tensor",
    "load_tensors",
    "pick",
    "upload_limit_bytes",
]
