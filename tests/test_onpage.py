"""The lecturer's controls on the page (issue 27): in presenter mode the method is a row
of buttons above the figure, one value with the sidebar's (either changes the other and
the URL); in Chromium at 1280×720 every lecture step's setting is changed from the page,
with the sidebar folded."""

from __future__ import annotations

import re

import pytest
from conftest import assert_clean, assert_no_exception, run_app, url_value, wait_done
from layout_probe import new_context, settle

from ui import onpage, teach

ON_PAGE = ("axes", "distributions")  # the pages whose lecture step switches the method


def _control(at):
    found = [w for w in at.get("button_group") if w.key == onpage.KEY]
    return found[0] if found else None


@pytest.mark.parametrize("page", ON_PAGE)
def test_the_page_control_and_the_sidebar_are_one_value(page: str) -> None:
    at = run_app(page, {"present": "1", "method": "batch"})
    assert_clean(at)
    control = _control(at)
    assert control is not None and control.value == "batch"
    control.set_value("layer").run()  # the page's control: the sidebar and the URL follow
    assert_clean(at)
    assert at.sidebar.selectbox(key="method").value == "layer"
    assert url_value(at, "method") == "layer"
    at.sidebar.selectbox(key="method").set_value("group").run()  # and the other way
    assert_clean(at)
    assert _control(at).value == "group"
    assert url_value(at, "method") == "group"


def test_outside_presenter_mode_the_sidebar_alone_has_it() -> None:
    at = run_app("axes", {"method": "layer"})
    assert_clean(at)
    assert _control(at) is None
    assert at.sidebar.selectbox(key="method").value == "layer"


# ---- Chromium, 1280×720, presenter mode, the sidebar folded ---------------------------

SIDEBAR_OPEN_JS = """() => {
    const r = document.querySelector('[data-testid=stSidebar]').getBoundingClientRect();
    return r.width > 0 && r.right > 1;
}"""
BLOCK_TITLE_JS = """() => [...document.querySelectorAll('[data-testid=stPlotlyChart] .gtitle')]
    .map(t => t.textContent).join(' | ')"""


def _visible(p, locator) -> bool:
    """The element is drawn inside the 1280×720 window, without scrolling."""
    box = locator.bounding_box()
    return box is not None and box["y"] >= 0 and box["y"] + box["height"] <= 720


def _main(p):
    return p.locator("[data-testid=stMain]")


def _query(p, name: str) -> str | None:
    m = re.search(rf"[?&]{name}=([^&]*)", p.url)
    return m.group(1) if m else None


def test_presenter_switches_the_method_from_the_page(browser, server) -> None:
    ctx = new_context(browser, 1280, 720, phone=False)
    p = ctx.new_page()
    p.set_default_timeout(120_000)
    try:
        p.goto(f"{server}/axes?layout=BTC&method=batch&present=1")
        settle(p)
        assert not p.evaluate(SIDEBAR_OPEN_JS)
        row = _main(p).locator(f".st-key-{onpage.KEY}")
        assert _visible(p, row), "the method is not on the first screen"
        assert "BatchNorm" in p.evaluate(BLOCK_TITLE_JS)
        for label, key in (("LayerNorm", "layer"), ("GroupNorm", "group")):
            row.get_by_role("radio", name=label, exact=True).click()
            p.wait_for_function(f"() => location.search.includes('method={key}&')")
            settle(p)
            assert label in p.evaluate(BLOCK_TITLE_JS), p.evaluate(BLOCK_TITLE_JS)
            assert not p.evaluate(SIDEBAR_OPEN_JS), "switching the method opened the sidebar"
        assert_no_exception(p)
    finally:
        ctx.close()


def _change_on_page(p, path: str) -> tuple[str, str]:
    """Change the lecture step's setting on page `path` from the main area; (URL name,
    the value it should now have)."""
    main = _main(p)
    if path in ON_PAGE:
        main.locator(f".st-key-{onpage.KEY}").get_by_role("radio", name="InstanceNorm").click()
        return "method", "instance"
    if path == "batchnorm":  # tiny batches, then the Running stats tab
        main.get_by_role("tab", name="Running stats").click()
        return "sim", "running"
    if path == "choose":  # two images per device: one more
        box = main.get_by_role("spinbutton", name="Samples per device per step")
        box.fill("3")
        box.press("Enter")
        return "per_device", "3"
    if path == "residual":  # the stack's depth
        depth = main.locator("[data-testid=stSlider]").filter(has_text="Depth L")
        slider = depth.get_by_role("slider").first
        slider.focus()
        slider.press("ArrowLeft")
        return "depth", "23"
    if path == "practice":  # another exercise kind
        main.get_by_role("radio", name="Name the method").check(force=True)
        return "kind", "name"
    raise AssertionError(path)


