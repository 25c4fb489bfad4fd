"""Exercise 1: pick the cells that share μ and σ² with the marked cell (graded by group_ids)."""

from __future__ import annotations

import numpy as np

from normviz.practice.common import (
    EVERY_METHOD,
    Exercise,
    cell_name,
    interesting_case,
    pick,
    rng_for,
)
from normviz.practice.show import contract_words, section

SLUG = "cells"
LABEL = "Same statistics"
INTRO = (
    "Click every cell that shares its mean μ and variance σ² with the marked (black) "
    "cell (the box tool above the grid picks several at once); click a cell again to drop "
    "it. The list below the grid holds the same selection (type a cell's name to add it "
    "from the keyboard)."
)
POOL = EVERY_METHOD


def make(seed: int) -> Exercise:
    """The exercise for `seed`: a shape, a method and a marked cell."""
    rng = rng_for(SLUG, seed)
    case = interesting_case(rng, pick(POOL, SLUG, seed))
    marked = tuple(rng.randrange(n) for n in case.shape)
    ids = case.ids()
    group = np.flatnonzero(ids.reshape(-1) == ids[marked])
    con = case.contract()
    name = cell_name(case.layout, marked)
    return Exercise(
        kind=SLUG,
        seed=seed,
        prompt=(
            f"**{case.label}** on a tensor of shape {case.shape_text}. Which cells share "
            f"μ and σ² with the marked cell **{name}**?"
        ),
        form="cells",
        truth=tuple(str(int(i)) for i in group),
        explanation=(
            f"{case.label} {contract_words(con)}: the marked cell's statistic is shared by "
            f"{len(group)} cells (itself included), and the tensor holds {con.n_stats} "
            "statistics.",
        ),
        link=("axes", "the Axis Explorer"),
        case=case,
        marked=marked,
    )


SECTION = section(SLUG, LABEL, INTRO, make)
