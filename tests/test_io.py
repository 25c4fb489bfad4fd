"""normviz.io: every format round-trips, hostile files run nothing, every refusal says why."""

from __future__ import annotations

import io
import pickle
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save as st_save

from normviz.io import (
    TensorLoadError,
    as_input,
    load_tensor,
    load_tensors,
    upload_limit_bytes,
)


def npy_bytes(arr: np.ndarray, allow_pickle: bool = False) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=allow_pickle)
    return buf.getvalue()


def pt_bytes(obj: object) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


# ---- round trips ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arr", "dtype"),
    [
        (np.random.default_rng(0).standard_normal((3, 4, 5)).astype(np.float32), torch.float32),
        (np.random.default_rng(1).standard_normal((2, 3, 4, 5)), torch.float64),  # kept
        (np.arange(12, dtype=np.int64).reshape(3, 4), torch.float32),
        (np.arange(6, dtype=np.uint8).reshape(2, 3), torch.float32),
        (np.linspace(-1, 1, 6, dtype=np.float16).reshape(2, 3), torch.float32),
        (np.array([[True, False], [False, True]]), torch.float32),
    ],
)
def test_npy_round_trip(arr: np.ndarray, dtype: torch.dtype) -> None:
    got = load_tensors(npy_bytes(arr), "x.npy")
    assert list(got) == ["tensor"]
    assert got["tensor"].dtype == dtype
    np.testing.assert_array_equal(got["tensor"].numpy(), arr.astype(got["tensor"].numpy().dtype))


def test_npy_fortran_order_round_trip() -> None:
    arr = np.asfortranarray(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    np.testing.assert_array_equal(load_tensor(npy_bytes(arr), "f.npy").numpy(), arr)


@pytest.mark.parametrize("ext", [".pt", ".pth"])
def test_pt_bare_tensor_and_dict(ext: str) -> None:
    t = torch.randn(2, 3, 4)
    np.testing.assert_array_equal(load_tensor(pt_bytes(t), "a" + ext).numpy(), t.numpy())
    d = {"x": torch.randn(4, 5), "y": torch.arange(6).reshape(2, 3), "step": 7, "name": "run"}
    got = load_tensors(pt_bytes(d), "d" + ext)
    assert set(got) == {"x", "y"}  # non-tensor values are skipped
    assert got["y"].dtype == torch.float32
    np.testing.assert_array_equal(got["x"].numpy(), d["x"].numpy())


def test_pt_state_dict_and_nested_checkpoint() -> None:
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4))
    sd = model.state_dict()
    got = load_tensors(pt_bytes(sd), "model.pt")
    assert set(got) == set(sd)
    for k, v in sd.items():
        np.testing.assert_array_equal(got[k].numpy(), v.float().numpy())
    ckpt = {"model": sd, "epochs": [torch.tensor(1.5), torch.tensor(2.5)]}
    got = load_tensors(pt_bytes(ckpt), "ckpt.pt")
    assert "model.1.running_var" in got and "epochs.1" in got
    assert float(got["epochs.1"]) == 2.5


def test_pt_parameter_becomes_plain_tensor() -> None:
    p = torch.nn.Parameter(torch.randn(3, 4))
    got = load_tensor(pt_bytes(p), "p.pt")
    assert type(got) is torch.Tensor and not got.requires_grad
    assert got.shape == (1, 3, 4)


def test_safetensors_round_trip_and_key_choice() -> None:
    a, b = torch.randn(2, 3, 4), torch.randn(1, 2, 3, 3, dtype=torch.bfloat16)
    data = st_save({"a": a, "b": b})
    got = load_tensors(data, "w.safetensors")
    assert set(got) == {"a", "b"}
    np.testing.assert_array_equal(got["a"].numpy(), a.numpy())
    assert got["b"].dtype == torch.float32
    np.testing.assert_array_equal(got["b"].numpy(), b.float().numpy())
    assert load_tensor(data, "w.safetensors", key="b").shape == (1, 2, 3, 3)
    with pytest.raises(TensorLoadError, match="2 tensors"):
        load_tensor(data, "w.safetensors")
    with pytest.raises(TensorLoadError, match="no tensor named 'c'"):
        load_tensor(data, "w.safetensors", key="c")


@pytest.mark.parametrize(
    "text",
    [
        "1,2,3\n4,5,6\n",
        "a,b,c\n1,2,3\n4,5,6\n",  # header row of names
        "1\t2\t3\n4\t5\t6",  # tab-separated, no final newline
        "\ufeff1;2;3\r\n4;5;6\r\n\r\n",  # BOM, semicolons, CRLF, blank line
    ],
)
def test_csv_matrix_is_one_sequence(text: str) -> None:
    x = load_tensor(text.encode(), "m.csv")
    assert x.shape == (1, 2, 3) and x.dtype == torch.float32
    np.testing.assert_array_equal(x[0].numpy(), [[1, 2, 3], [4, 5, 6]])


