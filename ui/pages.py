"""The page map: URL path, file, title, icon and section of every page."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class PageInfo:
    path: str  # URL path; the file is pages/<path>.py
    title: str
    icon: str
    section: str
    blurb: str  # one line for the home page's map
    topic: str  # the normviz package that holds its compute, figures and words

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
    ),
    PageInfo(
        "distributions",
        "Distributions",
        ":material/bar_chart:",
        "Learn",
        "values before and after each method, on generated or uploaded data",
        "normviz.distributions",
    ),
    PageInfo(
        "batchnorm",
        "BatchNorm lab",
        ":material/science:",
        "Learn",
        "training vs evaluation, tiny batches, running statistics",
        "normviz.batchnorm",
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
    ),
)


def available() -> list[PageInfo]:
    """Pages whose file exists (pages not built yet are not listed)."""
    return [p for p in PAGES if p.file.exists()]
