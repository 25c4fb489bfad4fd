"""Server CPU of one full page run, per page: a seed change on a real server.

Starts `streamlit run app.py`, opens each page over the websocket (benchmarks.load's
client protocol) and changes its seed `--runs` times, one run after the other; every
seed is new data, so each run computes. It prints the server's CPU seconds per run
(/proc/<pid>/stat, the whole process: the script thread, the serialization and the
websocket). That depends less on the rest of the machine than wall time does, but on a
busy 2-core machine it still moved by a third from one pass to the next: compare two
versions in turns, several passes each (docs/serving.md).

With `--profile DIR` it then records the same runs again under py-spy (raw collapsed
stacks, DIR/<page>.txt) and prints the functions with the most samples (inclusive),
so a page's cost can be split between the common layer and the page's own work.

    python -m benchmarks.run_cost [--runs 20] [--pages axes,distributions]
    python -m benchmarks.run_cost --runs 30 --profile /tmp/prof
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import signal
import subprocess
import time
from pathlib import Path

from benchmarks.common import cpu_seconds, serve, url_path
from benchmarks.load import _set, _widget, _ws_elements, _ws_until_finished, click_pages


async def _session(url: str, pid: int, page: str, runs: int, seed: int, probe=None) -> float:
    """Open `page`, then change its seed `runs` times; server `pid`'s CPU s per seed change.
    `probe(phase)` is called before the timed runs ("start") and after them ("stop")."""
    import websockets
    from streamlit.proto.BackMsg_pb2 import BackMsg

    query = f"layout=BTC&seed={seed}"
    async with websockets.connect(
        url.replace("http", "ws") + "/_stcore/stream",
        subprotocols=["streamlit"],  # type: ignore[list-item]
        max_size=None,
        open_timeout=120,
    ) as ws:
        msg = BackMsg()
        msg.rerun_script.query_string = query
        msg.rerun_script.page_name = url_path(page)
        await ws.send(msg.SerializeToString())
        elements = await _ws_elements(ws)
        seed_id, _, is_int = _widget(elements, "seed")

        async def change(s: int) -> None:
            m = BackMsg()
            m.rerun_script.query_string = query
            m.rerun_script.page_name = url_path(page)
            w = m.rerun_script.widget_states.widgets.add()
            w.id = seed_id
            _set(w, is_int, s)
            await ws.send(m.SerializeToString())
            written = await _ws_until_finished(ws)
            if f"seed={s}" not in written.split("&"):
                raise RuntimeError(f"{page}: the URL says {written!r}, not seed={s}")

        for _ in range(2):  # warm: the page's code paths, its caches' first entries
            seed += 7919
            await change(seed)
        if probe:
            probe("start")
        c0 = cpu_seconds(pid)
        for _ in range(runs):
            seed += 7919
            await change(seed)
        c1 = cpu_seconds(pid)
        if probe:
            probe("stop")
        return (c1 - c0) / max(1, runs)


class _Spy:
    """py-spy recording server `pid` between "start" and "stop", into `out`."""

    def __init__(self, pid: int, out: Path) -> None:
        self.pid, self.out, self.proc = pid, out, None

    def __call__(self, phase: str) -> None:
        if phase == "start":
            self.proc = subprocess.Popen(
                [
                    "py-spy",
                    "record",
                    "--pid",
                    str(self.pid),
                    "--format",
                    "raw",
                    "--rate",
                    "200",
                    "--output",
                    str(self.out),
                    "--gil",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            time.sleep(1.0)  # py-spy attaches
        elif self.proc is not None:
            self.proc.send_signal(signal.SIGINT)
            self.proc.wait(timeout=60)


def top_functions(path: Path, n: int = 40) -> list[tuple[str, float]]:
    """(function, share of the samples) with the most samples, inclusive. py-spy records
    only the thread holding the GIL (`--gil`): the time a run's Python work takes."""
    incl: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        c = int(count)
        total += c
        for f in set(frames):
            incl[f] += c
    return [(f, c / max(1, total)) for f, c in incl.most_common(n)]


async def main_async(args: argparse.Namespace) -> None:
    pages = args.pages.split(",") if args.pages else click_pages()
    with serve() as (url, pid):
        await _session(url, pid, pages[0], 0, 1)  # the server's first run: its imports
        print(f"server CPU s per seed change ({args.runs} runs each, one at a time)")
        for i, page in enumerate(pages):
            cost = await _session(url, pid, page, args.runs, 1000 + i)
            print(f"  {page:16} {cost:.4f}", flush=True)
        if args.profile:
            out = Path(args.profile)
            out.mkdir(parents=True, exist_ok=True)
            for i, page in enumerate(pages):
                await _session(url, pid, page, args.runs, 5000 + i, _Spy(pid, out / f"{page}.txt"))
                print(f"\n{page}: py-spy, inclusive share of the GIL samples")
                for f, share in top_functions(out / f"{page}.txt", args.top):
                    print(f"  {share:6.1%}  {f[:150]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--pages", default="", help="comma-separated (default: the load's pages)")
    ap.add_argument("--profile", default="", help="a directory for py-spy's raw stacks")
    ap.add_argument("--top", type=int, default=60)
    asyncio.run(main_async(ap.parse_args()))


if __name__ == "__main__":
    main()
