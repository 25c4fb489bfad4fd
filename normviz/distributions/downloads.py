"""Downloads: the page method's output as .npy and every group's statistics as .csv.

The files are built only when a button is clicked (`npy_bytes`, `csv_bytes`).
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from normviz.core import as_tensor
from normviz.distributions.before_after import group_table
from normviz.distributions.histograms import Tensorish
from normviz.distributions.setup import Setup, input_tensor, norm
from normviz.knobs import Value
from normviz.methods import METHODS
from normviz.sections import Progress, Section

INTRO = "The output of the page's method on the whole input, and its statistics table."


def npy_bytes(x: Tensorish) -> bytes:
    """`x` as an .npy file (np.save with allow_pickle=False)."""
    buf = io.BytesIO()
    np.save(buf, as_tensor(x).numpy(), allow_pickle=False)
    return buf.getvalue()


def csv_bytes(table: pd.DataFrame) -> bytes:
    """A table as UTF-8 CSV."""
    return table.to_csv(index=False).encode()


@dataclass(frozen=True, eq=False)
class Downloads:
    method: str
    output: np.ndarray  # the method's output, the input's shape
    table: pd.DataFrame  # one row per group (the first CSV_ROWS)
    n_groups: int

    def files(self) -> tuple[tuple[str, str, str], ...]:
        """(button label, file name, MIME type) of the .npy and the .csv."""
        label = METHODS[self.method].label
        return (
            (f"{label} output (.npy)", f"{self.method}_output.npy", "application/octet-stream"),
            ("Statistics table (.csv)", f"{self.method}_groups.csv", "text/csv"),
        )


def run(setup: Setup, knobs: Mapping[str, Value], progress: Progress) -> Downloads:
    x = input_tensor(setup)
    y = norm(x, setup.contract, setup.eps)
    tab = group_table(x, setup.contract, setup.eps, y)
    return Downloads(setup.method, y.numpy(), tab.table, tab.n_groups)


def notes(res: Downloads) -> Sequence[str]:
    if res.n_groups > len(res.table):
        return (f"The table holds the first {len(res.table):,} of {res.n_groups:,} groups.",)
    return (f"The table holds all {res.n_groups:,} groups.",)


SECTION = Section(slug="downloads", label="Downloads", intro=INTRO, run=run, notes=notes)
