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
from collections.abc import Iterator

import keys
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


# ---- issue 23: crafted widget values, as a modified client sends them -------------------
# Streamlit passes a string it does not know through as a selectbox's, radio's or
# multiselect's value, and a chart's selection event is whatever JSON arrived. Each
# value below goes in as the raw widget state a client would send; the page must answer
# without an exception (the value ignored, or a message).

# (Streamlit itself raises on an event that is not a JSON object or whose "selection"
# is not one, before any callback: those are left out.)
CRAFTED_EVENTS = [
    [],
    {"selection": {}},
    {"selection": {"points": "points"}},
    {"selection": {"points": {"0": {"customdata": [0, 0, 0]}}}},
    {"selection": {"points": ["a", 1, None, []]}},
    {"selection": {"points": [{"customdata": [[1]]}, {"customdata": {"a": 1}}]}},
    {"selection": {"points": [{"customdata": [1e308, -5, "x", None]}]}},
    {"selection": {"points": [{"customdata": [10**30, 10**30, 10**30]}]}},
    {"selection": {"points": [{"customdata": True}, {"customdata": -1}, {"customdata": 10**9}]}},
    {"selection": {"points": [{"customdata": "0"}, {"customdata": 1.5}, {"customdata": 0}]}},
]
CRAFTED_STRINGS = ["", "zzz", "-1", "999999", "1e9", "nan", "**bold** [x](http://e)", "\x00"]


def _widget_id(at: object, key: str) -> str:
    """The id of the widget (or selectable chart) whose key is `key`, in `at`'s last run."""

    def walk(node: object) -> Iterator[object]:
        for child in getattr(node, "children", {}).values():
            yield child
            yield from walk(child)

    for node in walk(at._tree):  # type: ignore[attr-defined]
        wid = getattr(node, "id", None) or getattr(getattr(node, "proto", None), "id", None)
        if isinstance(wid, str) and wid.endswith("-" + key):
            return wid
    raise AssertionError(f"no widget with key {key!r}")


def _send(monkeypatch: pytest.MonkeyPatch, at: object, key: str, **field: object) -> None:
    """The next runs of `at` carry this raw state for widget `key`, as a modified client
    would send it: string_value=..., json_value=... or string_array_value=[...]. (A
    chart's selection travels as JSON of its JSON text: Streamlit decodes it twice.)"""
    from streamlit.proto.WidgetStates_pb2 import WidgetState, WidgetStates
    from streamlit.testing.v1.element_tree import ElementTree

    wid = _widget_id(at, key)
    real = ElementTree.get_widget_states

    def states(self: ElementTree) -> WidgetStates:
        out = WidgetStates()
        out.widgets.extend(w for w in real(self).widgets if w.id != wid)
        ws = WidgetState(id=wid)
        for name, value in field.items():
            if name == "string_array_value":
                ws.string_array_value.data[:] = value
            else:
                setattr(ws, name, value)
        out.widgets.append(ws)
        return out

    monkeypatch.setattr(ElementTree, "get_widget_states", states)


# (Crafted picks on the tensor grids of /axes, /practice, /worked-example: test_tensorgrid.py.)


def _practice_grid(kind: str, seed: int) -> None:
    from normviz import practice
    from ui import practice as ui_practice

    ex = practice.exercise(kind, seed)
    ui_practice.grid(ex, "t", None)
    import streamlit as st

    st.session_state["answer"] = ui_practice.answer_input(ex, "t")


