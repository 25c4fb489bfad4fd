"""The methods side by side: one row per method, read from the registry."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from normviz.knobs import Value
from normviz.methods import METHODS, listed
from normviz.sections import Progress, Section
from normviz.text import reduces_text, train_eval_text, yes_no

INTRO = (
    "Every method is the same formula over a different choice of axes (RMSNorm drops the "
    "mean). The axes decide more than the numbers: whether one example's values reach "
    "another's output, what data-parallel training has to synchronize, and whether "
    "training and inference compute the same function. The table says it per method, "
    "with where each one fits."
)


@dataclass(frozen=True)
class Comparison:
    """The methods compared, in one layout's axis names."""

    layout: str
    methods: tuple[str, ...]  # METHODS keys, in table order


def run(setup: object, knobs: Mapping[str, Value], progress: Progress) -> Comparison:
    return Comparison("NCHW", listed("guide"))


def comparison_table(layout: str = "NCHW") -> pd.DataFrame:
    """The comparison table from the registry: what each method pools, and when to use it."""
    rows = []
    for key in listed("guide"):
        m = METHODS[key]
        rows.append(
            {
                "method": m.label,
                f"normalizes over ({layout})": reduces_text(key, layout),
                "depends on batch size": yes_no(m.batch_dependent),
                "mixes examples": _mixing(m.batch_dependent),
                "data-parallel training": _distributed(m.batch_dependent),
                "train ≠ inference": train_eval_text(key),
                "best for": m.best_for,
                "watch out": m.pitfall,
            }
        )
    return pd.DataFrame(rows).set_index("method")


def _mixing(batch_dependent: bool) -> str:
    """What the axis choice means for information flowing between examples."""
    if batch_dependent:
        return "yes: in training, each output depends on the other examples in the batch"
    return "no: each example is normalized on its own"


def _distributed(batch_dependent: bool) -> str:
    """What the axis choice means when a batch is split over devices."""
    if batch_dependent:
        return "statistics per device unless synchronized (SyncBatchNorm)"
    return "nothing to synchronize"


def table(res: Comparison) -> pd.DataFrame:
    return comparison_table(res.layout)


def _and(names: Sequence[str]) -> str:
    return " and ".join(names) if len(names) < 3 else ", ".join(names[:-1]) + " and " + names[-1]


def notes(res: Comparison) -> Sequence[str]:
    """Which methods depend on the batch, named from the registry's flags."""
    dep = [METHODS[k].label for k in res.methods if METHODS[k].batch_dependent]
    differ = [METHODS[k].label for k in res.methods if METHODS[k].train_eval_differ]
    if not dep:
        return (f"None of the {len(res.methods)} methods depends on the batch size.",)
    one = len(dep) == 1
    text = f"Of the {len(res.methods)} methods, {'only ' if one else ''}{_and(dep)} "
    text += "depends" if one else "depend"
    text += " on the batch size"
    if differ:
        same = "computes" if len(differ) == 1 else "compute"
        text += f"; {_and(differ)} {same} differently in training and inference"
    alone = len(res.methods) - len(dep)
    text += f". The other {alone} take their statistics from each sample alone."
    flagged = [k for k in res.methods if METHODS[k].train_eval_note]
    if flagged:
        text += "".join(
            f" For {METHODS[k].label} this holds {METHODS[k].train_eval_note}." for k in flagged
        )
        text += " The next section runs both settings."
    return (text,)


TABLES = Section(
    slug="tables",
    label="The methods side by side",
    intro=INTRO,
    run=run,
    table=table,
    notes=notes,
)
