"""A layout probe for a loaded page in Chromium (issue 27): what does not fit.

`probe(p)` returns, for the page as drawn now:
  sideways  the main area scrolls sideways (`[data-testid=stMain]` scrollWidth > clientWidth)
  wide      elements of the main area wider than their container (innermost ones)
  outside   chart text (the SVG text of a `.js-plotly-plot`) outside its chart
  overlaps  pairs of chart text boxes in one chart (legend, axis titles, ticks,
            annotations) whose bounding boxes overlap, and chart text under the modebar

Run as a script it visits every page at the four screens of issue 27 and writes what it
finds (and a screenshot per view) under a folder:

    python tests/layout_probe.py /tmp/probe            # every page
    python tests/layout_probe.py /tmp/probe axes home  # some pages
    python tests/layout_probe.py /tmp/probe --screens phone "axes?method=layer"
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import CHROMIUM, CHROMIUM_ARGS, DONE_JS, page_ids, url_path

# (name, width, height, presenter, phone)
SCREENS = (
    ("projector", 1280, 720, True, False),
    ("old-projector", 1024, 768, True, False),
    ("laptop", 1400, 900, False, False),
    ("phone", 390, 844, False, True),
)

# Every chart drew its SVG text (plotly.js draws after the script run).
CHARTS_DRAWN_JS = """() => [...document.querySelectorAll('[data-testid=stPlotlyChart]')]
    .every(c => c.querySelector('.main-svg text, canvas'))"""
# The main area's layout as a string: each chart's plot areas (plotly's automargin pass
# moves them) and text boxes, the fonts' state. Equal on two polls = the page stopped moving.
STILL_JS = """() => {
    const box = (e) => { const r = e.getBoundingClientRect();
        return [r.x, r.y, r.width, r.height].map(Math.round).join(','); };
    const main = document.querySelector('[data-testid=stMain]');
    const parts = [document.fonts.status, main ? box(main) + main.scrollHeight : ''];
    for (const c of document.querySelectorAll('[data-testid=stPlotlyChart]')) {
        parts.push([...c.querySelectorAll('.nsewdrag, .legend, .gtitle, .g-xtitle, .g-ytitle')]
            .map(box).join(';'));
    }
    const sig = parts.join('|');
    const still = window.__nvLayout === sig && document.fonts.status === 'loaded';
    window.__nvLayout = sig;
    return still;
}"""

PROBE_JS = """() => {
    const main = document.querySelector('[data-testid=stMain]');
    const out = {sideways: null, wide: [], outside: [], overlaps: []};
    if (!main) return out;
    if (main.scrollWidth > main.clientWidth + 1) {
        out.sideways = `main area is ${main.scrollWidth}px wide in ${main.clientWidth}px`;
    }
    const inside = (el, sel) => el.closest(sel);
    const floating = (el) => {
        for (let e = el; e && e !== main; e = e.parentElement) {
            const pos = getComputedStyle(e).position;
            if (pos === 'absolute' || pos === 'fixed') return true;
        }
        return false;
    };
    const hidden = (el) => {
        for (let e = el; e && e !== main; e = e.parentElement) {
            const cs = getComputedStyle(e);
            if (cs.display === 'none' || cs.visibility === 'hidden') return true;
        }
        return false;
    };
    const label = (el) => {
        const key = [...(el.closest('[class*=st-key-]')?.classList || [])]
            .find(c => c.startsWith('st-key-'));
        const t = el.getAttribute('data-testid') || el.tagName.toLowerCase();
        const text = (el.innerText || '').trim().slice(0, 50).replace(/\\s+/g, ' ');
        return `${t}${key ? ' in ' + key : ''}: "${text}"`;
    };
    // (b) an element wider than its container: its box sticks out of its parent's
    // content box, or it scrolls its own content sideways. A chart's SVG, KaTeX's
    // hidden MathML, 1 px screen-reader text, floating toolbars and tooltips aside;
    // st.dataframe's canvas grid and st.code scroll by design (their box must fit).
    // A slider's thumb at either end reaches into the slider's own padding, held there by
    // design: the slider's box must fit, its track and thumb are not judged.
    const scrollsByDesign = '[data-testid=stDataFrame] *, [data-testid=stCode] *, '
        + '[data-testid=stSlider] [role=group] *';
    const wide = [];
    for (const el of main.querySelectorAll('*')) {
        if (el instanceof SVGElement || el.closest('.katex') || el.closest('svg')
            || el.matches(scrollsByDesign) || floating(el) || hidden(el)) continue;
        const r = el.getBoundingClientRect();
        if (r.width < 2 || r.height < 2) continue;
        const parent = el.parentElement;
        const pr = parent.getBoundingClientRect();
        if (pr.width < 2) continue;  // a zero-width wrapper (a widget's label holder)
        const pcs = getComputedStyle(parent);
        const left = pr.left + parseFloat(pcs.borderLeftWidth);
        const right = pr.right - parseFloat(pcs.borderRightWidth);
        const sticks = r.right > right + 2 || r.left < left - 2;
        const scrolls = el.scrollWidth > el.clientWidth + 2 && el.clientWidth >= 20
            && getComputedStyle(el).display !== 'inline';
        if (sticks || scrolls) {
            wide.push([el, `${label(el)} is ${Math.round(Math.max(r.width, el.scrollWidth))}`
                + `px wide in ${Math.round(scrolls ? el.clientWidth : right - left)}px`]);
        }
    }
    // the outermost offender says most (a chart box, a table), its insides follow it
    out.wide = wide.filter(([el]) => !wide.some(([o]) => o !== el && o.contains(el)))
        .slice(0, 12).map(([, s]) => s);
    // (c) and (d): the text of each drawn chart
    document.querySelectorAll('[data-testid=stPlotlyChart]').forEach((chart, i) => {
        const plot = chart.querySelector('.js-plotly-plot');
        if (!plot) return;
        const box = plot.getBoundingClientRect();
        if (box.width === 0 || hidden(chart)) return;  // in a closed tab or expander
        const name = `chart ${i}`;
        const own = chart.getBoundingClientRect();
        if (box.bottom > own.bottom + 1 || box.top < own.top - 1) {
            const at = (v) => Math.round(v);
            out.outside.push(`${name}: the plot runs past its own box (plot ${at(box.top)}..`
                + `${at(box.bottom)}, box ${at(own.top)}..${at(own.bottom)})`);
        }
        const boxes = [];
        plot.querySelectorAll('svg text').forEach(t => {
            const s = t.textContent.trim();
            if (!s || t.closest('.hoverlayer')) return;
            if (getComputedStyle(t).opacity === '0' || t.closest('[opacity="0"]')) return;
            const r = t.getBoundingClientRect();
            if (r.width < 1 || r.height < 1) return;
            const at = (v) => Math.round(v);
            if (r.left < box.left - 1 || r.right > box.right + 1
                || r.top < box.top - 1 || r.bottom > box.bottom + 1) {
                out.outside.push(`${name}: "${s.slice(0, 40)}" leaves the chart `
                    + `(${at(r.left - box.left)}..${at(r.right - box.left)} of ${at(box.width)}`
                    + ` px, ${at(r.top - box.top)}..${at(r.bottom - box.top)} of `
                    + `${at(box.height)} px)`);
            }
            // cell values drawn on a heatmap or bars sit in the plot area by design
            const cell = t.closest('.textpoint, .heatmaplayer, .barlayer, .pielayer');
            if (!cell) boxes.push([s, r]);
        });
        // the modebar shows while the pointer is over the chart (or after a tap)
        const bar = plot.querySelector('.modebar');
        const mr = bar && bar.getBoundingClientRect();
        if (mr && mr.width > 0) boxes.push(['[modebar, on hover]', mr]);
        const pairs = [];
        for (let a = 0; a < boxes.length; a++) {
            for (let b = a + 1; b < boxes.length; b++) {
                const [sa, ra] = boxes[a], [sb, rb] = boxes[b];
                const w = Math.min(ra.right, rb.right) - Math.max(ra.left, rb.left);
                const h = Math.min(ra.bottom, rb.bottom) - Math.max(ra.top, rb.top);
                if (w > 2 && h > 2) {
                    pairs.push(`${name}: "${sa.slice(0, 30)}" × "${sb.slice(0, 30)}"`);
                }
            }
        }
        out.overlaps.push(...pairs.slice(0, 6));
    });
    out.outside = out.outside.slice(0, 20);
    out.overlaps = out.overlaps.slice(0, 30);
    return out;
}"""


def settle(p, timeout: float = 120_000) -> None:
    """The run has finished and every chart has drawn its text (and stopped moving)."""
    p.wait_for_function(DONE_JS, timeout=timeout, polling=200)
    p.wait_for_timeout(300)
    p.wait_for_function(DONE_JS, timeout=timeout, polling=200)
    p.wait_for_function(CHARTS_DRAWN_JS, timeout=60_000, polling=200)
    # plotly's second layout pass (automargin) and the fonts: until nothing moves for 250 ms
    p.evaluate("() => { window.__nvLayout = null; }")
    p.wait_for_function(STILL_JS, timeout=60_000, polling=250)


def probe(p) -> dict:
    """(a)-(d) for the page as drawn now (see the module's docstring)."""
    return p.evaluate(PROBE_JS)


def findings(found: dict) -> list[str]:
    """One line per problem."""
    lines = [found["sideways"]] if found["sideways"] else []
    lines += [f"wide: {s}" for s in found["wide"]]
    lines += [f"outside: {s}" for s in found["outside"]]
    lines += [f"overlap: {s}" for s in found["overlaps"]]
    return lines


def shoot(p, stem: Path) -> None:
    """The first screen, and each chart on its own (the main area scrolls, not the page)."""
    p.screenshot(path=f"{stem}.png")
    charts = p.locator("[data-testid=stPlotlyChart]")
    for i in range(charts.count()):
        c = charts.nth(i)
        if c.is_visible() and c.bounding_box() and c.bounding_box()["width"] > 0:
            c.screenshot(path=f"{stem}-chart{i}.png")


# a phone's browser: mobile, touch, and a phone's user agent (ui.state.phone reads it)
PHONE = {
    "is_mobile": True,
    "has_touch": True,
    "device_scale_factor": 2,
    "user_agent": (
        "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) "
        "Chrome/130.0.0.0 Mobile Safari/537.36"
    ),
}


def new_context(browser, width: int, height: int, phone: bool):
    extra = PHONE if phone else {}
    return browser.new_context(viewport={"width": width, "height": height}, **extra)


def main(argv: list[str]) -> int:
    from playwright.sync_api import sync_playwright

    from benchmarks.common import serve

    argv = list(argv)
    screens = SCREENS
    if "--screens" in argv:  # a comma list of screen names
        at = argv.index("--screens")
        names = argv.pop(at + 1).split(",")
        argv.pop(at)
        screens = tuple(s for s in SCREENS if s[0] in names)
    out = Path(argv[0] if argv else "/tmp/probe")
    out.mkdir(parents=True, exist_ok=True)
    # a page id, or a page's path with its query ("axes?method=layer")
    pages = argv[1:] or page_ids()
    report: list[str] = []
    clean = total = 0
    with serve(log=out / "server.log") as (url, _pid), sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        for screen, w, h, presenter, phone in screens:
            ctx = new_context(browser, w, h, phone)
            p = ctx.new_page()
            p.set_default_timeout(120_000)
            for page in pages:
                path = url_path(page)
                if presenter:
                    path += ("&" if "?" in path else "?") + "present=1"
                p.goto(f"{url}/{path}")
                settle(p)
                lines = findings(probe(p))
                stem = "".join(c if c.isalnum() or c in "-_" else "_" for c in page)
                shoot(p, out / f"{stem}-{screen}")
                total += 1
                clean += not lines
                report.append(f"## /{path} {screen} {w}x{h}: {len(lines)} problems")
                report += [f"- {s}" for s in lines]
                (out / "report.md").write_text("\n".join(report) + "\n")
            ctx.close()
        browser.close()
    report.append(f"\n{clean} of {total} views clean")
    (out / "report.md").write_text("\n".join(report) + "\n")
    print(report[-1].strip())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
