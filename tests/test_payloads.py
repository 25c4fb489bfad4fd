"""Every Plotly figure on every page stays under 1 MB of JSON at the element cap.

Each page runs through app.py (AppTest) with the largest shapes the sidebar allows
under the cap, in both layouts: the longest-channel shape with the method whose
figures came out largest in the payload benchmark, plus balanced and longest-batch
shapes with the other methods, so all five methods appear. The page's own toggles
and checkboxes are then switched on one at a time at the longest-channel shapes
(partition colouring, split views and the like draw more). AppTest returns charts
as unknown elements whose `.proto.spec` is the figure JSON the browser would
receive: its length is the payload. Pages with their own URL parameters (the
BatchNorm lab's batch size, steps, ...) also run with those at their maxima; the
training lab's lengths whose figure draws the same traces and points at every value run
at their shortest (a test below checks each one against its default).
"""

from __future__ import annotations

import importlib

import numpy as np
import plotly.graph_objects as go
import pytest
from conftest import assert_clean
from signals import FIGURE_BUDGET

from benchmarks.common import (
    app_test,
    cap_shapes,
    figure_sizes,
    page_ids,
    query_for,
    shape_label,
    sidebar_drawn,
    url_path,
)
from normviz import STANDARD_METHODS, training
from normviz.sections import no_progress
from ui.pages import PAGES as PAGE_INFOS
from ui.pages import controls
from ui.params import PAGE_PARAMS, fmt, max_elements

PAGES = page_ids()


# (layout, cap profile, method). The longest-C shapes with BatchNorm gave the largest
# figures in `python -m benchmarks.payloads` (per-channel traces, the widest flat view);
# the other profiles cover the remaining methods and the longest sample axis.
PLAN = (
    ("BTC", "max C", "batch"),
    ("BTC", "balanced", "layer"),
    ("BTC", "max B", "instance"),
    ("NCHW", "max C", "batch"),
    ("NCHW", "balanced", "rms"),
    ("NCHW", "max N", "group"),
)


def _cases() -> list[tuple[str, tuple[int, ...], str]]:
    """(layout, shape, method) for the plan, with the shapes at the current cap."""
    return [(layout, cap_shapes(layout)[profile], m) for layout, profile, m in PLAN]


CASES = _cases()


def _check(at, where: str) -> int:
    """Assert a clean run through app.py and every figure under the limit; the largest size."""
    assert_clean(at)
    assert sidebar_drawn(at), f"{where}: the page ran without app.py's sidebar"
    sizes = figure_sizes(at)
    over = [f"{f.name}: {f.chars:,} chars" for f in sizes if f.chars > FIGURE_BUDGET]
    assert not over, f"{where}: figures over 1 MB: {over}"
    return max((f.chars for f in sizes), default=0)


def test_the_cases_are_at_the_cap() -> None:
    """Every case has exactly cap elements (powers of two under the default 2^22 cap)."""
    import math

    assert {m for _, _, m in CASES} == set(STANDARD_METHODS)
    assert {layout for layout, _, _ in CASES} == {"BTC", "NCHW"}
    for _, shape, _ in CASES:
        assert math.prod(shape) == max_elements()


# Only pages whose sidebar sizes the tensor draw it; the others run at the cap shape
# too, in test_figures_under_1mb_with_every_switch_on.
SIZED_PAGES = [p for p in PAGES if {"batch", "sample"} & set(controls(url_path(p)))]


@pytest.mark.parametrize("page", SIZED_PAGES)
@pytest.mark.parametrize(("layout", "shape", "method"), CASES, ids=lambda v: str(v))
def test_figures_under_1mb_at_the_cap(
    page: str, layout: str, shape: tuple[int, ...], method: str
) -> None:
    at = app_test(page, query_for(layout, shape, method))
    at.run()
    # a page may refuse a shape it cannot use (the BatchNorm lab draws thousands of
    # samples of it): that is a message, not a figure; the next test covers such pages
    _check(at, f"{page} {shape_label(layout, shape)} {method}")


def _owner(topic: object, name: str) -> str | None:
    """The section of a topic package that reads knob `name` (itself or through a part)."""
    parts = getattr(topic, "PARTS", {})
    for s in topic.SECTIONS:  # type: ignore[attr-defined]
        if any(name in {k.name for k in x.knobs} for x in (s, *parts.get(s.slug, ()))):
            return s.slug
    return None


# The training lab's lengths (its "Epochs" knobs). The payload is the figure's traces and
# points, not how long the networks trained: where a length draws the same traces, each
# with the same number of points, at its shortest as at its default, the payload cases run
# it at its shortest (DyT's sweep at 2 epochs, three seeds, cost ~25 CPU-s). Converge and
# smooth draw one point per evaluation along training: their lengths shape the figure and
# stay as enumerated. test_a_pinned_length_draws_its_defaults_figure checks this split.
LENGTHS = {k.name: (s, k) for s in training.SECTIONS for k in s.knobs if k.label == "Epochs"}
PINNED = ("tol_epochs", "dy_epochs", "bs_epochs", "no_epochs", "tiny_epochs", "ws_epochs")
SHORTEST = {"training": {n: fmt(LENGTHS[n][1].choices[0]) for n in PINNED}}


def _enumerated(page: str) -> list[dict[str, str]]:
    """The page's numeric URL parameters at their maxima, with each value of each of its
    choice parameters in turn (a section, a rule, a comparison); a pinned length stays at
    its shortest."""
    params = PAGE_PARAMS.get(page, ())
    pinned = SHORTEST.get(page, {})
    top = {p.name: fmt(p.hi) for p in params if p.choices is None and p.hi is not None}
    top |= pinned
    return [
        {**top, p.name: fmt(c)} for p in params if p.name not in pinned for c in p.choices or ()
    ]


