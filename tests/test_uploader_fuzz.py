"""The uploader fuzzed: random and mangled bytes under every extension, and issue 12's
hostile families (shared references, cycles, deep nesting, zero strides, huge
magnitudes, big-endian arrays, exotic dtypes and shapes, markdown in names).

Whatever a student uploads, normviz.io answers with a TensorLoadError whose
message says something, never another exception (which the page would turn
into an "internal error"). Mangled valid files reach deeper than pure noise:
a real header with flipped or cut bytes gets past the magic-number checks.
"""

from __future__ import annotations

import io
import math
import threading
import time

import numpy as np
import pytest
import torch
from hostile_payloads import (
    MARKDOWN,
    assert_inert,
    both_paths,
    deep_nesting,
    npy_bytes,
    pt_bytes,
    st_bytes,
)
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from safetensors.torch import save as st_save

from normviz.io import (
    MAX_DEPTH,
    TensorLoadError,
    file_element_cap,
    load_tensor,
    load_tensors,
    max_magnitude,
    pick,
)
from ui.safe import plain
from ui.uploads import refusal_text

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


# ---- issue 12's families, on both upload paths ---------------------------------------
# Each example goes through io.load_tensors, then io.as_input per tensor (/distributions)
# and the state-dict audit (/choose): a TensorLoadError or AuditError with a message, or
# tensors within every cap, never another exception.

HOSTILE_FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))


def _loaded_within_caps(out: dict[str, torch.Tensor] | TensorLoadError) -> None:
    if isinstance(out, TensorLoadError):
        return
    assert sum(t.numel() for t in out.values()) <= file_element_cap()
    for t in out.values():
        assert t.dtype in (torch.float32, torch.float64) and t.is_contiguous()
        if t.numel():
            assert bool(torch.isfinite(t).all())
            assert float(t.abs().max()) <= max_magnitude()


@st.composite
def _shared_graphs(draw: st.DrawFn) -> object:
    """Nested lists/dicts/tuples that reuse earlier nodes (shared references) and may
    point back at themselves (cycles)."""
    nodes: list[object] = [torch.ones(2, 3), torch.zeros(4)]
    for _ in range(draw(st.integers(1, 30))):
        kids = draw(st.lists(st.integers(0, len(nodes) - 1), min_size=1, max_size=3))
        kind = draw(st.sampled_from(["list", "dict", "tuple"]))
        picked = [nodes[i] for i in kids]
        node: object = (
            picked
            if kind == "list"
            else {f"k{j}": v for j, v in enumerate(picked)}
            if kind == "dict"
            else tuple(picked)
        )
        if kind == "list" and draw(st.booleans()):
            node.append(node)  # type: ignore[union-attr]  # a cycle
        nodes.append(node)
    return nodes[-1]


@HOSTILE_FUZZ
@given(obj=_shared_graphs())
def test_shared_and_cyclic_structures(obj: object) -> None:
    t0 = time.process_time()
    out = both_paths(pt_bytes(obj), "graph.pt")
    assert time.process_time() - t0 < 2
    _loaded_within_caps(out)


@HOSTILE_FUZZ
@given(depth=st.integers(1, 3000), wrap=st.sampled_from(["]", "}"]))
def test_deep_nesting(depth: int, wrap: str) -> None:
    """Lists (or dicts under key 'k') nested `depth` deep around one tensor."""
    obj: object = torch.ones(2)
    for _ in range(min(depth, 200)):
        obj = [obj] if wrap == "]" else {"k": obj}
    out = both_paths(pt_bytes(obj), "deep.pt")
    if min(depth, 200) > MAX_DEPTH:
        assert isinstance(out, TensorLoadError) and "levels deep" in str(out)
    _loaded_within_caps(out)
    _loaded_within_caps(both_paths(deep_nesting(depth), "deep.pt"))


@HOSTILE_FUZZ
@given(shape=st.lists(st.integers(0, 2**40), min_size=1, max_size=4))
def test_zero_strides(shape: list[int]) -> None:
    """One stored value expanded to any shape: refused from the shape, before a copy."""
    try:
        data = pt_bytes(torch.zeros(1).expand(*shape))
    except RuntimeError:  # torch's own numel overflows int64: no such tensor to save
        assume(False)
    t0 = time.process_time()
    out = both_paths(data, "expand.pt")
    assert time.process_time() - t0 < 1
    if math.prod(shape) > file_element_cap() or max(shape) > file_element_cap():
        assert isinstance(out, TensorLoadError)
    _loaded_within_caps(out)


