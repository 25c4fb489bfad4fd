"""What both of the page's figures share: one colour, dash and hover text per placement."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from normviz import style
from normviz.residual.model import PLACEMENT_LABELS

# Colour and dash both differ, so the three placements stay apart in grey-scale too.
PLACEMENT_COLOURS: dict[str, str] = {
    "pre": style.PALETTE[0],
    "post": style.PALETTE[5],
    "none": style.BEFORE,
}
PLACEMENT_DASH: dict[str, str] = {"pre": "solid", "post": "dash", "none": "dot"}


def rounded(a: np.ndarray | Sequence[float], digits: int = 4) -> list[float | None]:
    """Values rounded to `digits` significant digits; non-finite or ≤ 0 become gaps (log axes)."""
    out: list[float | None] = []
    for v in np.asarray(a, dtype=float).ravel():
        out.append(float(f"{v:.{digits}g}") if np.isfinite(v) and v > 0 else None)
    return out


def rgba(hex_colour: str, alpha: float) -> str:
    h = hex_colour.lstrip("#")
    r, g, b = (int(h[i : i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


def hover(placement: str, x_name: str) -> str:
    return f"{PLACEMENT_LABELS[placement]}<br>{x_name} %{{x}}: %{{y:.3g}}<extra></extra>"


def line(placement: str) -> dict[str, object]:
    """The placement's line style."""
    return {"color": PLACEMENT_COLOURS[placement], "dash": PLACEMENT_DASH[placement], "width": 3}
