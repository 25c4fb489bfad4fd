"""ui.uploads: one parse per file, a cache sized by bytes, refusals shown escaped."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import pytest
import torch
from hostile_payloads import MARKDOWN, assert_inert, npy_bytes, pt_bytes
from streamlit.testing.v1 import AppTest

from normviz import io
from ui import uploads
from ui.safe import plain


@dataclass
class FakeUpload:
    """What st.file_uploader returns, as far as the pages use it."""

    name: str
    data: bytes

    def getvalue(self) -> bytes:
        return self.data


@pytest.fixture(autouse=True)
def empty_cache() -> None:
    uploads._CACHE.clear()
    uploads.REFUSED.clear()


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The file names a file was really read with (normviz.io.read_bounded: the worker)."""
    calls: list[str] = []
    real = io.read_bounded

    def counted(data: bytes, filename: str) -> dict[str, np.ndarray]:
        calls.append(filename)
        return real(data, filename)

    monkeypatch.setattr(io, "read_bounded", counted)
    return calls


def test_a_file_is_parsed_once(loads: list[str]) -> None:
    data = pt_bytes({"w": torch.arange(6.0).reshape(2, 3), "b": torch.ones(3)})
    first = uploads.parsed(FakeUpload("model.pt", data))
    again = uploads.parsed(FakeUpload("renamed.pt", data))  # same bytes, same format
    assert loads == ["model.pt"]
    assert set(first) == {"w", "b"} and isinstance(first["w"], np.ndarray)
    np.testing.assert_array_equal(again["w"], [[0, 1, 2], [3, 4, 5]])
    first.pop("w")  # the caller's dict is its own
    assert set(uploads.parsed(FakeUpload("model.pt", data))) == {"w", "b"}


def test_the_extension_is_part_of_the_key(loads: list[str]) -> None:
    data = b"1,2\n3,4\n"
    assert uploads.parsed_bytes(data, "a.csv")["tensor"].shape == (2, 2)
    with pytest.raises(io.TensorLoadError, match=r"not a \.npy file"):
        uploads.parsed_bytes(data, "a.npy")
    assert loads == ["a.csv", "a.npy"]


def test_a_refusal_is_cached_and_raised_again(loads: list[str]) -> None:
    bad = npy_bytes(np.array([np.nan, 1.0]))
    for _ in range(3):
        with pytest.raises(io.TensorLoadError, match="1 NaN"):
            uploads.parsed_bytes(bad, "bad.npy")
    assert loads == ["bad.npy"]


def test_the_cache_is_bounded_by_bytes() -> None:
    lru = uploads._ByteLRU(budget=10_000)
    arr = np.zeros(500, np.float32)  # 2,000 bytes (+ the per-entry charge)
    for i in range(10):
        lru.put((str(i), ".npy"), {"x": arr})
    assert lru.nbytes <= 10_000 and len(lru) == 10_000 // (2_000 + uploads._ENTRY_OVERHEAD + 1)
    assert lru.get(("0", ".npy")) is None and lru.get(("9", ".npy")) is not None
    lru.put(("big", ".npy"), {"x": np.zeros(5_000, np.float32)})  # larger than the budget
    assert lru.get(("big", ".npy")) is None and lru.get(("9", ".npy")) is not None


def test_the_least_recently_used_goes_first() -> None:
    lru = uploads._ByteLRU(budget=3 * (400 + uploads._ENTRY_OVERHEAD + 1))
    for k in "abc":
        lru.put((k, ""), {"x": np.zeros(100, np.float32)})
    assert lru.get(("a", "")) is not None  # a is now the most recent
    lru.put(("d", ""), {"x": np.zeros(100, np.float32)})
    assert [lru.get((k, "")) is not None for k in "abcd"] == [True, False, True, True]


def test_the_default_budget_holds_a_few_of_the_largest_files() -> None:
    largest = io.file_element_cap() * 4  # float32
    assert 2 * largest <= uploads.CACHE_BYTES <= 8 * largest


def test_threads_keep_the_byte_count_exact() -> None:
    lru = uploads._ByteLRU(budget=50_000)

    def work(t: int) -> None:
        for i in range(200):
            lru.put((f"{t}-{i % 30}", ""), {"x": np.zeros(1 + (i * 7 + t) % 300, np.float32)})
            lru.get((f"{t}-{(i * 3) % 30}", ""))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert lru.nbytes == sum(size for _, size in lru._items.values()) <= 50_000


