"""Text alternatives for charts: what a figure shows, in sentences computed from its data.

A section may write its own text alternative from its result (`Section.alt`); every
other chart gets `describe(fig)`: its title, its axes, and per named trace how many
points it draws and the range of its values, read off the figure itself, so the
words never contradict the picture. `describe_dot` does the same for a Graphviz
flowchart (its boxes and arrows).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

MAX_TRACES = 12  # traces described one by one; the rest are counted
_TAG = re.compile(r"<[^>]+>")


def plain(text: object) -> str:
    """Figure text without its HTML (line breaks become spaces)."""
    return " ".join(_TAG.sub(" ", str(text or "")).split())


def _num(v: float) -> str:
    return f"{v:.3g}" if v == v else "not a number"


def _values(arr: object) -> np.ndarray | None:
    """A trace's data as finite floats; None when it is not numeric (categories)."""
    if arr is None:
        return None
    try:
        a = np.asarray(arr, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        return None
    return a[np.isfinite(a)]


def _len(arr: object) -> int:
    return 0 if arr is None else int(np.asarray(arr, dtype=object).size)


def _span(name: str, arr: object) -> str:
    """ "x from 0 to 9" or "x: a, b, c" (categories), "" when empty."""
    if arr is None:
        return ""
    a = _values(arr)
    if a is None:
        cats = list(dict.fromkeys(plain(v) for v in np.asarray(arr, dtype=object).reshape(-1)))
        shown = ", ".join(cats[:8]) + (f" and {len(cats) - 8} more" if len(cats) > 8 else "")
        return f"{name}: {shown}" if cats else ""
    if not a.size:
        return ""
    lo, hi = float(a.min()), float(a.max())
    return f"{name} {_num(lo)}" if lo == hi else f"{name} from {_num(lo)} to {_num(hi)}"


def _get(d: object, *path: str) -> object:
    """d[path[0]][path[1]]... in a figure's plain dicts; None where a key is missing."""
    for k in path:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def _axis_title(layout: dict, trace: dict, letter: str) -> str:
    ref = trace.get(f"{letter}axis") or letter
    title = plain(_get(layout, ref.replace(letter, f"{letter}axis", 1), "title", "text"))
    return title or letter


def _trace_sentence(layout: dict, t: dict) -> str:
    kind = t["type"]
    name = plain(t.get("name")) or kind
    if kind == "heatmap":
        z = _values(t.get("z"))
        shape = np.shape(t.get("z"))
        size = "×".join(str(n) for n in shape) + " cells" if shape else "cells"
        return f"{name}: a heatmap of {size}, " + (_span("value", z) if z is not None else "")
    if kind in ("scatter3d", "mesh3d"):
        return f"{name}: {_len(t.get('x')):,} points in 3D"
    parts = [_span(_axis_title(layout, t, letter), t.get(letter)) for letter in "xy"]
    n = max(_len(t.get(k)) for k in "xy")
    unit = {"bar": "bar", "histogram": "bar"}.get(kind, "point") + ("" if n == 1 else "s")
    ys = _values(t.get("y")) if kind != "histogram" else None
    mean = f", mean {_num(float(ys.mean()))}" if ys is not None and ys.size > 1 else ""
    return f"{name}: {n:,} {unit}; " + "; ".join(p for p in parts if p) + mean


def _shown(t: dict) -> bool:
    """A trace a reader sees as a series: named, visible, not a drawing aid."""
    if t.get("visible") is False or not plain(t.get("name")):
        return False
    invisible = _get(t, "marker", "opacity") == 0
    aid = t.get("showlegend") is False and t.get("hoverinfo") == "skip"  # a band, a guide
    return not invisible and not aid


def describe(fig: go.Figure | None) -> list[str]:
    """Sentences that say what `fig` shows: title, axes, each named series, its notes.

    The figure is read as plain dicts (each trace's and the layout's `to_plotly_json`):
    reading it through plotly's property objects validated every value read, several
    ms a figure on every new figure (docs/serving.md)."""
    if fig is None:
        return []
    layout = fig.layout.to_plotly_json()
    data = [t.to_plotly_json() for t in fig.data]
    out = []
    title = plain(_get(layout, "title", "text"))
    if title:
        out.append(f"Chart: {title}.")
    traces = [t for t in data if _shown(t)]
    if not traces:  # a chart of unnamed pieces: count what it draws
        traces = [t for t in data if t.get("visible") is not False and t["type"] != "mesh3d"][:1]
    for t in traces[:MAX_TRACES]:
        try:
            out.append(_trace_sentence(layout, t) + ".")
        except (TypeError, ValueError):  # data of a shape no sentence expects: name it
            out.append(f"{plain(t.get('name')) or t['type']}.")
    if len(traces) > MAX_TRACES:
        out.append(f"… and {len(traces) - MAX_TRACES} more series.")
    notes = [plain(a.get("text")) for a in layout.get("annotations", ()) if plain(a.get("text"))]
    if notes:
        out.append("Labels: " + "; ".join(notes[:12]) + ".")
    return out or ["A chart with no data."]


_NODE = re.compile(r'^\s*"([^"]+)"\s*\[label="([^"]*)"', re.M)
_EDGE = re.compile(r'^\s*"([^"]+)"\s*->\s*"([^"]+)"\s*(?:\[([^\]]*)\])?', re.M)
_LABEL = re.compile(r'label="([^"]*)"')
_BOLD = re.compile(r"penwidth=([0-9.]+)")


def describe_dot(dot: str) -> list[str]:
    """A Graphviz flowchart as sentences: one per arrow, "box → box (label)".

    Arrows drawn thicker than the rest (the highlighted path) say so.
    """
    labels = {k: plain(v.replace("\\n", " ")) for k, v in _NODE.findall(dot)}
    widths = [float(w) for w in _BOLD.findall(dot)] or [1.0]
    lines = []
    for a, b, attrs in _EDGE.findall(dot):
        label = _LABEL.search(attrs or "")
        via = f" ({plain(label.group(1).replace(chr(92) + 'n', ' '))})" if label else ""
        width = _BOLD.search(attrs or "")
        bold = width is not None and float(width.group(1)) > min(widths)
        on_path = " [highlighted path]" if bold else ""
        lines.append(f"{labels.get(a, a)} → {labels.get(b, b)}{via}{on_path}.")
    return lines or [f"A diagram of {len(labels)} boxes."]


def join(lines: Sequence[str]) -> str:
    """One paragraph."""
    return " ".join(lines)
