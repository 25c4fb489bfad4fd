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


def _axis_title(fig: go.Figure, trace: go.BaseTraceType, letter: str) -> str:
    ref = getattr(trace, f"{letter}axis", None) or letter
    axis = fig.layout[ref.replace(letter, f"{letter}axis", 1)] if ref else None
    title = plain(axis.title.text) if axis is not None and axis.title else ""
    return title or letter


def _trace_sentence(fig: go.Figure, t: go.BaseTraceType) -> str:
    name = plain(t.name) or t.type
    if t.type == "heatmap":
        z = _values(t.z)
        shape = np.shape(t.z)
        size = "×".join(str(n) for n in shape) + " cells" if shape else "cells"
        return f"{name}: a heatmap of {size}, " + (_span("value", z) if z is not None else "")
    if t.type in ("scatter3d", "mesh3d"):
        return f"{name}: {_len(t.x):,} points in 3D"
    parts = [_span(_axis_title(fig, t, letter), getattr(t, letter, None)) for letter in "xy"]
    n = max(_len(getattr(t, k, None)) for k in "xy")
    kind = {"bar": "bar", "histogram": "bar"}.get(t.type, "point") + ("" if n == 1 else "s")
    ys = _values(t.y) if t.type != "histogram" else None
    mean = f", mean {_num(float(ys.mean()))}" if ys is not None and ys.size > 1 else ""
    return f"{name}: {n:,} {kind}; " + "; ".join(p for p in parts if p) + mean


def _shown(t: go.BaseTraceType) -> bool:
    """A trace a reader sees as a series: named, visible, not a drawing aid."""
    if t.visible is False or not plain(t.name):
        return False
    marker = getattr(t, "marker", None)
    invisible = marker is not None and getattr(marker, "opacity", None) == 0
    aid = t.showlegend is False and t.hoverinfo == "skip"  # a band, an outline, a guide
    return not invisible and not aid


def describe(fig: go.Figure | None) -> list[str]:
    """Sentences that say what `fig` shows: title, axes, each named series, its notes."""
    if fig is None:
        return []
    out = []
    title = plain(fig.layout.title.text) if fig.layout.title else ""
    if title:
        out.append(f"Chart: {title}.")
    traces = [t for t in fig.data if _shown(t)]
    if not traces:  # a chart of unnamed pieces: count what it draws
        traces = [t for t in fig.data if t.visible is not False and t.type != "mesh3d"][:1]
    for t in traces[:MAX_TRACES]:
        try:
            out.append(_trace_sentence(fig, t) + ".")
        except (TypeError, ValueError):  # data of a shape no sentence expects: name it
            out.append(f"{plain(t.name) or t.type}.")
    if len(traces) > MAX_TRACES:
        out.append(f"… and {len(traces) - MAX_TRACES} more series.")
    notes = [plain(a.text) for a in fig.layout.annotations if plain(a.text)]
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
