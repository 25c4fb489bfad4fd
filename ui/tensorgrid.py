"""The tensor grid: a Streamlit components-v2 element (inline HTML/CSS/JS, no iframe).

It draws a `normviz.axes.gridview.Grid` and answers in the browser: hovering,
focusing or tapping a cell highlights its statistic group and shows x, m, μ, σ² and
y with the formula filled in (ui/tensorgrid/grid.js). A pick (click, one tap, Enter
or Space) comes back as the trigger `pick`: `{"cell": [i, j, k]}` for a grid that
selects one cell, `{"cells": [3, 7]}` (window indices) for one that toggles cells.
A modified client can send anything: `picked_cell` and `picked_cells` keep only
what the grid offered (ui/safe.py).

The text alternative (the grid's `alt` sentences) sits in the fold under it, as
under every chart.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import streamlit as st

from normviz.axes.gridview import Grid
from ui import runner, safe

_ASSETS = Path(__file__).with_name("tensorgrid")
NAME = "normviz.tensorgrid"
_COMPONENT = st.components.v2.component(
    NAME,
    html="",
    css=(_ASSETS / "grid.css").read_text(encoding="utf-8"),
    js=(_ASSETS / "grid.js").read_text(encoding="utf-8"),
)


def show(grid: Grid, key: str, on_pick: Callable[[], None] | None = None) -> Any:
    """Draw `grid` under `key`, its text alternative below; `on_pick` runs on a pick
    (read it with `picked_cell` / `picked_cells`). Returns the component's result."""
    out = _COMPONENT(
        key=key,
        data=grid.payload(),
        on_pick_change=on_pick or _ignore,
        width="stretch",
        height="content",
    )
    runner.alt(list(grid.alt))
    return out


def _ignore() -> None:
    """A pick on a grid nobody listens to (a finished exercise): nothing to do."""


def _pick(key: str) -> object:
    held = st.session_state.get(key)
    return held.get("pick") if isinstance(held, dict) else None


def picked_cell(key: str, shape: tuple[int, ...]) -> tuple[int, ...] | None:
    """The tensor cell the last pick named, if it lies inside `shape`; else None."""
    got = _pick(key)
    return safe.cell(got.get("cell") if isinstance(got, dict) else None, shape)


def picked_cells(key: str, n: int) -> list[int] | None:
    """The window cells the last pick left picked (those in 0..n−1, once, sorted); None
    when the pick is not a list of cells."""
    got = _pick(key)
    raw = got.get("cells") if isinstance(got, dict) else None
    return sorted(safe.offered_all(raw, range(n))) if isinstance(raw, list) else None
