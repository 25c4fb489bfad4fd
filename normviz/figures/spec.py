"""A figure assembled as plain dicts, turned into a `go.Figure` once, at the end.

Plotly's object API validates and walks its property tree on every call: a page's
figure built with `make_subplots`, `go.Scatter(...)`, `add_trace` and `update_layout`
costs 10 to 40 ms of CPU, while `go.Figure(spec)` from the finished dicts costs 2 to
5 ms, and 0.3 to 1.5 ms without validation. A seed change rebuilds every figure of a
page, so every figure of the app is assembled here.

`Spec` offers the few `go.Figure` methods the builders use, with the same meaning
(`add_trace`, `update_layout`, `update_xaxes`, `update_yaxes`, `add_annotation`,
`add_shape`, `add_vline`, `add_hline`, `update_annotations`), so `style.apply` and
`style.top_room` take either.
Two differences: traces are dicts (`trace("bar", x=...)`), and there are no "magic
underscores": write `{"title": {"text": "value"}}`, not `title_text="value"`.

`figure()` skips plotly's validation (its `_validate=False`, what plotly itself uses
internally): the tests validate instead. Every section's figure at its knobs' defaults
and maxima (tests/test_architecture.py), the practice figures and this module's own
tests go through `tests/signals.assert_valid`: plotly's validation of the JSON must
accept every property and change nothing (a string title it would turn into
`{"text": ...}`; `merge` already does that for layout titles).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

Refs = dict[tuple[int, int], dict[str, str]]


def merge(into: dict[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """Plotly's update rule on plain dicts: nested dicts merge, anything else replaces.

    A string title becomes `{"text": ...}` as plotly stores it; values are copied
    (dicts and lists), so a later merge never writes into the caller's constants.
    """
    for key, value in patch.items():
        if key == "title" and isinstance(value, str):
            value = {"text": value}
        if isinstance(value, Mapping):
            old = into.get(key)
            into[key] = merge(old if isinstance(old, dict) else {}, value)
        elif isinstance(value, list | tuple) and key in ("annotations", "shapes"):
            into[key] = [dict(v) for v in value]
        else:
            into[key] = value
    return into


def trace(kind: str, **props: Any) -> dict[str, Any]:
    """One trace as a dict: `trace("scatter", x=..., y=..., mode="lines")`."""
    return {"type": kind, **props}


@functools.lru_cache(maxsize=128)
def _grid(rows: int, cols: int, n_titles: int, options: str) -> tuple[str, Refs]:
    """`make_subplots`' layout (as JSON, copied per use) and each cell's axis references.

    The titles are placeholders, filled in by `Spec.grid`: a grid's geometry does not
    depend on their text, so one cached layout serves every figure of that shape.
    """
    titles = [f"title {i}" for i in range(n_titles)] or None
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=titles, **json.loads(options))
    layout = fig.layout.to_plotly_json()
    layout.pop("template", None)  # go.Figure puts the default template back
    refs: Refs = {}
    for r in range(1, rows + 1):
        for c in range(1, cols + 1):
            cell = fig.get_subplot(r, c)
            if cell is None:
                continue
            if isinstance(cell, go.layout.Scene):
                refs[(r, c)] = {"scene": cell.plotly_name}
            else:
                x, y = cell.xaxis.plotly_name, cell.yaxis.plotly_name
                refs[(r, c)] = {"xaxis": "x" + x[5:], "yaxis": "y" + y[5:]}
    return json.dumps(layout), refs


@dataclass(frozen=True)
class Picture:
    """A drawing that needs no chart library: HTML (SVG images inside) that normviz wrote itself
    (never user text), shown where a figure would be (ui.runner.chart), with the same
    text alternative. For still pictures only: nothing to hover, zoom or pick."""

    html: str


@dataclass
class Spec:
    """A figure under construction: `data` (trace dicts) and `layout` (nested dicts)."""

    layout: dict[str, Any] = field(default_factory=dict)
    data: list[dict[str, Any]] = field(default_factory=list)
    refs: Refs = field(default_factory=dict)

    @classmethod
    def grid(cls, rows: int, cols: int, titles: tuple[str, ...] = (), **options: Any) -> Spec:
        """Subplots as `make_subplots(rows, cols, subplot_titles=titles, **options)`."""
        text, refs = _grid(rows, cols, len(titles), json.dumps(options, sort_keys=True))
        layout = json.loads(text)
        for note, title in zip(layout.get("annotations", ()), titles, strict=False):
            note["text"] = title
        return cls(layout, [], refs)

    # ---- go.Figure's methods, on dicts ----------------------------------------------

    def add_trace(self, tr: Mapping[str, Any], row: int | None = None, col: int | None = None):
        """Append a trace (a dict); in a grid, on the subplot at (row, col)."""
        t = dict(tr)
        if row is not None:
            t.update(self.refs[(row, col or 1)])
        self.data.append(t)
        return self

    def update_layout(self, patch: Mapping[str, Any] | None = None, **props: Any):
        merge(self.layout, patch or {})
        merge(self.layout, props)
        return self

    def _axes(self, letter: str, row: int | None, col: int | None) -> list[str]:
        if row is not None or col is not None:
            ref = self.refs[(row or 1, col or 1)][f"{letter}axis"]
            return [f"{letter}axis{ref[1:]}"]
        pattern = re.compile(rf"{letter}axis\d*")
        return [k for k in self.layout if pattern.fullmatch(k)] or [f"{letter}axis"]

    def update_xaxes(self, patch: Mapping[str, Any] | None = None, row=None, col=None, **props):
        for name in self._axes("x", row, col):
            merge(self.layout.setdefault(name, {}), {**(patch or {}), **props})
        return self

    def update_yaxes(self, patch: Mapping[str, Any] | None = None, row=None, col=None, **props):
        for name in self._axes("y", row, col):
            merge(self.layout.setdefault(name, {}), {**(patch or {}), **props})
        return self

    def _refer(self, item: dict[str, Any], row: int | None, col: int | None) -> dict[str, Any]:
        """Point an annotation or shape at a subplot, as plotly's row/col arguments do
        ("x domain" becomes "x2 domain"; "paper" stays)."""
        if row is None and col is None:
            return item
        cell = self.refs[(row or 1, col or 1)]
        for letter in "xy":
            ref = item.get(f"{letter}ref", letter)
            if ref.startswith(letter):
                item[f"{letter}ref"] = cell[f"{letter}axis"] + ref[1:]
        return item

    def add_annotation(self, row: int | None = None, col: int | None = None, **props: Any):
        item = self._refer(merge({}, props), row, col)
        self.layout.setdefault("annotations", []).append(item)
        return self

    def add_shape(self, row: int | None = None, col: int | None = None, **props: Any):
        item = self._refer(merge({}, props), row, col)
        self.layout.setdefault("shapes", []).append(item)
        return self

    def _lines(self, row: int | None, col: int | None, line: dict[str, Any]):
        """A line on one subplot, or, in a grid with no row/col, on every subplot that has
        a trace (plotly's default `exclude_empty_subplots`), in row-major order."""
        if not self.refs:
            return self.add_shape(row, col, **line)
        used = {(t.get("xaxis"), t.get("yaxis")) for t in self.data}
        for r, c in self.refs if row is None and col is None else [(row or 1, col or 1)]:
            ref = self.refs[(r, c)]
            if (ref.get("xaxis"), ref.get("yaxis")) in used:
                self.add_shape(r, c, **line)
        return self

    def add_vline(self, x: float, row: int | None = None, col: int | None = None, **props: Any):
        """A vertical line across the subplot's height, as `go.Figure.add_vline`."""
        line = {"type": "line", "x0": x, "x1": x, "xref": "x", "y0": 0, "y1": 1}
        return self._lines(row, col, {"yref": "y domain", **line, **props})

    def add_hline(self, y: float, row: int | None = None, col: int | None = None, **props: Any):
        """A horizontal line across the subplot's width, as `go.Figure.add_hline`."""
        line = {"type": "line", "y0": y, "y1": y, "yref": "y", "x0": 0, "x1": 1}
        return self._lines(row, col, {"xref": "x domain", **line, **props})

    @property
    def title(self) -> str | None:
        """The figure's title text (`fig.layout.title.text` of a go.Figure)."""
        return (self.layout.get("title") or {}).get("text")

    def figure(self) -> go.Figure:
        """The finished figure (not validated here: see the module's docstring)."""
        return go.Figure({"data": self.data, "layout": self.layout}, _validate=False)

    def add_hline_note(self, y: float, text: str, position: str = "top right", **props: Any):
        """The label `go.Figure.add_hline(y, annotation_text=text,
        annotation_position=position)` adds beside its line (position: "top left",
        "top right", "bottom left" or "bottom right"); `props` as `add_annotation`'s."""
        vertical, horizontal = position.split()
        return self.add_annotation(
            **{"text": text, "showarrow": False, "xref": "x domain", "yref": "y", "y": y},
            **{"x": int(horizontal == "right"), "xanchor": horizontal},
            **{"yanchor": "bottom" if vertical == "top" else "top"},
            **props,
        )

    def update_annotations(self, patch: Mapping[str, Any] | None = None, **props: Any):
        """Update every annotation of the layout, as `go.Figure.update_annotations` with no
        selector: `fig.update_annotations(font_size=12)` is
        `spec.update_annotations(font={"size": 12})`."""
        for item in self.layout.get("annotations", ()):
            merge(item, {**(patch or {}), **props})
        return self