def test_rank_decides_the_layout() -> None:
    for shape, want, layout in [
        ((5, 3), (1, 5, 3), "BTC"),
        ((2, 5, 3), (2, 5, 3), "BTC"),
        ((2, 3, 4, 4), (2, 3, 4, 4), "NCHW"),
    ]:
        u = as_input(torch.zeros(shape))
        assert tuple(u.tensor.shape) == want and u.layout == layout and u.source_shape == shape


# ---- hostile files -------------------------------------------------------------------


class CreatesFile:
    """Unpickling this creates `path`: the payload a malicious checkpoint would carry."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self) -> tuple[Callable[..., object], tuple[str, str]]:
        return (open, (self.path, "w"))


def _raw_pickle_zip(payload: object) -> bytes:
    """A torch-style zip whose data.pkl is a plain pickle of `payload`."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", pickle.dumps(payload, protocol=2))
        z.writestr("archive/byteorder", "little")
        z.writestr("archive/version", "3\n")
    return buf.getvalue()


HOSTILE: dict[str, tuple[str, Callable[[object], bytes]]] = {
    "torch.save object": (".pt", lambda p: pt_bytes({"weight": torch.ones(2), "x": p})),
    "raw pickle zip": (".pt", _raw_pickle_zip),
    "bare pickle as .pt": (".pth", lambda p: pickle.dumps(p)),
    "npy object array": (".npy", lambda p: npy_bytes(np.array([p], dtype=object), True)),
    "pickle as .npy": (".npy", lambda p: pickle.dumps(p)),
}


def test_hostile_payload_is_live(tmp_path: Path) -> None:
    """The payload really creates its file when unpickled unsafely (so the tests can fail)."""
    marker = tmp_path / "created"
    pickle.loads(pickle.dumps(CreatesFile(marker)))
    assert marker.exists()


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_file_is_refused_and_runs_nothing(case: str, tmp_path: Path) -> None:
    ext, build = HOSTILE[case]
    marker = tmp_path / "pwned"
    data = build(CreatesFile(marker))
    with pytest.raises(TensorLoadError) as err:
        load_tensors(data, "evil" + ext)
    assert len(str(err.value)) > 30
    assert not marker.exists()


def test_hostile_pt_message_names_the_refusal(tmp_path: Path) -> None:
    data = pt_bytes(CreatesFile(tmp_path / "pwned"))
    with pytest.raises(TensorLoadError, match="run arbitrary code") as err:
        load_tensor(data, "evil.pt")
    assert "builtins" in str(err.value) or "open" in str(err.value)
    assert not (tmp_path / "pwned").exists()


def test_zip_bomb_is_refused() -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("archive/data.pkl", pickle.dumps(torch.zeros(1), protocol=2))
        z.writestr("archive/data/0", b"\0" * (40 * 2**20))
    assert len(buf.getvalue()) < 2**20
    with pytest.raises(TensorLoadError, match="zip bomb"):
        load_tensors(buf.getvalue(), "bomb.pt")


def test_npy_header_promising_a_huge_array_allocates_nothing() -> None:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": "<f4", "fortran_order": False, "shape": (10**6, 10**6)}
    )
    buf.write(b"\0" * 64)
    with pytest.raises(TensorLoadError, match="truncated"):
        load_tensors(buf.getvalue(), "huge.npy")


# ---- refusals, each with a reason ----------------------------------------------------


def _nonfinite() -> np.ndarray:
    a = np.zeros((4, 5), np.float32)
    a[0, :2] = np.nan
    a[1, 0] = np.inf
    a[2, 1:4] = -np.inf
    return a


