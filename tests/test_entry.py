"""A fresh server whose first request is a page URL still runs through app.py."""

from __future__ import annotations

from conftest import assert_no_exception, serve, wait_done

from ui.pages import available


def test_first_request_to_a_page_gets_the_app_shell(browser) -> None:
    """The shell (sidebar, title, URL) is there on a fresh server's first request."""
    path = available()[0].path
    with serve() as url:
        ctx = browser.new_context(viewport={"width": 1400, "height": 900})
        p = ctx.new_page()
        p.set_default_timeout(90_000)
        p.goto(f"{url}/{path}?layout=BTC&B=3&T=5&C=4&method=layer")
        wait_done(p, 90_000)
        assert_no_exception(p)
        sidebar = p.locator("[data-testid=stSidebar]")
        assert sidebar.get_by_text("Tensor").count() >= 1
        assert sidebar.locator("input[type=number]").first.input_value() == "3"
        assert p.title().startswith("normviz")
        assert "B=3" in p.url and f"/{path}" in p.url
        ctx.close()


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
