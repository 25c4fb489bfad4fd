"""History that behaves (issue 27): every setting change adds a browser history entry
(Streamlit writes st.query_params with history.pushState), and Back restores the previous
setting and view (ui.state.follow_history); Forward goes the other way."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

from conftest import assert_clean, run_app, url_value, wait_done
from layout_probe import new_context, settle

from ui import onpage


def _url(at) -> dict[str, str]:
    return {k: url_value(at, k) for k in at.query_params}


def _back_to(at, url: dict[str, str]) -> None:
    """What Back sends: the earlier entry's query string, every widget as it is."""
    at.query_params.clear()
    at.query_params.update(url)
    at.run()
    assert_clean(at)


def test_back_restores_the_shared_setting_and_the_page_knob() -> None:
    at = run_app("axes", {"method": "batch"})
    first = _url(at)
    at.sidebar.selectbox(key="method").set_value("layer").run()
    at.toggle(key="axes:partition").set_value(True).run()
    assert url_value(at, "method") == "layer" and url_value(at, "partition") == "1"
    _back_to(at, first)
    assert at.sidebar.selectbox(key="method").value == "batch"
    assert at.toggle(key="axes:partition").value is False
    assert _url(at) == first  # the view is the entry's; nothing new is written


def test_a_click_is_not_mistaken_for_back() -> None:
    """A run that carries an older query string but a moved widget (the click's rerun left
    before the last URL write arrived) keeps the click."""
    at = run_app("axes", {"method": "batch"})
    first = _url(at)
    at.sidebar.selectbox(key="method").set_value("layer").run()
    at.query_params.clear()
    at.query_params.update(first)
    at.sidebar.number_input(key="seed").set_value(7).run()
    assert_clean(at)
    assert url_value(at, "method") == "layer" and url_value(at, "seed") == "7"


# ---- Chromium -----------------------------------------------------------------------

TITLES_JS = """() => [...document.querySelectorAll('[data-testid=stPlotlyChart] .gtitle')]
    .map(t => t.textContent).join(' | ')"""


def _method(p) -> str | None:
    return dict(parse_qsl(urlsplit(p.url).query)).get("method")


def _switch(p, label: str, key: str) -> None:
    p.locator(f".st-key-{onpage.KEY}").get_by_role("radio", name=label, exact=True).click()
    p.wait_for_function(f"() => location.search.includes('method={key}&')")
    settle(p)


def test_back_restores_the_previous_method_and_view(browser, server) -> None:
    """Two method switches (full runs) and a toggle in the explorer's fragment (its own
    rerun writes the URL): three entries; Back undoes them one by one, Forward redoes."""
    ctx = new_context(browser, 1280, 720, phone=False)
    p = ctx.new_page()
    p.set_default_timeout(120_000)
    toggle = p.locator("[data-testid=stMain] [data-testid=stCheckbox]").filter(
        has_text="Colour every statistic group"
    )
    try:
        p.goto(f"{server}/axes?layout=BTC&method=batch&present=1")
        settle(p)
        start = p.evaluate("history.length")
        for label, key in (("LayerNorm", "layer"), ("GroupNorm", "group")):
            _switch(p, label, key)
        toggle.locator("label").first.click()
        p.wait_for_function("() => location.search.includes('partition=1')")
        settle(p)
        assert p.evaluate("history.length") == start + 3  # one entry per setting change
        p.go_back()
        p.wait_for_function("() => location.search.includes('partition=0')")
        settle(p)
        assert not toggle.get_by_role("switch").is_checked()
        for label, key in (("GroupNorm", "group"), ("LayerNorm", "layer")):
            if key == "layer":
                p.go_back()
                p.wait_for_function(f"() => location.search.includes('method={key}&')")
                settle(p)
            assert label in p.evaluate(TITLES_JS), p.evaluate(TITLES_JS)
            chosen = p.locator(f".st-key-{onpage.KEY} [role=radio][aria-checked=true]")
            assert chosen.inner_text() == label
        p.go_forward()
        p.wait_for_function("() => location.search.includes('method=group&')")
        settle(p)
        assert "GroupNorm" in p.evaluate(TITLES_JS)
        assert p.evaluate("history.length") == start + 3  # Back and Forward add nothing
        p.wait_for_timeout(1000)
        wait_done(p)
        assert _method(p) == "group"  # and the app did not write another view over it
    finally:
        ctx.close()


def test_a_page_switch_is_not_mistaken_for_back(browser, server) -> None:
    """The sidebar's page links keep the settings (Streamlit sends the current query
    string): only Back and Forward restore an entry's values."""
    ctx = new_context(browser, 1400, 900, phone=False)
    p = ctx.new_page()
    p.set_default_timeout(120_000)
    nav = p.locator("[data-testid=stSidebarNav]")
    try:
        p.goto(f"{server}/axes?method=layer")
        settle(p)
        p.locator("[data-testid=stSidebarUserContent] .st-key-method").click()
        p.get_by_role("option", name="GroupNorm").click()
        p.wait_for_function("() => location.search.includes('method=group&')")
        settle(p)
        nav.get_by_role("link", name="Distributions").click()
        p.wait_for_function("() => location.pathname.endsWith('/distributions')")
        settle(p)
        assert _method(p) == "group"
        assert p.get_by_role("heading", name="Before and after: GroupNorm").count() == 1
        nav.get_by_role("link", name="Axis Explorer").click()
        p.wait_for_function("() => location.pathname.endsWith('/axes')")
        settle(p)
        assert _method(p) == "group"
        assert "GroupNorm" in p.evaluate(TITLES_JS)
    finally:
        ctx.close()