REFUSED: list[tuple[str, bytes, str, str]] = [
    ("empty", b"", "x.npy", "empty"),
    ("unknown extension", b"1,2", "x.txt", "unknown file type"),
    ("no extension", b"1,2", "tensor", "unknown file type"),
    ("npz", npy_bytes(np.zeros(3)), "x.npz", "unknown file type"),
    ("text npy", npy_bytes(np.array(["a", "b"])), "s.npy", "text"),
    ("complex npy", npy_bytes(np.ones(3, np.complex64)), "c.npy", "complex"),
    ("complex pt", pt_bytes(torch.ones(2, 2, dtype=torch.complex64)), "c.pt", "complex"),
    (
        "complex safetensors",
        st_save({"z": torch.ones(2, dtype=torch.complex64)}),
        "c.safetensors",
        "complex",
    ),
    ("structured npy", npy_bytes(np.zeros(3, [("a", "f4")])), "r.npy", "not a plain number"),
    ("datetime npy", npy_bytes(np.array(["2020-01-01"], "datetime64[D]")), "d.npy", "dtype"),
    ("sparse pt", pt_bytes(torch.eye(3).to_sparse()), "s.pt", "sparse"),
    ("nonfinite npy", npy_bytes(_nonfinite()), "n.npy", "2 NaN, 1 \\+inf and 3 −inf"),
    ("nonfinite csv", b"1,nan\ninf,2\n", "n.csv", "1 NaN and 1 \\+inf"),
    (
        "nonfinite pt key",
        pt_bytes({"ok": torch.ones(2), "bad": torch.tensor([np.nan])}),
        "",
        "'bad'",
    ),
    ("ragged csv", b"1,2,3\n4,5\n", "r.csv", "ragged: line 2 has 2 values"),
    ("empty csv cell", b"1,2\n3,\n", "e.csv", "empty value at line 2, column 2"),
    ("word in csv", b"1,2\n3,four\n", "w.csv", "'four' at line 2, column 2"),
    ("csv header only", b"a,b\n", "h.csv", "no rows of numbers"),
    ("blank csv", b"\n \n", "b.csv", "no rows"),
    ("not utf-8 csv", b"\xff\xfe\x00\x01", "u.csv", "UTF-8"),
    ("corrupt npy", b"\x93NUMPY\x01\x00garbage", "g.npy", "corrupt"),
    ("not npy", b"hello world", "g.npy", "not a .npy file"),
    ("truncated npy", npy_bytes(np.zeros((10, 10), np.float32))[:-8], "t.npy", "truncated"),
    ("corrupt pt zip", pt_bytes(torch.ones(3))[:200], "g.pt", "corrupt"),
    (
        "corrupt safetensors",
        b"\x08\x00\x00\x00\x00\x00\x00\x00{bad json",
        "g.safetensors",
        "corrupt",
    ),
    ("pt without tensors", pt_bytes({"lr": 0.1, "name": "x"}), "n.pt", "holds no tensors"),
]


@pytest.mark.parametrize(
    ("data", "filename", "pattern"),
    [(d, f or "n.pt", p) for _, d, f, p in REFUSED],
    ids=[c[0] for c in REFUSED],
)
def test_refusals_say_why(data: bytes, filename: str, pattern: str) -> None:
    with pytest.raises(TensorLoadError, match=pattern) as err:
        load_tensors(data, filename)
    assert isinstance(err.value, ValueError)
    assert len(str(err.value)) > 20


def test_nonfinite_in_a_dict_names_the_key() -> None:
    data = pt_bytes({"ok": torch.ones(2), "bad": torch.tensor([np.nan, 1.0, np.inf])})
    with pytest.raises(TensorLoadError, match="tensor 'bad' holds 1 NaN and 1 \\+inf"):
        load_tensors(data, "d.pt")


def test_the_upload_limit_is_50_mb_with_room_in_streamlits() -> None:
    """The app reads up to 50 MB; Streamlit's limit leaves room for the request's
    multipart framing and for a larger file to reach the app's message (issue 23)."""
    import tomllib

    from normviz.io.checks import UPLOAD_MB

    assert upload_limit_bytes() == UPLOAD_MB * 2**20 == 50 * 2**20
    conf = tomllib.loads((Path(__file__).parent.parent / ".streamlit/config.toml").read_text())
    assert conf["server"]["maxUploadSize"] >= UPLOAD_MB + 5
    data = npy_bytes(np.zeros(1, np.float32))
    big = data + b"\0" * (upload_limit_bytes() + 1 - len(data))
    with pytest.raises(TensorLoadError, match="over the upload limit of 50 MB"):
        load_tensors(big, "big.npy")


@pytest.mark.parametrize(
    ("shape", "pattern"),
    [((7,), "1-D"), ((), "0-D"), ((1, 2, 2, 2, 2), "5-D"), ((0, 3), "size 0")],
)
def test_ranks_the_layouts_cannot_hold(shape: tuple[int, ...], pattern: str) -> None:
    with pytest.raises(TensorLoadError, match=pattern):
        load_tensor(npy_bytes(np.zeros(shape, np.float32)), "r.npy")


def test_element_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NORMVIZ_MAX_ELEMENTS", "100")
    assert load_tensor(npy_bytes(np.zeros((10, 10))), "ok.npy").shape == (1, 10, 10)
    with pytest.raises(TensorLoadError, match="101 elements, over the app's cap of 100"):
        load_tensor(npy_bytes(np.zeros((1, 101))), "big.npy")


def test_not_bytes_is_refused() -> None:
    with pytest.raises(TensorLoadError, match="bytes"):
        load_tensors("1,2,3", "x.csv")  # type: ignore[arg-type]
