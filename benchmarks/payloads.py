"""JSON size of every Plotly figure on every page at the element cap.

Runs each page through app.py (AppTest) at every cap shape of both layouts
(balanced, and each axis as long as the sidebar allows) with every standard
method, then with each of the page's toggles and checkboxes switched on at the
longest-channel shape, and with the page's own URL parameters at their maxima (the
BatchNorm lab's steps, batch size, ...), and prints the largest size each figure
reached, with the setting that produced it (budget: 1 MB of JSON per figure). Run:

    python -m benchmarks.payloads [--pages axes,distributions] [--quick]
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from benchmarks.common import (
    app_test,
    cap_shapes,
    figure_sizes,
    page_ids,
    query_for,
    shape_label,
)
from normviz import STANDARD_METHODS
from ui.params import PAGE_PARAMS, fmt, max_elements

LIMIT = 1_000_000


def runs(page: str, quick: bool) -> Iterator[tuple[str, object]]:
    """(setting name, finished AppTest) for every setting of one page."""
    yield from page_param_runs(page)
    for layout in ("BTC", "NCHW"):
        shapes = cap_shapes(layout)
        if quick:
            shapes = {k: v for k, v in shapes.items() if k in ("balanced", "max C")}
        for shape in shapes.values():
            for m in STANDARD_METHODS:
                at = app_test(page, query_for(layout, shape, m))
                at.run()
                yield f"{shape_label(layout, shape)} {m}", at
        shape = shapes["max C"]
        at = app_test(page, query_for(layout, shape, "group"))
        at.run()
        switches = [w.key for w in (*at.main.toggle, *at.main.checkbox) if w.key and not w.value]
        for key in switches:
            found = [w for w in (*at.main.toggle, *at.main.checkbox) if w.key == key]
            if found:
                found[0].set_value(True).run()
                yield f"{shape_label(layout, shape)} group +{key}", at


def page_param_runs(page: str) -> Iterator[tuple[str, object]]:
    """The page's own numeric URL parameters at their maxima, each choice in turn."""
    params = PAGE_PARAMS.get(page, ())
    top = {p.name: fmt(p.hi) for p in params if p.choices is None and p.hi is not None}
    for p in params:
        for c in p.choices or ():
            at = app_test(page, {**top, p.name: fmt(c)})
            at.run()
            yield f"{p.name}={c}, numbers at max", at


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pages", default="", help="comma list (default: every page)")
    ap.add_argument("--quick", action="store_true", help="balanced and longest-C shapes only")
    args = ap.parse_args()
    pages = [p for p in page_ids() if not args.pages or p in args.pages.split(",")]
    print(f"cap {max_elements():,} elements; largest JSON per figure over every setting")
    largest: dict[tuple[str, str], tuple[int, int, str]] = {}
    problems: list[str] = []
    for page in pages:
        n = 0
        for setting, at in runs(page, args.quick):
            n += 1
            if at.exception or any("internal error" in e.value for e in at.error):
                problems.append(f"{page} {setting}: exception or internal error")
            for f in figure_sizes(at):
                if f.chars > largest.get((page, f.name), (0, 0, ""))[0]:
                    largest[(page, f.name)] = (f.chars, f.traces, setting)
        print(f"  {page}: {n} runs", flush=True)
    print(f"\n{'page':15} {'figure':26} {'max JSON':>10} {'traces':>6}  at")
    for (page, name), (chars, traces, setting) in sorted(largest.items()):
        flag = "  OVER 1 MB" if chars > LIMIT else ""
        print(f"{page:15} {name:26} {chars:10,} {traces:6}  {setting}{flag}")
    worst = max((v[0] for v in largest.values()), default=0)
    print(f"\nlargest figure {worst:,} chars ({worst / LIMIT:.0%} of the 1 MB budget)")
    for p in problems:
        print("PROBLEM", p)


if __name__ == "__main__":
    main()
