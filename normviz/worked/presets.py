"""The editor's starting matrices, and what each one shows."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from normviz.worked.steps import MAX_SIZE, SOURCE_MATRIX, Matrix, WorkedInputError

EDITOR_HELP = (
    f"Edit any cell, add or delete rows (up to {MAX_SIZE}): everything below "
    "recomputes. The rows are samples, the columns features: a batch of shape (N, C)."
)


@dataclass(frozen=True)
class Preset:
    """A starting matrix for the editor, and what it shows."""

    label: str
    matrix: Matrix
    note: str


PRESETS: dict[str, Preset] = {
    "source": Preset(
        "The source text's example",
        SOURCE_MATRIX,
        "Row 2 is row 1 plus 2 everywhere. Watch what each method keeps of that.",
    ),
    "scaled": Preset(
        "Row 2 is 10 × row 1",
        ((1.0, 2.0, 7.0), (10.0, 20.0, 70.0)),
        "LayerNorm gives both rows the same output: it cannot see a sample's overall scale.",
    ),
    "constant": Preset(
        "A constant column",
        ((1.0, 5.0, 7.0), (3.0, 5.0, 9.0)),
        "BatchNorm turns the constant column into zeros: its σ² is 0, only ε is left below "
        "the fraction bar.",
    ),
    "wide": Preset(
        "Three rows, four columns",
        ((1.0, -2.0, 0.5, 4.0), (2.0, 0.0, 1.5, -1.0), (0.0, 3.0, 2.0, 2.0)),
        "With more rows BatchNorm's columns and LayerNorm's rows hold different numbers of "
        "values (m = 3 and m = 4).",
    ),
    "one_row": Preset(
        "A single row",
        ((1.0, 2.0, 7.0),),
        "BatchNorm refuses in training: each column would hold one value, its own mean.",
    ),
}


def preset_frame(key: str) -> pd.DataFrame:
    """A preset as the data editor's starting table."""
    if key not in PRESETS:
        raise WorkedInputError(f"unknown example {key!r}: choose one of {', '.join(PRESETS)}")
    x = np.array(PRESETS[key].matrix, dtype=np.float64)
    return pd.DataFrame(x, columns=[f"col {j + 1}" for j in range(x.shape[1])])
