"""The page map: URL path, file, title, icon and section of every page, and which of the
shared sidebar settings each page uses (the sidebar draws only those)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The shared sidebar's controls, by name (ui.sidebar.draw draws them in this order):
# "layout"; "batch" the first axis (B or N); "sample" the others (T, C or C, H, W);
# "method" (with G for a grouped method and the axes for custom); "groups" G whatever the
# method; "eps"; "data"; "seed"; "real" a real data source (ui.realdata: its layer, text or
# photo, its fixed shape instead of the layout and sizes). Presenter mode is on every
# page's sidebar. A control a page does not declare is not drawn there, but its value
# lives on (session and URL).
CONTROLS = ("layout", "batch", "sample", "method", "groups", "eps", "data", "seed", "real")
HOME_CONTROLS: tuple[str, ...] = ()  # the home page's figures use the classroom shapes


@dataclass(frozen=True)
class PageInfo:
    path: str  # URL path; the file is pages/<path>.py
    title: str
    icon: str
    section: str
    blurb: str  # one line for the home page's map
    topic: str  # the normviz package that holds its compute, figures and words
    controls: tuple[str, ...] = ()  # the shared settings the page uses (CONTROLS names)
    charts: bool = True  # its first view draws a plotly chart (ui.chartload)

    @property
    def file(self) -> Path:
        return ROOT / "pages" / f"{self.path}.py"


PAGES: tuple[PageInfo, ...] = (
    PageInfo(
        "axes",
        "Axis Explorer",
        ":material/view_in_ar:",
        "Learn",
        "shape a tensor and see which cells share one mean and variance",
        "normviz.axes",
        CONTROLS,
    ),
    PageInfo(
        "distributions",
        "Distributions",
        ":material/bar_chart:",
        "Learn",
        "values before and after each method, on generated or uploaded data",
        "normviz.distributions",
        CONTROLS,
    ),
    PageInfo(
        "batchnorm",
        "BatchNorm lab",
        ":material/science:",
        "Learn",
        "training vs evaluation, tiny batches, running statistics",
        "normviz.batchnorm",
        ("layout", "sample", "groups", "eps", "data", "seed"),
    ),
    PageInfo(
        "residual",
        "Pre-norm vs post-norm",
        ":material/repeat:",
        "Learn",
        "where the norm sits in a residual block, and what it does to gradients",
        "normviz.residual",
    ),
    PageInfo(
        "training",
        "Training lab",
        ":material/model_training:",
        "Learn",
        "why normalization helps: the papers' claims, checked live on real digits",
        "normviz.training",
        ("seed",),
    ),
    PageInfo(
        "worked-example",
        "Worked example",
        ":material/edit_note:",
        "Practice",
        "BatchNorm and LayerNorm on a 2×3 matrix, step by step",
        "normviz.worked",
    ),
    PageInfo(
        "choose",
        "Which normalization?",
        ":material/explore:",
        "Practice",
        "a decision guide and an audit of real models",
        "normviz.choose",
        charts=False,
    ),
    PageInfo(
        "practice",
        "Practice",
        ":material/quiz:",
        "Practice",
        "exercises graded by the app, and a live class for the teacher",
        "normviz.practice",
        ("seed",),
        charts=False,
    ),
)


def available() -> list[PageInfo]:
    """Pages whose file exists (pages not built yet are not listed)."""
    return [p for p in PAGES if p.file.exists()]


def controls(path: str) -> tuple[str, ...]:
    """The shared sidebar controls of the page at URL path `path` ("" is the home page)."""
    return next((p.controls for p in PAGES if p.path == path), HOME_CONTROLS)


def charts(path: str) -> bool:
    """Does the first view of the page at URL path `path` draw a chart? (Home: no.)"""
    return next((p.charts for p in PAGES if p.path == path), False)
