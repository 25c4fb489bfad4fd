"""Teach with normviz: a suggested 50-minute lecture path, each step a link to its view.

One list, shown on the home page (a short version) and in the README (tested to match
and to open without a warning). Every link opens in presenter mode.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode


@dataclass(frozen=True)
class Step:
    minutes: int
    title: str
    path: str  # URL path ("" for home)
    query: tuple[tuple[str, str], ...]  # besides present=1
    what: str  # what to do and say there (markdown)

    @property
    def link(self) -> str:
        """The step's view, relative to the app's root (works under a base path too)."""
        return f"./{self.path}?{urlencode((*self.query, ('present', '1')))}"


STEPS: tuple[Step, ...] = (
    Step(
        5,
        "One formula",
        "",
        (),
        "Why normalize; the formula; the contract table: the methods differ only in their axes.",
    ),
    Step(
        10,
        "Which cells share a statistic",
        "axes",
        (("layout", "BTC"), ("method", "batch")),
        "Click a cell, then switch the method to LayerNorm and GroupNorm: ask the class to "
        "predict the lit cells before each switch.",
    ),
    Step(
        5,
        "Every number by hand",
        "worked-example",
        (),
        "BatchNorm pools a column, LayerNorm a row: the same formula, different numbers.",
    ),
    Step(
        7,
        "Before and after",
        "distributions",
        (("method", "layer"), ("data", "outliers")),
        "What each method fixes (mean 0, variance 1 per group) and what it leaves alone.",
    ),
    Step(
        10,
        "BatchNorm's two modes",
        "batchnorm",
        (("sim", "batch-size"),),
        "Tiny batches: training and evaluation disagree. Then open the *Running stats* tab.",
    ),
    Step(
        4,
        "Where the norm sits",
        "residual",
        (),
        "Pre-norm keeps the gradient path clean through a deep residual stack.",
    ),
    Step(
        4,
        "Choosing one",
        "choose",
        (("arch", "detection"), ("per_device", "2")),
        "Two images per device: why BatchNorm's batch statistics fail there, and what "
        "detectors do instead: published Mask R-CNN froze BatchNorm, Wu & He trained it "
        "with GroupNorm.",
    ),
    Step(
        5,
        "Check the class",
        "practice",
        (("kind", "cells"),),
        "Start a live class: students answer on their phones, you reveal the answer.",
    ),
)
TOTAL_MINUTES = sum(s.minutes for s in STEPS)


def markdown() -> str:
    """The path as a numbered markdown list (fixed text: no user input)."""
    return "\n".join(
        f"{i}. **[{s.title}]({s.link})** ({s.minutes} min): {s.what}"
        for i, s in enumerate(STEPS, 1)
    )
