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
    "Click or tap every other cell that shares its statistics (μ and σ², or RMSNorm's "
    "mean square) with the marked (black) cell; the marked cell itself is given. Click a "
    "cell again to drop it. On the keyboard, move through the grid with the arrow keys and "
    "press Enter to pick or drop a cell. The list below the grid holds the same selection "
    "(type a cell's name there to add it)."
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
    stats = "μ and σ²" if con.centred else "the mean square"
    return Exercise(
        kind=SLUG,
        seed=seed,
        prompt=(
            f"**{case.label}** on a tensor of shape {case.shape_text}. Which other cells "
            f"share {stats} with the marked cell **{name}**?"
        ),
        form="cells",
        truth=tuple(str(int(i)) for i in group),
        explanation=(
            f"{case.label} {contract_words(con)}: the marked cell's group holds m = "
            f"{len(group)} cells, the marked cell and the {len(group) - 1} others to pick, and "
            f"the tensor holds {con.n_stats} such groups.",
        ),
        link=("axes", "the Axis Explorer"),
        case=case,
        marked=marked,
    )


SECTION = section(SLUG, LABEL, INTRO, make)
