"""Issue 23: no file can hold a server process hostage.

The photos issue 23 found (a progressive JPEG whose AC scan is repeated 20,000 times,
photos at the pixel cap but 1-16 pixels tall) are refused from their structure
before anything is decoded: measured in a fresh process with resource.getrusage, each
costs well under a second of CPU and a few MB of memory, and no decoding worker is
started. What the structure checks let through is decoded in a worker bounded in CPU
time and memory (`normviz.io.worker`): the same bomb decoded there without the checks
is stopped by the CPU limit, an endless job too, a greedy one by the memory limit.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hostile_payloads import long_png, progressive_jpeg, scan_bomb

from normviz import NormConfigError
from normviz.io import TensorLoadError, read_bounded, worker
from normviz.pretrained import photos

ROOT = Path(__file__).resolve().parent.parent

# name -> (bytes builder, what the refusal must say)
COSTLY_PHOTOS = {
    "scan bomb": (lambda: scan_bomb(20_000), "more than 12 scans"),
    "truncated scan bomb": (lambda: scan_bomb(20_000)[:550_000], "more than 12 scans"),
    "2^20 × 16 PNG": (lambda: long_png(2**20, 16), "times its short side"),
    "2^23 × 2 PNG": (lambda: long_png(2**23, 2), "times its short side"),
    "16 × 2^20 PNG": (lambda: long_png(16, 2**20), "times its short side"),
    "4096 × 1 PNG": (lambda: long_png(4096, 1), "times its short side"),
}

_MEASURE = """
import hashlib, json, resource, sys
from normviz import NormConfigError
from normviz.io import worker
from ui import uploads

out = {}
for path in sys.argv[1:]:
    data = open(path, "rb").read()
    digest = hashlib.sha256(data).hexdigest()
    before = resource.getrusage(resource.RUSAGE_SELF)
    try:
        uploads.photo(data, digest)
        said = None
    except NormConfigError as e:
        said = str(e)
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    out[path] = {"said": said, "cpu_s": cpu, "rss_mb": (after.ru_maxrss - before.ru_maxrss) / 1024}
out["worker started"] = worker._PARENT._proc is not None
print(json.dumps(out))
"""


def test_costly_photos_are_refused_from_their_structure(tmp_path: Path) -> None:
    """Each refused within 1 s of the server's CPU and 100 MB more peak memory (both
    measured by getrusage in the server's process), before any decoding worker runs."""
    paths = {}
    for name, (build, _) in COSTLY_PHOTOS.items():
        paths[name] = tmp_path / f"{len(paths)}.img"
        paths[name].write_bytes(build())
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, *map(str, paths.values())],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result.pop("worker started") is False
    for name, (_, says) in COSTLY_PHOTOS.items():
        r = result[str(paths[name])]
        assert r["said"] is not None and says in r["said"], (name, r)
        assert r["cpu_s"] < 1.0, (name, r)
        assert r["rss_mb"] < 100, (name, r)


def test_the_scan_bomb_costs_more_than_the_budget_when_decoded() -> None:
    """The structure check is not idle: decoded without it, in the worker, the bomb
    runs out of its CPU budget (it needs about 1 ms a scan) and is refused."""
    with pytest.raises(NormConfigError, match="CPU"):
        worker.run(
            "tests.hostile_payloads:raw_photo",
            scan_bomb(20_000),
            "",
            photos.PHOTO_BUDGET,
            NormConfigError,
        )


def test_an_endless_job_is_stopped_by_the_cpu_limit() -> None:
    budget = worker.Budget(cpu_s=0.5, memory=2**28)
    with pytest.raises(TensorLoadError, match=r"more than 0\.5 s of the server's CPU"):
        worker.run("tests.hostile_payloads:spin", b"", "", budget, TensorLoadError)


def test_a_greedy_job_is_stopped_by_the_memory_limit() -> None:
    budget = worker.Budget(cpu_s=5, memory=2**28)
    with pytest.raises(TensorLoadError, match="memory"):
        worker.run("tests.hostile_payloads:hog", b"", "", budget, TensorLoadError)


def test_a_large_progressive_photo_decodes_in_the_worker_as_in_process() -> None:
    data = progressive_jpeg(4096, "RGB", quality=90)
    got = photos.read_upload(data)
    assert got.shape == (224, 224, 3) and got.dtype == np.uint8
    assert not got.flags.writeable
    np.testing.assert_array_equal(got, photos.decoded_input(data))


def test_a_truncated_progressive_photo_is_refused_with_a_message() -> None:
    data = progressive_jpeg(512, "RGB")
    with pytest.raises(NormConfigError, match="broken or truncated"):
        photos.read_upload(data[: len(data) // 2])


def test_tensor_files_read_in_the_worker_as_in_process() -> None:
    import torch

    from normviz.io import load_tensors

    csv = b"a,b\n1,2\n3,4.5\n"
    got = read_bounded(csv, "x.csv")
    want = load_tensors(csv, "x.csv")
    assert set(got) == set(want)
    torch.testing.assert_close(torch.from_numpy(np.array(got["tensor"])), want["tensor"])
    assert not got["tensor"].flags.writeable
    with pytest.raises(TensorLoadError, match="not a number"):
        read_bounded(b"1,2\n3,x\n", "x.csv")


def test_the_worker_gets_a_small_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No secret of the server's (its cookie secret), and nothing large: pytest's own
    PYTEST_CURRENT_TEST can be over the kernel's 128 KB for one variable."""
    monkeypatch.setenv("STREAMLIT_SERVER_COOKIE_SECRET", "not for the worker")
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "x" * 200_000)
    worker._PARENT._stop()  # the next job starts a warm parent with this environment
    out = worker.run("tests.hostile_payloads:environ", b"", "", photos.PHOTO_BUDGET, ValueError)
    env = json.loads(out[""].tobytes())
    assert "STREAMLIT_SERVER_COOKIE_SECRET" not in env and "PYTEST_CURRENT_TEST" not in env
    assert env["OMP_NUM_THREADS"] == "1" and env["PYTHONPATH"] == str(ROOT)
