"""Precomputed frames for a step-through player: what each step shows, shipped once.

A process that unfolds over numbers already computed (running statistics batch by
batch, a worked example's μ, σ², x̂ and y) is a `Frames`: one label per frame, the
numbers each frame shows (`Column`, already formatted), and either lines drawn up to
the frame (`Line`, in panels) or the state of a small matrix at each frame (`Grid`).
The browser plays and steps through them without asking the server (ui.stepper);
`text(k)` is frame k's text alternative, written the same way the player announces it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Column:
    """One number every frame shows: its name and its formatted value per frame."""

    name: str
    text: tuple[str, ...]


@dataclass(frozen=True)
class Line:
    """A series drawn up to the current frame (or whole, `whole=True`: a reference level)."""

    name: str
    values: tuple[float | None, ...]  # one per frame; None: a gap
    colour: str
    panel: int = 0  # which panel (`Frames.panels`) it is drawn in
    dash: bool = False
    dots: bool = False  # markers only, no line
    whole: bool = False


@dataclass(frozen=True)
class Grid:
    """A small matrix at one frame: each cell's text and the cells this frame works on."""

    cells: tuple[tuple[str, ...], ...]  # (rows, cols)
    marked: tuple[tuple[int, int], ...] = ()  # 0-based (row, col)
    done: tuple[tuple[int, int], ...] = ()  # cells already holding their output


@dataclass(frozen=True)
class Frames:
    """Everything a player shows, frame by frame (frame k is 1-based in `text`)."""

    title: str
    labels: tuple[str, ...]  # per frame, e.g. "Batch 3 of 100"
    columns: tuple[Column, ...] = ()
    lines: tuple[Line, ...] = ()
    panels: tuple[str, ...] = ()  # panel titles of the line drawing
    grids: tuple[Grid, ...] = ()  # per frame (a matrix drawing instead of lines)
    x_title: str = ""
    summary: str = ""  # the whole drawing in one sentence (its text alternative's start)

    def __post_init__(self) -> None:
        n = len(self.labels)
        lengths = [len(c.text) for c in self.columns] + [len(s.values) for s in self.lines]
        if self.grids:
            lengths.append(len(self.grids))
        if n == 0 or any(m != n for m in lengths):
            raise ValueError(f"every column, line and grid needs {n} frames; got {lengths}")

    @property
    def count(self) -> int:
        return len(self.labels)

    def clamp(self, k: int) -> int:
        """A frame number (1-based) inside 1…count."""
        return max(1, min(int(k), self.count))

    def text(self, k: int) -> str:
        """Frame k's text alternative: its label and each number (the live region's words)."""
        i = self.clamp(k) - 1
        numbers = "; ".join(f"{c.name} {c.text[i]}" for c in self.columns)
        return f"{self.labels[i]}: {numbers}" if numbers else self.labels[i]

    def data(self) -> dict[str, Any]:
        """The JSON the player receives once per server run."""
        return {
            "title": self.title,
            "labels": list(self.labels),
            "columns": [{"name": c.name, "text": list(c.text)} for c in self.columns],
            "lines": [
                {
                    "name": s.name,
                    "values": list(s.values),
                    "colour": s.colour,
                    "panel": s.panel,
                    "dash": s.dash,
                    "dots": s.dots,
                    "whole": s.whole,
                }
                for s in self.lines
            ],
            "panels": list(self.panels),
            "grids": [
                {"cells": [list(r) for r in g.cells], "marked": g.marked, "done": g.done}
                for g in self.grids
            ],
            "x_title": self.x_title,
            "summary": self.summary,
        }


def series(values: np.ndarray | Sequence[float], digits: int = 5) -> tuple[float | None, ...]:
    """Rounded values for the payload (NaN and infinities become gaps)."""
    arr = np.asarray(values, dtype=float)
    return tuple(float(v) if np.isfinite(v) else None for v in np.round(arr, digits))


def texts(values: np.ndarray | Sequence[float], spec: str = ".4g") -> tuple[str, ...]:
    """Each value formatted with `spec`."""
    return tuple(format(float(v), spec) for v in np.asarray(values, dtype=float))
