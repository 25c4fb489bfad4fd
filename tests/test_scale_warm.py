"""Warm start: a class opening deep links at the same moment on a freshly started server.

Every entry point imports ui.warmup first (the heavy imports, one thread at a time),
so concurrent first runs cannot interleave torch/pandas/plotly imports; a deep link
whose first run Streamlit started in its legacy pages-folder mode reroutes through
app.py. Each session here is the benchmark's websocket client (no browser): it
opens its link, and must get a finished run with the app's shared sidebar (the seed
widget) and no exception, then change its seed and see it written to its URL.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from benchmarks.common import page_ids, serve, url_path
from benchmarks.load import Session, ws_session
from ui.pages import controls

LINKS = 12
ROUNDS = 3


async def _class(url: str, round_: int) -> list[Session]:
    # deep links to the pages whose sidebar has the seed the client clicks
    pages = [p for p in page_ids() if url_path(p) and "seed" in controls(url_path(p))]
    sessions = [Session(i, pages[(i + round_) % len(pages)]) for i in range(LINKS)]
    await asyncio.gather(*(ws_session(url, s, 100 + round_, rounds=1) for s in sessions))
    return sessions


def test_twelve_deep_links_on_fresh_servers_three_times() -> None:
    for round_ in range(ROUNDS):
        with serve() as (url, _pid), ThreadPoolExecutor(1) as pool:
            sessions = pool.submit(asyncio.run, _class(url, round_)).result()
        bad = [f"{s.page}: {s.error}" for s in sessions if s.error]
        assert not bad, f"round {round_}: {bad}"
        assert all(len(s.reruns) == 1 for s in sessions)
