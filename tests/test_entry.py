"""A fresh server: its first visits, deep links all at once, run through app.py.

On a freshly started server no session has called st.navigation yet, so Streamlit's
legacy pages-folder mode runs a deep link's page file on its own; the page reroutes
through app.py (ui.route.entry). And a class arriving at once starts many first runs
in the same second, each importing torch, pandas and plotly (ui.warmup keeps them
from deadlocking). One server, one burst: Chromium opens one link with a query
string while websocket clients (benchmarks.load, no browser) open a deep link to
every page with a seed in its sidebar, then change the seed.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import ROOT, assert_no_exception, serve, wait_done

from benchmarks.common import page_ids, url_path
from benchmarks.load import Session, ws_session
from ui.pages import available, controls
from ui.route import RUN_LOG

CLIENTS = 8  # websocket sessions in the burst, besides the browser


async def _class(url: str) -> list[Session]:
    pages = [p for p in page_ids() if url_path(p) and "seed" in controls(url_path(p))]
    sessions = [Session(i, pages[i % len(pages)]) for i in range(CLIENTS)]
    await asyncio.gather(*(ws_session(url, s, 100, rounds=1) for s in sessions))
    return sessions


@pytest.mark.browser
def test_deep_links_on_a_fresh_server_run_through_app_py(browser) -> None:
    path = available()[0].path
    log = ROOT / ".pytest_cache" / "entry-runs.log"
    log.parent.mkdir(exist_ok=True)
    log.write_text("")
    with serve(env={RUN_LOG: str(log)}) as url, ThreadPoolExecutor(1) as pool:
        ctx = browser.new_context(viewport={"width": 1400, "height": 900})
        p = ctx.new_page()
        p.set_default_timeout(180_000)
        burst = pool.submit(asyncio.run, _class(url))  # at the same moment as the browser
        p.goto(f"{url}/{path}?layout=BTC&B=3&T=5&C=4&method=layer")
        wait_done(p, 180_000)
        sessions = burst.result()
        # the shell: page config, the shared sidebar with the link's values, the URL
        assert_no_exception(p)
        sidebar = p.locator("[data-testid=stSidebar]")
        assert sidebar.get_by_text("Tensor").count() >= 1
        assert sidebar.locator("input[type=number]").first.input_value() == "3"
        assert p.title().startswith("normviz")
        assert "B=3" in p.url and f"/{path}" in p.url
        ctx.close()
    # every client got its page with the sidebar's seed, and its click written to its URL
    bad = [f"{s.page}: {s.error}" for s in sessions if s.error]
    assert not bad, bad
    assert all(len(s.reruns) == 1 for s in sessions)
    ran = set(log.read_text().splitlines())
    assert {f"app {url_path(s.page)}" for s in sessions} | {f"app {path}"} <= ran, ran


def test_deployment_config_hides_errors_and_keeps_runs_light() -> None:
    """.streamlit/config.toml is what the server and AppTest read (run from the repo root)."""
    import tomllib
    from pathlib import Path

    from streamlit import config

    from normviz import io

    conf = tomllib.loads((Path(__file__).parent.parent / ".streamlit/config.toml").read_text())
    assert conf["client"]["showErrorDetails"] == "none"  # no traceback for a student
    assert io.upload_limit_bytes() < conf["server"]["maxUploadSize"] * 2**20  # room (issue 23)
    # no ast-based compile of pages (a thread race in CPython < 3.11.8), and Streamlit
    # really reads this file: the options it runs with are the file's
    assert conf["runner"]["magicEnabled"] is False
    assert config.get_option("runner.magicEnabled") is False
    assert config.get_option("client.showErrorDetails") == "none"
    # no forced full garbage collection after every run (~0.4 s each with torch loaded)
    assert config.get_option("runner.postScriptGC") is False
