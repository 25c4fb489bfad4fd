"""What every figure must be, checked in one place.

Colour is never the only signal: the series a figure's legend names must differ in
something besides colour (a dash, a marker symbol, a fill pattern, a line width or the
kind of mark), so they stay apart in grey-scale and for every reader. Used by the
section interface test (tests/test_architecture.py) on every section's figure.

The payload budget: every Plotly figure the app sends is at most FIGURE_BUDGET
characters of JSON (docs/architecture.md's 1 MB), checked with `assert_within_budget`.
"""

from __future__ import annotations

import json
from collections import defaultdict

import plotly.graph_objects as go


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


def assert_valid(fig: go.Figure) -> None:
    """A figure built without plotly's validation (normviz.figures.spec) is what plotly's
    validation would make of it: no unknown property, nothing plotly would coerce
    (a string title it would turn into {"text": ...})."""
    sent = fig.to_plotly_json()
    assert go.Figure(sent).to_plotly_json() == sent


FIGURE_BUDGET = 1_000_000  # characters of JSON per figure the app sends (the 1 MB budget)


def figure_chars(fig: go.Figure | dict | str) -> int:
    """Characters of JSON a figure costs: a go.Figure, its dict, or the JSON a chart sent."""
    if isinstance(fig, str):
        return len(fig)
    if isinstance(fig, dict):
        return len(json.dumps(fig, default=str))
    return len(fig.to_json())


def assert_within_budget(*figs: go.Figure | dict | str, what: object = "") -> None:
    """Every figure given is at most FIGURE_BUDGET characters of JSON."""
    over = [(i, n) for i, f in enumerate(figs) if (n := figure_chars(f)) > FIGURE_BUDGET]
    assert not over, f"{what}: figures (index, chars) over {FIGURE_BUDGET:,} chars: {over}"
