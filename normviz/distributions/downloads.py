"""Downloads: the page method's output as .npy and every group's statistics as .csv.

The files are built only when a button is clicked (`output_npy`, `table_csv`): the
cached result names the setup and holds no tensor (at the element cap the output
alone is 16 MB, and every cached result is kept per entry, copied per session).
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from normviz.contracts import check_values
from normviz.core import as_tensor
from normviz.distributions.before_after import CSV_ROWS, group_table
from normviz.distributions.histograms import Tensorish
from normviz.distributions.setup import Setup, gated, input_tensor, norm
from normviz.knobs import Value
from normviz.methods import METHODS
from normviz.sections import Progress, Section, no_progress

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
    """What the buttons offer; the files themselves are computed when clicked."""

    method: str
    setup: Setup  # what the files are computed from (small: it names the input)
    rows: int  # rows of the .csv (the first CSV_ROWS groups)
    n_groups: int

    def files(self) -> tuple[tuple[str, str, str], ...]:
        """(button label, file name, MIME type) of the .npy and the .csv."""
        label = METHODS[self.method].label
        return (
            (f"{label} output (.npy)", f"{self.method}_output.npy", "application/octet-stream"),
            ("Statistics table (.csv)", f"{self.method}_groups.csv", "text/csv"),
        )


@gated
def run(setup: Setup, knobs: Mapping[str, Value], progress: Progress) -> Downloads:
    check_values(setup.contract, from_input=True)  # what torch refuses, refused here too
    n = setup.contract.n_stats
    return Downloads(setup.method, setup, min(n, CSV_ROWS), n)


@gated
def _files(setup: Setup, knobs: Mapping[str, Value], progress: Progress) -> tuple[bytes, bytes]:
    x = input_tensor(setup)
    y = norm(x, setup.contract, setup.eps)
    tab = group_table(x, setup.contract, setup.eps, y)
    return npy_bytes(y), csv_bytes(tab.table)


def output_npy(res: Downloads) -> bytes:
    """The method's output on the whole input as .npy (computed now: a button's click)."""
    return _files(res.setup, {}, no_progress)[0]


def table_csv(res: Downloads) -> bytes:
    """Every group's statistics (the first CSV_ROWS) as .csv (computed on a click)."""
    return _files(res.setup, {}, no_progress)[1]


def notes(res: Downloads) -> Sequence[str]:
    if res.n_groups > res.rows:
        return (f"The table holds the first {res.rows:,} of {res.n_groups:,} groups.",)
    return (f"The table holds all {res.n_groups:,} groups.",)


SECTION = Section(slug="downloads", label="Downloads", intro=INTRO, run=run, notes=notes)
