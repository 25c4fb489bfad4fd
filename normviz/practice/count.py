"""Exercise 3: count the statistics a layer computes and the values that feed each."""

from __future__ import annotations

import numpy as np

from normviz.practice.common import EVERY_METHOD, Exercise, interesting_case, pick, rng_for
from normviz.practice.show import contract_words, section

SLUG = "count"
LABEL = "Count"
INTRO = (
    "How many statistics does the layer compute for this tensor, and how many values feed "
    "each one? (A statistic is one μ and σ² pair; RMSNorm's is one mean square.)"
)
POOL = EVERY_METHOD
FIELDS = ("statistics", "values per statistic")


def make(seed: int) -> Exercise:
    rng = rng_for(SLUG, seed)
    case = interesting_case(rng, pick(POOL, SLUG, seed), max_cells=64)
    ids = case.ids()
    n_stats = int(ids.max()) + 1
    m = int(np.bincount(ids.reshape(-1))[0])  # every group has the same size
    con = case.contract()
    return Exercise(
        kind=SLUG,
        seed=seed,
        prompt=f"**{case.label}** on a tensor of shape {case.shape_text}.",
        form="numbers",
        truth=(str(n_stats), str(m)),
        explanation=(
            f"{case.label} {contract_words(con)}: {ids.size} values in groups of {m} make "
            f"{ids.size} / {m} = {n_stats} statistics.",
        ),
        link=("axes", "the Axis Explorer"),
        case=case,
        fields=FIELDS,
        tolerance=(0.0, 0.0),
    )


SECTION = section(SLUG, LABEL, INTRO, make)
