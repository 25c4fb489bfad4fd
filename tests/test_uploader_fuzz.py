"""The uploader fuzzed: random and mangled bytes under every extension.

Whatever a student uploads, normviz.io answers with a TensorLoadError whose
message says something, never another exception (which the page would turn
into an "internal error"). Mangled valid files reach deeper than pure noise:
a real header with flipped or cut bytes gets past the magic-number checks.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.torch import save as st_save

from normviz.io import TensorLoadError, load_tensor, load_tensors

EXTENSIONS = (".npy", ".pt", ".pth", ".safetensors", ".csv", ".bin", "")
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _valid(ext: str) -> bytes:
    """A small valid file of each kind, to be mangled."""
    x = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
    if ext == ".npy":
        buf = io.BytesIO()
        np.save(buf, x.numpy())
        return buf.getvalue()
    if ext in (".pt", ".pth"):
        buf = io.BytesIO()
        torch.save({"w": x, "b": x[0]}, buf)
        return buf.getvalue()
    if ext == ".safetensors":
        return st_save({"x": x})
    return b"a,b,c\n1,2,3\n4,5,6\n"


def _load(data: bytes, filename: str) -> None:
    """Both entry points; the success case is fine, every failure must be TensorLoadError."""
    for fn in (load_tensors, load_tensor):
        try:
            fn(data, filename)
        except TensorLoadError as e:
            assert str(e).strip(), f"empty message for {filename!r}"
            assert "Traceback" not in str(e)


@pytest.mark.parametrize("ext", EXTENSIONS)
@FUZZ
@given(data=st.binary(max_size=4096))
def test_random_bytes(ext: str, data: bytes) -> None:
    _load(data, f"upload{ext}")


@pytest.mark.parametrize("ext", [".npy", ".pt", ".safetensors", ".csv"])
@FUZZ
@given(data=st.data())
def test_mangled_valid_files(ext: str, data: st.DataObject) -> None:
    raw = bytearray(_valid(ext))
    # flip some bytes, then maybe cut the file or append junk
    for _ in range(data.draw(st.integers(0, 8), label="flips")):
        i = data.draw(st.integers(0, len(raw) - 1), label="at")
        raw[i] = data.draw(st.integers(0, 255), label="byte")
    cut = data.draw(st.integers(0, len(raw)), label="cut")
    tail = data.draw(st.binary(max_size=64), label="tail")
    _load(bytes(raw[:cut]) + tail, f"upload{ext}")


@FUZZ
@given(text=st.text(max_size=400), ext=st.sampled_from([".csv", ".npy", ".pt"]))
def test_random_text(text: str, ext: str) -> None:
    """Unicode text (NaN, inf, ragged rows, BOMs, emoji) under text and binary names."""
    _load(text.encode("utf-8", "surrogatepass"), f"upload{ext}")


@FUZZ
@given(
    rows=st.lists(
        st.lists(
            st.sampled_from(["1", "-2.5", "nan", "inf", "-inf", "", "x", "1e400", " 3 ", "0x10"]),
            min_size=1,
            max_size=5,
        ),
        min_size=1,
        max_size=6,
    ),
    delim=st.sampled_from([",", ";", "\t", " "]),
)
def test_csv_shaped_garbage(rows: list[list[str]], delim: str) -> None:
    """Rows that look like numbers but are not all numbers, in every delimiter."""
    _load("\n".join(delim.join(r) for r in rows).encode(), "upload.csv")


@FUZZ
@given(name=st.text(max_size=300), data=st.binary(max_size=256))
def test_random_file_names(name: str, data: bytes) -> None:
    """Any file name (unicode, slashes, no extension, very long) is answered with a message."""
    _load(data, name)


def test_unknown_extension_is_refused_with_the_formats() -> None:
    with pytest.raises(TensorLoadError, match=r"\.npy"):
        load_tensors(_valid(".npy"), "upload.bin")


@pytest.mark.parametrize("ext", [".npy", ".pt", ".safetensors", ".csv"])
def test_the_unmangled_files_load(ext: str) -> None:
    """The seeds of the mangling test are valid, so mangling tests the parsers, not noise."""
    tensors = load_tensors(_valid(ext), f"upload{ext}")
    assert tensors and all(t.dtype == torch.float32 for t in tensors.values())