@pytest.mark.parametrize("event", CRAFTED_EVENTS, ids=range(len(CRAFTED_EVENTS)))
def test_crafted_grid_clicks_and_cells_on_practice(
    monkeypatch: pytest.MonkeyPatch, event: object
) -> None:
    """The exercise grid's pick (ui/tensorgrid.py, `_on_pick`) and the picked-cells
    multiselect with values the grid never offered: ignored, and the answer holds only
    offered cells."""
    from streamlit.testing.v1 import AppTest
    from test_tensorgrid import pick

    from normviz import practice

    at = AppTest.from_function(_practice_grid, args=("cells", 3), default_timeout=60)
    at.run()
    assert not at.exception
    names = list(practice.cell_names(practice.exercise("cells", 3).case))
    pick(monkeypatch, at, "pr_grid_t", event)  # a modified client's pick
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    monkeypatch.undo()
    _send(monkeypatch, at, "pr_cells_t", string_array_value=[names[0], *CRAFTED_STRINGS])
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["answer"] == "0"


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=9), kids),
    max_leaves=12,
)


@FUZZ
@given(event=_JSON, values=_JSON)
def test_the_widget_value_checks_keep_only_what_was_offered(event: object, values: object) -> None:
    """ui.safe on any JSON: points are mappings; offered values are options, each once."""
    from ui import safe

    assert all(isinstance(p, dict) for p in safe.points({"selection": {"points": event}}))
    names = ["a", "b", "c"]
    kept = safe.offered_all(values, names)
    assert all(v in names for v in kept) and len(set(kept)) == len(kept)
    assert all(type(i) is int and 0 <= i < 3 for i in safe.offered_all(values, range(3)))
    assert safe.offered(values, range(3), None) in (None, 0, 1, 2)
    assert safe.offered(True, range(3), None) is None  # True is not the option 1


# ---- issue 23: photos whose cost hides in their structure -------------------------------

PHOTO_FUZZ = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))


def _photo_or_refusal(data: bytes) -> np.ndarray | None:
    """The photo through the server's path (checks, then the bounded worker): the
    model's input, or None for a refusal with a message; never another exception."""
    from normviz import NormConfigError
    from normviz.pretrained import photos

    try:
        out = photos.read_upload(data)
    except NormConfigError as e:
        assert str(e).strip() and "Traceback" not in str(e)
        return None
    assert out.shape == (224, 224, 3) and out.dtype == np.uint8
    return out


@PHOTO_FUZZ
@given(repeats=st.integers(0, 40), cut=st.one_of(st.none(), st.floats(0.05, 0.99)))
def test_progressive_scans_and_truncations(repeats: int, cut: float | None) -> None:
    """A progressive JPEG with one scan repeated, maybe cut short: more than 12 scans is
    refused from the structure; fewer decode or are refused as broken."""
    from hostile_payloads import jpeg_scan_spans, scan_bomb

    from normviz.pretrained import photos

    data = scan_bomb(repeats, side=256)
    if cut is not None:
        data = data[: max(4, int(len(data) * cut))]
    out = _photo_or_refusal(data)
    if photos.jpeg_scans(data, 10**6) > photos.MAX_SCANS:
        assert out is None
    if cut is None and repeats == 0:
        assert out is not None and len(jpeg_scan_spans(data)) <= photos.MAX_SCANS


@PHOTO_FUZZ
@given(short=st.integers(1, 300), ratio=st.floats(1, 64), tall=st.booleans())
def test_aspect_ratios(short: int, ratio: float, tall: bool) -> None:
    """Any aspect ratio: up to 16:1 it decodes, beyond it is refused before decoding."""
    from hostile_payloads import long_png

    from normviz.pretrained import photos

    long = min(4096, max(short, round(short * ratio)))
    w, h = (short, long) if tall else (long, short)
    out = _photo_or_refusal(long_png(w, h))
    assert (out is None) == (max(w, h) > photos.MAX_ASPECT * min(w, h))


@pytest.mark.parametrize("value", CRAFTED_STRINGS[:4])
def test_a_crafted_update_rule_on_batchnorm(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    """The update-rule radio's callback (`_on_convention`) with a rule it never offered."""
    from conftest import assert_clean, run_app

    at = run_app("batchnorm")
    _send(monkeypatch, at, keys.key("batchnorm", "convention"), string_value=value)
    at.run()
    assert_clean(at)
