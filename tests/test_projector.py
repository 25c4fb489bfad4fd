"""The teacher's projector screen (ui/projector.py, issue 26 item 7): the QR code holds the
join link, the short address is that link, the teacher key is never drawn; and in
Chromium, at 1280×720 presenter, the code, QR code, question grid, tally and Reveal fit
the first screen without overlapping, while a student's phone (390×844) shows the
question with nothing cut.
"""

from __future__ import annotations

import io
import re

import keys
import pytest
import segno
import zxingcpp
from conftest import assert_clean, texts
from layout_probe import findings, new_context, probe, settle
from PIL import Image, ImageDraw

from benchmarks.common import CHROMIUM, CHROMIUM_ARGS, app_test
from normviz import practice
from normviz.practice import live
from ui import projector

LINK = "https://normviz.example.org/practice?class=ABCDEFGHJK"


def decode(img: Image.Image) -> list[str]:
    """Every QR code zxing-cpp reads in `img`."""
    return [r.text for r in zxingcpp.read_barcodes(img.convert("L"))]


def svg_modules(svg: str) -> set[tuple[int, int]]:
    """The dark modules (row, column) that segno's SVG path draws: "M x y" and "m dx dy"
    move, "h n" draws n modules along the row at y − 0.5."""
    path = re.search(r'class="qrline"[^>]* d="([^"]+)"', svg)
    assert path is not None
    x = y = 0.0
    dark: set[tuple[int, int]] = set()
    for cmd, args in re.findall(r"([Mmh])([^Mmh]+)", path.group(1)):
        nums = [float(v) for v in args.split()]
        if cmd == "M":
            x, y = nums
        elif cmd == "m":
            x, y = x + nums[0], y + nums[1]
        else:
            dark |= {(int(y - 0.5), int(x) + i) for i in range(int(nums[0]))}
            x += nums[0]
    return dark


def test_the_qr_code_shown_decodes_to_the_join_link() -> None:
    svg = projector.qr_svg(LINK)
    assert svg.startswith("<svg ") and "<title>" not in svg
    modules = svg_modules(svg)
    # the SVG draws exactly segno's matrix of the link (its 2-module border included)
    matrix = segno.make(LINK, error="m").matrix
    border = 2
    want = {
        (r + border, c + border) for r, row in enumerate(matrix) for c, v in enumerate(row) if v
    }
    assert modules == want
    # and a reader reads the link off it, drawn as a picture of those modules
    side, px = len(matrix) + 2 * border, 8
    img = Image.new("L", (side * px, side * px), 255)
    draw = ImageDraw.Draw(img)
    for r, c in modules:
        draw.rectangle([c * px, r * px, (c + 1) * px - 1, (r + 1) * px - 1], fill=0)
    assert decode(img) == [LINK]
    # a control: another link's code does not read as this one
    other = segno.make(LINK.replace("ABCDEFGHJK", "ABCDEFGHJM"), error="m")
    buf = io.BytesIO()
    other.save(buf, kind="png", scale=8)
    assert decode(Image.open(buf)) != [LINK]


@pytest.mark.parametrize(
    ("link", "short"),
    [
        (LINK, "normviz.example.org/practice?class=ABCDEFGHJK"),
        ("http://www.school.edu:8080/practice?class=XY", "school.edu:8080/practice?class=XY"),
        ("http://127.0.0.1:8501/practice?class=XY", "127.0.0.1:8501/practice?class=XY"),
        ("/practice?class=XY", "/practice?class=XY"),
    ],
)
def test_the_short_address_is_the_link_without_its_scheme(link: str, short: str) -> None:
    assert live.short_address(link) == short
    assert short in live.qr_alt(link)
    # the join key is the URL contract's `class` (docs/architecture.md)
    assert short.endswith("?class=" + link.rsplit("=", 1)[1])


# ---- the teacher's screen in AppTest --------------------------------------------------------


@pytest.fixture
def db(tmp_path, monkeypatch) -> str:
    url = f"sqlite:///{tmp_path / 'classes.db'}"
    monkeypatch.setenv("NORMVIZ_DB_URL", url)
    return url


def test_the_teacher_screen_shows_the_qr_code_and_address_and_never_the_key(db: str) -> None:
    at = app_test("practice", {"kind": "cells"}, timeout=120)
    at.run()
    at.button(key="pr_start").click().run()
    assert_clean(at)
    code = at.session_state[keys.key("practice", "class")]
    key = at.session_state["pr_teaching"][code]
    assert key and code
    shown = texts(at) + "".join(str(m.value) + str(m.label) for m in at.metric)
    assert key not in shown  # the projected screen never carries the teacher key
    assert not [e for e in at.info if "teacher key" in e.value.lower()]
    assert [m.value for m in at.metric] == [code]
    link = live.share_link("", code)  # AppTest has no browser address: a relative link
    assert [c.value for c in at.code] == [live.short_address(link)]
    (image,) = at.get("image")
    (img,) = image.proto.imgs
    assert img.url.startswith("data:image/svg+xml;base64,")
    assert img.alt == live.qr_alt(link)
    assert {b.key for b in at.button} >= {"pr_reveal", "pr_push", "pr_end"}
    assert "Live class, question 1" in texts(at)


def _path_to(node, key: str, above: tuple = ()) -> tuple | None:  # type: ignore[no-untyped-def]
    """The element types from the page's root down to the element keyed `key`."""
    for child in getattr(node, "children", {}).values():
        here = (*above, getattr(child, "type", None))
        if getattr(child, "key", None) == key:
            return here
        if (found := _path_to(child, key, here)) is not None:
            return found
    return None


