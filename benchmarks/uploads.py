"""A bystander's /axes run while large uploads are being read (issue 23).

    python -m benchmarks.uploads [--uploads 10] [--mb 49.9]

Starts `--uploads` threads, each taking a page-run turn (`ui/runs.py`) as app.py does
and reading a different CSV of `--mb` MB through `ui.uploads.parsed_bytes` (hashed
outside the turn, read in the bounded worker behind the READS gate), then, once every
one of them is past the turn, runs /axes through AppTest. Prints the bystander's
time on an idle process, its time with the uploads in flight, and the ratio.
Issue 23 measured 0.04 s idle and 19.8 s behind ten 49.9 MB CSVs read in the turn.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from benchmarks.common import ROOT, app_test
from ui import runs, uploads


def big_csv(i: int, mb: float) -> bytes:
    """A CSV of about `mb` MB, two columns of numbers, different for each `i`."""
    row = b"0.5,1.25\n"
    return f"{i},{i}\n".encode() + row * int(mb * 2**20 / len(row))


@contextmanager
def uploads_in_flight(
    files: list[bytes], done: Callable[[int], None] = lambda i: None
) -> Iterator[list[threading.Thread]]:
    """Threads reading `files` as page runs would (each in a turn); the block starts once
    every one is past its turn (reading, or queued to read); `done(i)` as each ends."""

    def read(i: int, data: bytes) -> None:
        with runs.turn():
            try:
                uploads.parsed_bytes(data, f"upload-{i}.csv")
            finally:
                done(i)

    threads = [
        threading.Thread(target=read, args=(i, d), name=f"upload-{i}", daemon=True)
        for i, d in enumerate(files)
    ]
    for t in threads:
        t.start()
    while uploads.READS._inside + uploads.READS.waiting < len(files):
        if not any(t.is_alive() for t in threads):
            break
        time.sleep(0.005)
    try:
        yield threads
    finally:
        for t in threads:
            t.join()


def _axes() -> float:
    at = app_test("axes")
    t0 = time.perf_counter()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--uploads", type=int, default=10)
    p.add_argument("--mb", type=float, default=49.9)
    args = p.parse_args()
    _axes()  # imports and caches
    idle = statistics.median(_axes() for _ in range(3))
    files = [big_csv(i, args.mb) for i in range(args.uploads)]
    uploads._CACHE.clear()
    t0 = time.perf_counter()
    with uploads_in_flight(files):
        busy = _axes()
    total = time.perf_counter() - t0
    print(f"root {ROOT}: {args.uploads} uploads of {args.mb} MB, read in {total:.1f} s")
    print(f"/axes idle {idle:.2f} s, with the uploads in flight {busy:.2f} s")
    print(f"bystander ratio {busy / idle:.2f} (issue 23: 19.8 / 0.04 before reads left the turn)")


if __name__ == "__main__":
    main()