# The first figure of a step's view starts on the first 1280×720 screen (its title and
# top rows show; the rest of it may sit below the fold): a plotly chart or a components-v2
# figure (the tensor grid, the step-through player), or on the pages whose step is not a
# chart, what the step is about:
FIRST_FIGURE = {
    "": ".katex-display",  # Home: the one formula (its first chart, the method thumbnails,
    # is below the introduction and the contract table)
    "worked-example": "[data-testid=stDataFrame]",  # the matrix to edit (its chart, each
    # method's output, is below it)
    "residual": ".st-key-res_cards",  # the four placements' formulas, two a row
    "choose": "[data-testid=stAlert]",  # the guide's answer (it has no chart above it)
}
CHART = "[data-testid=stPlotlyChart], [data-testid=stBidiComponentIsolated]"
FIRST_FIGURE_JS = """(sel) => {
    const c = document.querySelector(sel.split(', ').map(s => '[data-testid=stMain] ' + s)
        .join(', '));
    return c ? Math.round(c.getBoundingClientRect().top) : null;
}"""
# home and the worked example change nothing in the URL: their steps read the page (the
# worked example's cell is picked on the page)
NO_URL_SETTING = ("", "worked-example")


def test_every_lecture_step_is_done_from_the_page(browser, server) -> None:
    ctx = new_context(browser, 1280, 720, phone=False)
    p = ctx.new_page()
    p.set_default_timeout(120_000)
    late: dict[str, int | None] = {}
    try:
        for step in teach.STEPS:
            p.goto(f"{server}/{step.link[2:]}")
            settle(p)
            top = p.evaluate(FIRST_FIGURE_JS, FIRST_FIGURE.get(step.path, CHART))
            if top is None or top > 720 - 48:
                late[step.path] = top
            if step.path in NO_URL_SETTING:
                continue
            name, want = _change_on_page(p, step.path)
            p.wait_for_function(
                "([n, v]) => new URLSearchParams(location.search).get(n) === v", arg=[name, want]
            )
            wait_done(p, 120_000)
            assert not p.evaluate(SIDEBAR_OPEN_JS), step.path
            assert _query(p, "present") == "1", step.path
            assert_no_exception(p)
    finally:
        ctx.close()
    assert not late, f"the first figure starts below the first screen (top, px): {late}"


# ---- a shared presenter link opened on a phone reads like the normal view -------------

PHONE_JS = """() => {
    const h1 = document.querySelector('[data-testid=stMain] h1').getBoundingClientRect();
    const header = document.querySelector('[data-testid=stHeader]');
    const texts = [...document.querySelectorAll(
        '[data-testid=stMain] :is(h1, h2, h3, p, label, li)')].filter(e => {
            const r = e.getBoundingClientRect();
            return r.width > 0 && r.height > 0 && !header.contains(e);
        });
    const over = [];
    header.querySelectorAll('button, a').forEach(b => {
        const r = b.getBoundingClientRect();
        if (r.width === 0 || r.height === 0) return;
        texts.forEach(t => {
            const q = t.getBoundingClientRect();
            if (r.left < q.right && q.left < r.right && r.top < q.bottom && q.top < r.bottom) {
                over.push(`${b.getAttribute('aria-label') || b.dataset.testid}: `
                    + t.textContent.slice(0, 30));
            }
        });
    });
    return {
        root: getComputedStyle(document.documentElement).fontSize,
        h1: [Math.round(h1.top), Math.round(h1.height)],
        header: getComputedStyle(header).backgroundColor,
        over: over.slice(0, 5),
    };
}"""


def test_a_presenter_link_on_a_phone_reads_like_the_normal_view(browser, server) -> None:
    ctx = new_context(browser, 390, 844, phone=True)
    p = ctx.new_page()
    p.set_default_timeout(120_000)
    try:
        for path in ("", "axes"):
            p.goto(f"{server}/{path}")  # the normal view first, for its title's size
            wait_done(p, 120_000)
            normal = p.evaluate(PHONE_JS)
            p.goto(f"{server}/{path}?present=1")  # a new session, from a shared link
            wait_done(p, 120_000)
            shown = p.evaluate(PHONE_JS)
            assert shown["root"] == "16px", (path, shown)
            assert shown["h1"] == normal["h1"], (path, shown, normal)  # the title's size
            assert shown["h1"][0] + shown["h1"][1] < 844 / 3, (path, shown)
            assert shown["header"] == normal["header"] != "rgba(0, 0, 0, 0)", (path, shown)
            assert not shown["over"], (path, shown["over"])  # no button over text
            assert not p.evaluate(SIDEBAR_OPEN_JS), path
            assert _query(p, "present") == "1", path  # the link keeps it for the projector
            assert_no_exception(p)
    finally:
        ctx.close()