def _order(node) -> list:  # type: ignore[no-untyped-def]
    """Every element under `node`, in page order."""
    out = []
    for child in getattr(node, "children", {}).values():
        out += [child, *_order(child)]
    return out


@pytest.mark.parametrize("kind", ["cells", "choose"])
def test_the_start_button_sits_beside_the_exercise_in_no_fold(db: str, kind: str) -> None:
    at = app_test("practice", {"kind": kind}, timeout=120)
    at.run()
    assert_clean(at)
    path = _path_to(at.main, "pr_start")
    assert path is not None and "expander" not in path and "popover" not in path, path
    (button,) = [b for b in at.button if b.key == "pr_start"]
    assert button.label == live.START and button.help == live.TEACH
    # right under the exercise's prompt, before its grid and its answer widgets
    order = [getattr(e, "key", None) or getattr(e, "value", None) for e in _order(at.main)]
    prompt = order.index(practice.exercise(kind, 0).prompt)
    start = order.index("pr_start")
    answers = [
        i for i, e in enumerate(order) if str(e).startswith(("pr_grid", "pr_cells", "pr_choice"))
    ]
    assert prompt < start < min(answers), (prompt, start, answers)
    button.click().run()
    assert_clean(at)
    assert at.session_state[keys.key("practice", "class")] and "Live class, question 1" in texts(at)


# ---- in Chromium ----------------------------------------------------------------------------

BOXES = {  # what the first screen must hold, by selector
    "code": "[data-testid=stMetricValue]",
    "qr": ".st-key-pr_qr img",
    "address": ".st-key-pr_link_box [data-testid=stCode]",
    "grid": ".st-key-pr_question [data-testid=stBidiComponentIsolated]",  # ui/tensorgrid.py
    "tally": ".st-key-pr_tally_box [data-testid=stPlotlyChart]",
    "reveal": ".st-key-pr_reveal button",
    "next": "[data-testid=stPopover] button",
    "end": ".st-key-pr_end button",
}


def _start(p) -> dict:  # type: ignore[no-untyped-def]
    """Start a class with the button beside the exercise; returns where that button was."""
    button = p.locator(".st-key-pr_start button").first
    box = button.bounding_box()  # drawn and visible, in no fold
    assert button.is_visible() and live.START in button.inner_text()
    button.click()
    p.locator(".st-key-pr_qr img").wait_for()
    settle(p)
    p.evaluate("document.querySelector('[data-testid=stMain]').scrollTo(0, 0)")
    p.mouse.move(1, 700)  # the pointer off the charts (their modebars show on hover)
    p.wait_for_timeout(500)
    return box


def _overlap(a: dict, b: dict) -> bool:
    w = min(a["x"] + a["width"], b["x"] + b["width"]) - max(a["x"], b["x"])
    h = min(a["y"] + a["height"], b["y"] + b["height"]) - max(a["y"], b["y"])
    return w > 1 and h > 1


def test_the_projector_screen_fits_1280x720_and_a_phone_shows_the_question(server) -> None:
    """(In a thread of its own: Playwright's sync API refuses a thread whose asyncio loop
    another test in this worker left running.)"""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        pool.submit(_projector_screen_fits, server).result()


def _projector_screen_fits(url: str) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        ctx = new_context(b, 1280, 720, False)
        p = ctx.new_page()
        p.set_default_timeout(120_000)
        p.goto(f"{url}/practice?kind=cells&present=1")
        settle(p)
        start = _start(p)
        boxes = {name: p.locator(sel).first.bounding_box() for name, sel in BOXES.items()}
        code = p.locator(BOXES["code"]).first.inner_text().strip()
        address = p.locator(BOXES["address"]).inner_text().strip()
        qr = decode(Image.open(io.BytesIO(p.locator(BOXES["qr"]).screenshot())))
        alt = p.locator(BOXES["qr"]).get_attribute("alt")
        teacher = findings(probe(p))
        body = p.inner_text("body")
        key_boxes = p.locator(".st-key-pr_key_box").count()
        phone = new_context(b, 390, 844, True).new_page()
        phone.set_default_timeout(120_000)
        phone.goto(f"{url}/practice?class={code}")
        settle(phone)
        student = findings(probe(phone))
        seen = {
            "prompt": phone.get_by_text("Which other cells share").first.bounding_box(),
            "grid": phone.locator("[data-testid=stBidiComponentIsolated]").first.bounding_box(),
            "send": phone.locator(".st-key-pr_submit button").bounding_box(),
        }
        b.close()
    # the start button sat on the solo page's first screen, above the grid
    assert start is not None and start["y"] >= 0 and start["y"] + start["height"] <= 720, start
    link = f"{url}/practice?class={code}"
    assert qr == [link]  # the QR code as drawn on the page reads as the join link
    assert address == live.short_address(link) and alt == live.qr_alt(link)
    assert re.fullmatch(r"[A-Z2-7]{10}", code), code
    assert key_boxes == 0 and "Show teacher key" in body  # the key only when asked for
    for name, box in boxes.items():
        assert box is not None, name
        inside = box["x"] >= 0 and box["y"] >= 0
        inside &= box["x"] + box["width"] <= 1280 and box["y"] + box["height"] <= 720
        assert inside, (name, box)
    crossing = [(a, c) for a in boxes for c in boxes if a < c and _overlap(boxes[a], boxes[c])]
    assert not crossing, crossing
    # question and tally side by side: the tally starts right of the grid's column
    assert boxes["tally"]["x"] >= boxes["grid"]["x"] + boxes["grid"]["width"]
    assert not [s for s in teacher if "[modebar" not in s], teacher
    assert not [s for s in student if "[modebar" not in s], student
    for name, box in seen.items():  # each within the phone's width
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390, (name, box)
