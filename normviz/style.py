"""Every colour, font and size of the figures, chosen to read on a projector."""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
from plotly.colors import get_colorscale

from normviz.figures.spec import Spec
from normviz.methods import METHODS

# Okabe-Ito: distinguishable with every common colour-vision deficiency.
PALETTE: tuple[str, ...] = (
    "#0072B2",  # blue
    "#E69F00",  # orange
    "#009E73",  # green
    "#CC79A7",  # pink
    "#56B4E9",  # sky
    "#D55E00",  # vermillion
    "#F0E442",  # yellow
    "#000000",  # black
)
# each method's colour and marker symbol live in its registry entry (normviz.methods)
METHOD_COLOURS: dict[str, str] = {k: m.colour for k, m in METHODS.items()}
# a marker symbol per method, so a chart's methods differ in shape as well as colour
METHOD_SYMBOLS: dict[str, str] = {"none": "circle", **{k: m.symbol for k, m in METHODS.items()}}
# fill patterns for bars side by side (the first is plain)
PATTERNS: tuple[str, ...] = ("", "/", ".", "x", "\\", "+", "-", "|")
HIGHLIGHT = "#D55E00"  # the selected statistic group
SELECTED = "#000000"  # the selected cell
MUTED = "#D9D9D9"  # cells outside the selection
BEFORE = "#7F7F7F"  # "before" histograms
EDGE = "#B3B3B3"  # cell edges and quiet lines (unhighlighted arrows, faint cells)
INK = "#444444"  # axis lines, legend symbol outlines
# Colour scales spelled out as plotly.py's validation would: figures are built as dicts
# without it (normviz/figures/spec.py), and plotly.js knows no reversed "_r" names.
DIVERGING: list[list[float | str]] = [[float(p), c] for p, c in get_colorscale("RdBu_r")]
GREYS: list[list[float | str]] = [[float(p), c] for p, c in get_colorscale("Greys")]
FONT_FAMILY = "Source Sans Pro, Arial, sans-serif"
BASE_FONT = 16  # px; presenter mode multiplies it
PRESENTER_SCALE = 1.4
MAX_CELLS_3D = 4000  # cells drawn in a 3D block before capping
MAX_CELLS_2D = 20000  # cells drawn in a flat view before capping
HIST_BINS = 60


GRID = "#E5E5E5"
# A horizontal legend under everything: anchored to the figure's bottom edge (not to the
# plot, where a fixed offset met the x-axis title once the title or the ticks grew),
# the bottom margin grows to hold it and the axis title keeps its own room above it.
LEGEND_BELOW: dict[str, object] = {
    "orientation": "h",
    "yref": "container",
    "y": 0,
    "yanchor": "bottom",
    "x": 0,
    "xanchor": "left",
}
# A small white template, the default for every figure: plotly's own "plotly_white"
# is large enough that applying it per figure cost ~0.1 s, a third of a page rerun.
pio.templates["normviz"] = go.layout.Template(
    layout={
        "paper_bgcolor": "white",
        "plot_bgcolor": "white",
        "colorway": list(PALETTE),
        # automargin: plotly's own templates turn it on; without it the compact
        # margins of apply() cut off tick labels and put axis titles over them
        **{
            axis: {
                "gridcolor": GRID,
                "zerolinecolor": GRID,
                "linecolor": INK,
                "ticks": "",
                "automargin": True,
            }
            for axis in ("xaxis", "yaxis")
        },
        "hoverlabel": {"font": {"family": FONT_FAMILY}},
    }
)
pio.templates.default = "normviz"


def font_size(presenter: bool = False) -> int:
    return round(BASE_FONT * (PRESENTER_SCALE if presenter else 1.0))


def apply(fig: Spec, presenter: bool = False, height: int | None = None) -> Spec:
    """House layout: large fonts, white background, compact margins."""
    size = font_size(presenter)
    fig.update_layout(
        {
            "font": {"family": FONT_FAMILY, "size": size},
            "title": {"font": {"size": round(size * 1.15)}},
            "margin": {"l": 10, "r": 10, "t": 50 if fig.title else 20, "b": 10},
            "legend": {"font": {"size": size}},
        }
        | ({} if height is None else {"height": height})
    )
    return fig


def lines(text: object) -> int:
    """How many lines a figure text takes (its `<br>` breaks)."""
    return str(text or "").count("<br>") + 1 if text else 0


def top_room(fig: Spec, presenter: bool = False, below: int = 0) -> Spec:
    """Pin the title to the top and make the top margin hold all its lines, and `below`
    more lines of figure text under it (panel titles, a note); call after `apply`."""
    size = font_size(presenter)
    title = fig.title
    n, title_px = lines(title), size * 1.15
    top = round(1.3 * (n * title_px + below * size)) + 20
    fig.update_layout(margin={"t": top})
    if title:
        # plotly anchors a title's "top" at its first line: pad the other lines down
        pad = 6 + round(title_px * (n - 1))
        fig.update_layout(title={"y": 1, "yref": "container", "yanchor": "top", "pad": {"t": pad}})
    return fig


def ink(fill: str) -> str:
    """Black or white: whichever reads better on `fill` (a "#RRGGBB" colour), by WCAG contrast."""
    rgb = [int(fill[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    lum = 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]
    return "black" if (lum + 0.05) / 0.05 >= 1.05 / (lum + 0.05) else "white"


def log_axis(*values: object, most: int = 5) -> dict[str, object]:
    """A log axis labelled at the decades (1, 10, 100...; every few when it spans many)
    when its data spans one or more,
    else at 1, 2 and 5 times a power of ten: never plotly's bare minor digits (2 3 4 ... 9),
    which read as noise from the back of a room. `values`: the axis's data (arrays);
    `most`: the decades labelled at most (a short panel holds fewer)."""
    flat = [np.asarray(v, dtype=float).ravel() for v in values]
    data = np.concatenate(flat) if flat else np.empty(0)
    data = data[np.isfinite(data) & (data > 0)]
    decades = math.log10(data.max() / data.min()) if data.size else 1.0
    wide = decades >= 1
    # 0.001 and 10000 read better as 10⁻³ and 10⁴; 1, 10 and 100 as they are
    power = data.size == 0 or data.min() < 0.01 or data.max() >= 1e4
    return {
        "type": "log",
        # every decade, or every 2nd, 3rd... when there are more than `most`
        "dtick": max(1, math.ceil(decades / most)) if wide else "D2",
        "exponentformat": "power" if power else "none",
    }