@HOSTILE_FUZZ
@given(
    value=st.one_of(
        st.floats(allow_nan=True, allow_infinity=True),
        st.integers(-(2**63), 2**64 - 1).map(float),
    ),
    dtype=st.sampled_from(["<f2", "<f4", "<f8", ">f4", ">f8", "<i8", ">i8", "<u8", "|u1"]),
    constant=st.booleans(),
)
def test_magnitudes_and_byte_orders(value: float, dtype: str, constant: bool) -> None:
    with np.errstate(all="ignore"):
        arr = np.full((3, 4), value).astype(dtype)
    if not constant:
        arr[0, 0] = 1
    out = both_paths(npy_bytes(arr), "m.npy")
    _loaded_within_caps(out)
    if not isinstance(out, TensorLoadError):
        np.testing.assert_allclose(out["tensor"].numpy(), arr.astype(np.float64), rtol=1e-6)


_ST_DTYPES = ["F32", "F16", "BF16", "F64", "I64", "U64", "U16", "BOOL", "C64", "F8_E4M3"]
_ST_DTYPES += ["F8_E8M0", "F4", "F6_E2M3", "Q4", "", "f32", "I128"]


@HOSTILE_FUZZ
@given(
    dtype=st.sampled_from(_ST_DTYPES),
    shape=st.lists(
        st.one_of(st.integers(0, 8), st.sampled_from([2**31, 2**62, 2**63 - 1])), max_size=4
    ),
    extra=st.binary(max_size=64),
)
def test_exotic_safetensors_dtypes_and_shapes(dtype: str, shape: list[int], extra: bytes) -> None:
    header = {"x": {"dtype": dtype, "shape": shape, "data_offsets": [0, len(extra)]}}
    _loaded_within_caps(both_paths(st_bytes(header, extra), "x.safetensors"))


@HOSTILE_FUZZ
@given(
    key=st.one_of(st.text(max_size=80), st.sampled_from(MARKDOWN)),
    name=st.one_of(st.text(max_size=80), st.sampled_from(MARKDOWN)),
    bad=st.booleans(),
)
def test_markdown_in_keys_and_file_names(key: str, name: str, bad: bool) -> None:
    """Keys and file names come back in messages; escaped, they render as plain text."""
    value = torch.tensor([float("nan") if bad else 1.0, 2.0])
    out = both_paths(pt_bytes({key: value, "other": torch.ones(2)}), name + ".pt")
    if isinstance(out, TensorLoadError):
        assert_inert(refusal_text(name + ".pt", out), plain(name + ".pt"))
    else:
        assert (key or "tensor") in out  # an empty key is the file's unnamed tensor
        with pytest.raises(TensorLoadError) as err:
            pick(out, key + "`")
        assert_inert(refusal_text(name, err.value))


# ---- issue 23: large uploads in flight, and a bystander ---------------------------------


def test_a_bystander_is_not_queued_behind_large_uploads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Four large CSVs are being read, each upload's run in its turn as app.py takes it;
    a bystander's /axes run then gets its turn before the uploads finish, at most the
    two being read at that moment (READS) ahead of it. Were the files read inside the
    turn, the bystander would wait for all four (a run-turn log, no clock)."""
    from conftest import assert_clean, run_app

    from benchmarks.uploads import big_csv, uploads_in_flight
    from ui import runs, uploads

    assert_clean(run_app("axes"))  # warm: imports and caches
    log: list[str] = []
    real = runs.RUNS._acquire

    def logged(progress: object) -> None:
        real(progress)
        log.append(threading.current_thread().name)

    monkeypatch.setattr(runs.RUNS, "_acquire", logged)
    uploads._CACHE.clear()
    files = [big_csv(i, 6) for i in range(4)]
    with uploads_in_flight(files, done=lambda i: log.append(f"done-{i}")):
        bystander = run_app("axes")
    assert_clean(bystander)
    turn = next(i for i, who in enumerate(log) if not who.startswith(("upload-", "done-")))
    finished_first = [who for who in log[:turn] if who.startswith("done-")]
    assert len(finished_first) <= uploads.READS.slots, log
    assert sorted(w for w in log if w.startswith("done-")) == [f"done-{i}" for i in range(4)]
    for i, data in enumerate(files):  # and every upload was read
        assert uploads.parsed_bytes(data, f"upload-{i}.csv")["tensor"].shape[1] == 2
