"""What every upload passes before it costs memory: the caps, and the conversion to a
plain float tensor, each refusal a `TensorLoadError` whose message says what to fix.

Sizes are checked from shapes (Python integers, no overflow) before any copy, so a
tensor whose strides repeat one number (`torch.zeros(1).expand(2**36)`, 1.6 KB on
disk) or a shape of `[0, 2**62]` is refused before anything is allocated.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import torch

from normviz.limits import max_elements

# A .pt/.npy file with one unnamed tensor is returned under this key.
SINGLE_KEY = "tensor"
# The largest file the app reads, in MB (the README's "up to 50 MB").
UPLOAD_MB = 50
# More tensors than this in one file is not a checkpoint a class uploads (a 1,000-block
# model's state_dict holds 7,000); each one costs Python objects, whatever its size.
MAX_TENSORS = 10_000
# How deep a .pt file's dicts and lists may nest (a checkpoint nests 3 or 4 deep).
MAX_DEPTH = 32
# The longest dotted key a tensor may have in a .pt file.
MAX_KEY = 300


class TensorLoadError(ValueError):
    """A file that cannot be read as a tensor; the message says why (plain text: a UI
    that shows it in markdown escapes it, for it quotes file names and keys)."""


def upload_limit_bytes() -> int:
    """The app's upload limit in bytes: UPLOAD_MB (50 MB). Streamlit's own limit
    (server.maxUploadSize in .streamlit/config.toml) is set higher, so a file over this
    one reaches the app and is refused with its message, not with a reset connection."""
    return UPLOAD_MB * 2**20


def file_element_cap() -> int:
    """How many numbers one file may hold in all: as many float32 values as fit in the
    upload limit (13.1 million for 50 MB), and never fewer than one tensor's cap."""
    return max(max_elements(), upload_limit_bytes() // 4)


def max_magnitude() -> float:
    """The largest |value| accepted (1e15 at the default caps): the power of ten below
    which a sum of squares over a file's worth of values stays finite in float32."""
    bound = math.sqrt(float(np.finfo(np.float32).max) / file_element_cap())
    return 10.0 ** math.floor(math.log10(bound))


def short(name: object, n: int = 60) -> str:
    """A file or key name safe to quote in a message (trimmed, one line)."""
    text = " ".join(str(name).split())
    return text if len(text) <= n else text[: n - 1] + "…"


def key_text(name: str) -> str:
    return "the file " if name == SINGLE_KEY else f"tensor {short(name)!r} "


def check_shapes(shapes: Iterable[tuple[str, tuple[int, ...]]]) -> None:
    """Refuse an axis, a tensor or a file total over the file's element cap, from the
    shapes alone: nothing has been allocated for them yet."""
    cap, total = file_element_cap(), 0
    for name, shape in shapes:
        dims = tuple(int(d) for d in shape)
        big = [d for d in dims if d > cap]
        if big:
            raise TensorLoadError(
                f"{key_text(name)}has an axis of {big[0]:,}, more than the {cap:,} values "
                "one file may hold: save a slice of it"
            )
        n = math.prod(dims)
        if n > cap:
            raise TensorLoadError(
                f"{key_text(name)}has shape {dims} = {n:,} values, over the cap of {cap:,} "
                "per file: save a slice of it"
            )
        total += n
        if total > cap:
            raise TensorLoadError(
                f"the file's tensors hold more than {cap:,} values in all (the cap per "
                "file): save fewer or smaller tensors"
            )


def check_np_dtype(dtype: np.dtype, name: str) -> None:
    """Refuse every NumPy dtype that is not a real number."""
    what = key_text(name)
    if dtype.hasobject or dtype.kind == "O":
        raise TensorLoadError(
            f"{what}holds Python objects (dtype object); loading it would mean unpickling, "
            "which can run code. Save a numeric array instead"
        )
    if dtype.kind == "c":
        raise TensorLoadError(
            f"{what}holds complex numbers ({dtype}); normalization needs real values: "
            "save x.real or abs(x)"
        )
    if dtype.kind in "US":
        raise TensorLoadError(f"{what}holds text ({dtype}), not numbers")
    if dtype.kind not in "biuf" or dtype.fields is not None:
        raise TensorLoadError(
            f"{what}has dtype {dtype}, which is not a plain number type: save a float or "
            "integer array"
        )


def from_numpy(arr: np.ndarray, name: str) -> torch.Tensor:
    """A NumPy array as a native-byte-order float32 tensor (float64 kept)."""
    check_np_dtype(arr.dtype, name)
    if not arr.dtype.isnative:  # a big-endian file ('>f4'): torch reads native order only
        arr = arr.astype(arr.dtype.newbyteorder("="))
    if arr.dtype.kind == "f" and arr.dtype.itemsize > 8:  # long double: keep float64
        arr = arr.astype(np.float64)
    elif arr.dtype.kind != "f" or arr.dtype.itemsize < 4:
        arr = arr.astype(np.float32)  # ints, bools, float16
    # not np.ascontiguousarray: it turns a 0-D array into 1-D
    return torch.from_numpy(arr if arr.flags.c_contiguous else arr.copy(order="C"))


def to_plain(t: torch.Tensor, name: str) -> torch.Tensor:
    """A plain, dense, real CPU tensor: float32, or float64 kept. Its size has been
    checked (`check_shapes`) before this copies anything."""
    what = key_text(name)
    if t.layout != torch.strided:
        raise TensorLoadError(f"{what}is a sparse tensor: save t.to_dense()")
    if t.is_quantized:
        raise TensorLoadError(f"{what}is quantized: save t.dequantize()")
    if t.is_complex():
        raise TensorLoadError(
            f"{what}holds complex numbers ({t.dtype}); normalization needs real values: "
            "save t.real or t.abs()"
        )
    if t.device.type != "cpu":
        raise TensorLoadError(f"{what}has no data (device {t.device.type})")
    t = t.detach()
    if type(t) is not torch.Tensor:  # nn.Parameter and other subclasses
        t = t.as_subclass(torch.Tensor)
    try:
        if t.dtype != torch.float64:
            t = t.to(torch.float32)
        return t.contiguous()
    except (RuntimeError, TypeError, NotImplementedError):
        dtype = str(t.dtype).removeprefix("torch.")
        raise TensorLoadError(
            f"{what}has dtype {dtype}, which cannot be read as numbers here: save it as float32"
        ) from None


def check_values(t: torch.Tensor, name: str) -> None:
    """Refuse NaN and ±inf (saying how many of each) and magnitudes over
    `max_magnitude()`, in one pass that allocates nothing the size of `t`."""
    if t.numel() == 0:
        return
    lo_t, hi_t = torch.aminmax(t)
    lo, hi = float(lo_t), float(hi_t)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        _refuse_nonfinite(t, name)
    top = max(-lo, hi)
    if top > max_magnitude():
        raise TensorLoadError(
            f"{key_text(name)}holds values as large as {top:.3g} in magnitude; the app "
            f"accepts up to {max_magnitude():.0e} (larger ones overflow the statistics' "
            "sums of squares): rescale it (divide by a power of ten) or subtract an offset"
        )


def _refuse_nonfinite(t: torch.Tensor, name: str) -> None:
    parts = []
    for label, test in (("NaN", torch.isnan), ("+inf", torch.isposinf), ("−inf", torch.isneginf)):
        n = int(test(t).sum())
        if n:
            parts.append(f"{n:,} {label}")
    said = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    raise TensorLoadError(
        f"{key_text(name)}holds {said} out of {t.numel():,} values; normalization needs "
        "finite numbers: replace them (e.g. torch.nan_to_num) or drop those rows"
    )