def _drawn(fig: go.Figure | None) -> object:
    """What sizes a figure's payload: each trace's type and the shape of every array in
    it, and the layout's annotations and shapes (their count)."""
    if fig is None:
        return None

    def arrays(d: dict, at: str = "") -> list[tuple[str, tuple[int, ...]]]:
        out: list[tuple[str, tuple[int, ...]]] = []
        for k, v in sorted(d.items()):
            if isinstance(v, dict):
                out += arrays(v, f"{at}{k}.")
            elif isinstance(v, list | tuple | np.ndarray):
                out.append((at + k, np.shape(v)))
        return out

    spec = fig.to_plotly_json()
    layout = spec["layout"]
    traces = [(t.get("type"), arrays(t)) for t in spec["data"]]
    return traces, len(layout.get("annotations", ())), len(layout.get("shapes", ()))


@pytest.mark.parametrize("name", sorted(LENGTHS))
def test_a_pinned_length_draws_its_defaults_figure(name: str) -> None:
    """A pinned length draws, at its shortest, the traces and points it draws at its
    default (one seed, the interface tests' small setup: the counts depend on neither);
    an unpinned one draws a different number of points (so it stays as enumerated)."""
    section, knob = LENGTHS[name]
    assert knob.choices and knob.choices[0] == min(knob.choices)
    knobs = {**section.defaults(), "runs": 1}
    drawn = [
        _drawn(section.figure(section.run(training.example_setup(), knobs | {name: v},
                                          no_progress), False))
        for v in (knob.choices[0], knob.default)
    ]  # fmt: skip
    assert drawn[0] is not None
    assert (drawn[0] == drawn[1]) == (name in PINNED), (name, drawn)


def _run_key(topic: object, page: str, query: dict[str, str]) -> frozenset[tuple[str, str]]:
    """What a run of `query` draws: the values of the parameters the open section reads
    (every parameter on a page that shows all its sections at once)."""
    params = PAGE_PARAMS[page]
    full = {**{p.name: fmt(p.default) for p in params}, **query}
    slugs = tuple(s.slug for s in topic.SECTIONS)  # type: ignore[attr-defined]
    selector = next((p.name for p in params if p.choices == slugs), None)
    read = {
        p.name
        for p in params
        if selector is None or _owner(topic, p.name) in (None, full[selector])
    }
    return frozenset((n, v) for n, v in full.items() if n in read)


def _page_param_cases() -> list[tuple[str, dict[str, str]]]:
    """(page, query): `_enumerated`, each run once; a query that differs from an earlier
    one only in a knob the open section does not read draws the same (49 `bn_layer`
    values under the default section drew one figure 49 times)."""
    out: list[tuple[str, dict[str, str]]] = []
    for info in PAGE_INFOS:
        if info.path not in PAGES or info.path not in PAGE_PARAMS:
            continue
        topic = importlib.import_module(info.topic)
        seen: set[frozenset[tuple[str, str]]] = set()
        for query in _enumerated(info.path):
            key = _run_key(topic, info.path, query)
            if key not in seen:
                seen.add(key)
                out.append((info.path, query))
    return out


def test_the_page_parameter_cases_draw_what_the_enumeration_draws() -> None:
    """Every enumerated query draws what some case draws, and no two cases draw the same;
    a knob of a section the query does not open changes nothing it draws."""
    cases = _page_param_cases()
    for info in PAGE_INFOS:
        if info.path not in PAGE_PARAMS:
            continue
        topic = importlib.import_module(info.topic)
        keys = [_run_key(topic, info.path, q) for pg, q in cases if pg == info.path]
        assert len(set(keys)) == len(keys), info.path
        assert {_run_key(topic, info.path, q) for q in _enumerated(info.path)} == set(keys)
    bn = importlib.import_module("normviz.batchnorm")
    a, b = ({**q, "bn_layer": v} for q in [_enumerated("batchnorm")[0]] for v in ("1", "2"))
    assert _run_key(bn, "batchnorm", a) == _run_key(bn, "batchnorm", b)  # sim=running
    a, b = ({**a, "sim": "realnet"}, {**b, "sim": "realnet"})
    assert _run_key(bn, "batchnorm", a) != _run_key(bn, "batchnorm", b)


@pytest.mark.parametrize(("page", "query"), _page_param_cases(), ids=str)
def test_figures_under_1mb_at_the_page_parameters_maxima(page: str, query: dict[str, str]) -> None:
    at = app_test(page, query)
    at.run()
    _check(at, f"{page} {query}")


SWITCH_CASES = [
    (page, layout)
    for page in PAGES
    for layout in (("BTC", "NCHW") if "layout" in controls(url_path(page)) else ("NCHW",))
]  # a page without the layout setting draws the same in both


@pytest.mark.parametrize(("page", "layout"), SWITCH_CASES)
def test_figures_under_1mb_with_every_switch_on(page: str, layout: str) -> None:
    """The page's toggles and checkboxes, each switched on at the longest-C cap shape."""
    shape = cap_shapes(layout)["max C"]
    at = app_test(page, query_for(layout, shape, "group"))
    at.run()
    _check(at, f"{page} {shape_label(layout, shape)}")
    switches = [w.key for w in (*at.main.toggle, *at.main.checkbox) if w.key and not w.value]
    for key in switches:
        found = [w for w in (*at.main.toggle, *at.main.checkbox) if w.key == key]
        if not found:  # an earlier switch hid it
            continue
        found[0].set_value(True).run()
        _check(at, f"{page} {shape_label(layout, shape)} with {key} on")
