"""The source text's printed results, next to normviz's, for the source's own matrix."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from normviz.knobs import Value
from normviz.sections import Progress, Section
from normviz.worked.moments import Moments
from normviz.worked.steps import (
    SOURCE_BATCH_MEANS,
    SOURCE_BATCH_VARS,
    SOURCE_LAYER_ROW0,
    SOURCE_MATRIX,
    Matrix,
    MethodSteps,
    fmt_list,
    method_steps,
)

INTRO = (
    "The source rounds the moments of BatchNorm's output to 4 decimals and "
    "LayerNorm's first row to 3. The same numbers, from normviz:"
)


def source_comparison(batch: MethodSteps, layer: MethodSteps) -> pd.DataFrame:
    """The source's printed results next to ours, rounded as it rounds (mean/var 4, row 3)."""
    b = Moments.of(batch.output)
    rows = [
        ("BatchNorm: mean of each output column", SOURCE_BATCH_MEANS, b.column_mean, 4),
        ("BatchNorm: variance of each output column", SOURCE_BATCH_VARS, b.column_var, 4),
        ("LayerNorm: output row 1", SOURCE_LAYER_ROW0, layer.output[0], 3),
    ]
    return pd.DataFrame(
        [
            {
                "result": what,
                "source prints": fmt_list(src, d),
                "normviz gives": fmt_list(ours, d),
                "same": "yes" if np.array_equal(np.round(ours, d) + 0.0, np.array(src)) else "NO",
            }
            for what, src, ours, d in rows
        ]
    ).set_index("result")


def is_source(x: np.ndarray) -> bool:
    """True when the matrix is the source's example (so its printed numbers apply)."""
    return x.shape == (2, 3) and bool(np.array_equal(x, np.array(SOURCE_MATRIX)))


@dataclass(frozen=True)
class SourceCheck:
    """Both methods on the matrix, when it is the source's example (else nothing to show)."""

    batch: MethodSteps | None = None
    layer: MethodSteps | None = None

    @property
    def shown(self) -> bool:
        """The source's printed numbers apply: the matrix is its example."""
        return self.batch is not None and self.layer is not None


def run(setup: Matrix, knobs: Mapping[str, Value], progress: Progress) -> SourceCheck:
    x = np.array(setup, dtype=np.float64)
    if not is_source(x):
        return SourceCheck()
    return SourceCheck(method_steps(x, "batch"), method_steps(x, "layer"))


def table(check: SourceCheck) -> pd.DataFrame | None:
    if check.batch is None or check.layer is None:
        return None
    return source_comparison(check.batch, check.layer)


SECTION = Section("source", "The source text's printed results", INTRO, run, table=table)