def _show_refusal(name: str, message: str) -> None:
    from normviz.io import TensorLoadError
    from ui import uploads

    uploads.refusal(name, TensorLoadError(message))


@pytest.mark.parametrize("payload", MARKDOWN)
def test_a_refusal_shows_the_name_and_message_literally(payload: str) -> None:
    at = AppTest.from_function(_show_refusal, args=(payload + ".pt", f"tensor {payload!r} is bad"))
    at.run()
    (box,) = at.error
    assert_inert(box.value, plain(payload + ".pt"))
    assert box.value.startswith("**") and " was refused:** " in box.value


# ---- issue 23: refusals remembered by content hash; issue 25: shared arrays read-only ----


def test_a_refusal_outlives_the_parse_cache(loads: list[str]) -> None:
    """Refusals are kept apart from parsed files: evicting those does not forget them."""
    bad = b"1,2\n3,x\n"
    for _ in range(2):
        with pytest.raises(io.TensorLoadError, match="not a number"):
            uploads.parsed_bytes(bad, "bad.csv")
        uploads._CACHE.clear()
    assert loads == ["bad.csv"]


def test_a_refused_photo_is_refused_again_without_decoding(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from hostile_payloads import progressive_jpeg

    from normviz import NormConfigError
    from normviz.pretrained import photos

    calls: list[int] = []
    real = photos.read_upload

    def counted(data: bytes) -> np.ndarray:
        calls.append(len(data))
        return real(data)

    monkeypatch.setattr(photos, "read_upload", counted)
    data = progressive_jpeg(256, "RGB")
    broken = data[: len(data) // 2]  # truncated: refused by the decoder in the worker
    said = []
    for _ in range(3):
        with pytest.raises(NormConfigError, match="broken or truncated") as e:
            uploads.photo(broken, "digest-of-broken")
        said.append(str(e.value))
    assert calls == [len(broken)] and len(set(said)) == 1
    good = uploads.photo(data, "digest-of-good")
    assert good.shape == (224, 224, 3) and not good.flags.writeable


def test_one_session_cannot_modify_the_arrays_another_reads() -> None:
    """The cached arrays are read-only (and cannot be made writable again); a session's
    tensor is its own copy, so writing into it leaves the next session's values alone."""
    from ui import inputs

    x = torch.arange(24.0).reshape(2, 3, 4)
    data = npy_bytes(x.numpy())
    key, parsed = inputs.read_upload(data, "x.npy")
    arr = parsed["tensor"]
    with pytest.raises(ValueError):
        arr[0, 0, 0] = 99.0
    with pytest.raises(ValueError):
        arr.setflags(write=True)
    upload = inputs.Upload(key, "tensor", "BTC", (2, 3, 4))
    mine = upload.tensor()
    mine.mul_(0).add_(7)  # one session writes into its tensor
    saved = inputs.SavedFile("x.npy", b"", key).tensors()["tensor"]
    saved.zero_()
    torch.testing.assert_close(upload.tensor(), x)  # the next session reads the file's values
    torch.testing.assert_close(torch.from_numpy(np.array(uploads.cached(key)["tensor"])), x)


def _npy_of_size(size: int) -> bytes:
    """An .npy file of float32 zeros, `size` bytes long (one 128-byte header)."""
    n = (size - 128) // 4
    data = npy_bytes(np.zeros(n, np.float32))
    assert len(data) == size, len(data)
    return data


@pytest.mark.browser
def test_the_upload_limit_is_the_apps_in_a_browser(page, server, tmp_path) -> None:
    """Issue 23: a file 128 bytes under 50 MB reaches the app (no reset connection), and a
    55 MB file gets the app's own message, "over the upload limit of 50 MB"."""
    from conftest import assert_no_exception, open_app, wait_done

    open_app(page, server, "distributions")
    page.get_by_text("Bring your own tensor").click()
    cases = [
        # read whole: the message names all of its 13,107,136 values' shape
        ("edge.npy", _npy_of_size(50 * 2**20 - 128), "shape (13107136,)"),
        ("big.npy", _npy_of_size(55 * 2**20), "over the upload limit of 50 MB"),
    ]
    for name, data, says in cases:
        (tmp_path / name).write_bytes(data)  # Playwright takes buffers up to 50 MB only
        page.locator("input[type=file]").set_input_files(tmp_path / name)
        page.get_by_text(f"{name} was refused:").wait_for(timeout=180_000)
        wait_done(page, timeout=180_000)
        assert_no_exception(page)
        body = page.inner_text("body")
        assert says in body, body[body.find(f"{name} was refused") :][:400]
