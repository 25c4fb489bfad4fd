"""Colour is never the only signal: in every section's figure, the series a legend names
differ in something besides colour (a dash, a marker symbol, a fill pattern, a line
width or the kind of mark), so they stay apart in grey-scale and for every reader.
"""

from __future__ import annotations

import importlib
from collections import defaultdict

import plotly.graph_objects as go
import pytest

from normviz.errors import Refusal
from normviz.sections import Section, no_progress
from ui.pages import PAGES

TOPICS = {p.path: importlib.import_module(p.topic) for p in PAGES}
SECTIONS = [
    pytest.param(path, s, id=f"{path}:{s.slug}")
    for path, mod in TOPICS.items()
    for s in (*getattr(mod, "SECTIONS", ()), *getattr(mod, "PART_SECTIONS", ()))
]


def _get(obj: object, *path: str) -> object:
    for name in path:
        obj = getattr(obj, name, None)
        if obj is None:
            return None
    return obj


def signal(t: go.BaseTraceType) -> tuple:
    """What tells a trace apart from the others when colour is not seen."""
    mode = _get(t, "mode") or ("" if t.type not in ("scatter", "scatter3d") else "lines+markers")
    return (
        t.type,
        mode if t.type in ("scatter", "scatter3d", "scattergl") else "",
        _get(t, "line", "dash") if "lines" in str(mode) else None,
        _get(t, "line", "width") if "lines" in str(mode) else None,
        _get(t, "marker", "symbol") if "markers" in str(mode) else None,
        _get(t, "marker", "pattern", "shape") if t.type in ("bar", "histogram") else None,
        _get(t, "fill"),
        _get(t, "opacity"),
    )


def same_looking(fig: go.Figure) -> list[list[str]]:
    """Groups of legend entries that differ only in colour."""
    by_look: dict[tuple, list[str]] = defaultdict(list)
    for t in fig.data:
        if t.showlegend is False or not t.name:
            continue
        if t.showlegend is None and len(fig.data) == 1:
            continue
        where = tuple(getattr(t, k, None) for k in ("xaxis", "yaxis", "scene"))
        by_look[(where, signal(t))].append(t.name)
    return [names for names in by_look.values() if len(set(names)) > 1]


@pytest.mark.parametrize(("path", "section"), SECTIONS)
def test_series_differ_in_more_than_colour(path: str, section: Section) -> None:
    mod = TOPICS[path]
    setup = mod.example_setup()
    if section in getattr(mod, "PART_SECTIONS", ()):
        owner = next(s for s in mod.SECTIONS if section in mod.PARTS.get(s.slug, ()))
        setup = mod.part_setup(section, setup, owner.run(setup, owner.defaults(), no_progress))
    ran = 0
    for knobs in (section.defaults(), section.maxima()):
        try:
            res = section.run(setup, knobs, no_progress)
        except Refusal:
            continue
        ran += 1
        fig = section.figure(res, False)
        if fig is not None:
            assert not same_looking(fig), same_looking(fig)
    assert ran, f"{section.slug} refused both its defaults and its maxima"
