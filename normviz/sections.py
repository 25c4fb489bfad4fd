"""The one shape every page section has: run it, then draw its figure, table and notes.

A section is one idea on one page (the BatchNorm lab's "Batch size", the
distributions page's "ε on constant data"). Its module reads top to bottom: the
intro, the knobs, `run`, the figure, the table, and the sentences computed from the
result, so the words can never contradict the chart. The UI runner
(`ui/runner.py`) shows any section the same way: one cache, one progress bar, one
way to show a refusal.

    result = section.run(setup, knobs, progress)   # a small frozen dataclass
    section.figure(result, presenter)               # go.Figure, a Picture or None
    section.table(result)                            # pd.DataFrame or None
    section.notes(result)                            # sentences (markdown) from the numbers
    section.extras(result)                           # more items: a flowchart, code, ...
    section.alt_text(result, figure)                 # the figure in sentences
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from normviz import alttext
from normviz.figures.spec import Picture
from normviz.knobs import Knob, Value

Progress = Callable[[float, str], None]  # (fraction done, what is running)


def no_progress(fraction: float, text: str) -> None:
    """A progress callback that shows nothing (tests, benchmarks)."""


def _no_figure(result: Any, presenter: bool) -> go.Figure | None:
    return None


def _no_table(result: Any) -> pd.DataFrame | None:
    return None


def _no_notes(result: Any) -> Sequence[str]:
    return ()


EXTRA_KINDS = ("callout", "caption", "markdown", "static", "code", "graphviz")


@dataclass(frozen=True)
class Extra:
    """One more item a section shows beside its figure, table and notes, drawn by kind.

    kind: "callout" (a highlighted answer, markdown), "caption" and "markdown" (text),
    "static" (a small DataFrame shown whole), "code" (Python source), "graphviz" (DOT).
    `top`: drawn before the figure (else after the notes). `fold`: drawn inside a
    closed fold with that label (consecutive items with the same fold share it).
    """

    kind: str
    body: str | pd.DataFrame
    top: bool = False
    fold: str = ""


def _no_extras(result: Any) -> Sequence[Extra]:
    return ()


def _no_alt(result: Any) -> Sequence[str]:
    return ()


@dataclass(frozen=True)
class Section:
    """One section of a page.

    run(setup, knobs, progress) -> a frozen result. `setup` is the page's hashable
    setup object (shared settings resolved for this page), `knobs` maps each of
    this section's knob names to its value. Raises NormConfigError (Refusal for what
    torch itself refuses) when the setting cannot run.
    """

    slug: str  # URL value and widget key part
    label: str  # tab or heading
    intro: str  # markdown: what the section shows and why
    run: Callable[[Any, Mapping[str, Value], Progress], Any]
    knobs: tuple[Knob, ...] = ()
    # a Plotly figure, or a still Picture (SVG images in HTML) that loads no chart library
    figure: Callable[[Any, bool], go.Figure | Picture | None] = field(default=_no_figure)
    table: Callable[[Any], pd.DataFrame | None] = field(default=_no_table)
    notes: Callable[[Any], Sequence[str]] = field(default=_no_notes)
    extras: Callable[[Any], Sequence[Extra]] = field(default=_no_extras)
    # the figure as sentences computed from the result (a text alternative); when it
    # gives none, the sentences are read off the figure itself (alttext.describe)
    alt: Callable[[Any], Sequence[str]] = field(default=_no_alt)

    def alt_text(self, result: Any, fig: go.Figure | Picture | None) -> list[str]:
        """The text alternative of this section's figure: `alt(result)`, else described."""
        # a Picture cannot be read back: its section's `alt` says it (tests/test_architecture.py)
        return list(self.alt(result)) or (
            alttext.describe(fig) if isinstance(fig, go.Figure) else []
        )

    def defaults(self) -> dict[str, Value]:
        """Every knob at its default."""
        return {k.name: k.default for k in self.knobs}

    def maxima(self) -> dict[str, Value]:
        """Every knob at its largest value (the payload and cost checks run these)."""
        out: dict[str, Value] = {}
        for k in self.knobs:
            if k.multi:
                out[k.name] = tuple(str(c) for c in k.choices or ())
            elif k.choices:
                out[k.name] = k.choices[-1]
            elif k.hi is not None:
                out[k.name] = type(k.default)(k.hi)
            else:
                out[k.name] = k.default
        return out


def slugs(sections: Sequence[Section]) -> tuple[str, ...]:
    """The sections' URL values, in order (one declaration feeds URL choices and tabs)."""
    return tuple(s.slug for s in sections)


def by_slug(sections: Sequence[Section], slug: str) -> Section:
    """The section with URL value `slug`."""
    for s in sections:
        if s.slug == slug:
            return s
    raise KeyError(slug)
