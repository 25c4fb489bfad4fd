"""Exercise 2: name the method behind a coloured pattern of statistic groups.

The truth is every method of the registry's practice list whose groups match the
pattern's (`Case.ids`: group_ids with any valid G for GroupNorm, or, for an elementwise
method, its reference module's Jacobian) and that centres as the pattern does; "none of
these" when no method does (custom axes usually). DyT is on the list: its pattern is the
one where nothing is pooled, every cell a group of its own.
"""

from __future__ import annotations

import random

from normviz.layouts import LAYOUTS
from normviz.methods import METHODS
from normviz.practice.common import (
    PRACTICE,
    Case,
    Exercise,
    interesting_case,
    pick,
    random_case,
    rng_for,
)
from normviz.practice.show import contract_words, same_partition, section

SLUG = "name"
LABEL = "Name the method"
INTRO = (
    "Each colour is one statistic group: the cells that share one μ and σ² (colours "
    "repeat when there are many groups). Which layer computes these groups?"
)
POOL = (*PRACTICE, "custom")
NONE = "none"
OPTIONS = (*((k, METHODS[k].label) for k in PRACTICE), (NONE, "none of these"))
MAX_ELEMENTWISE_CELLS = 24  # every cell its own group, numbered: keep the numbers few


def matching(case: Case) -> tuple[str, ...]:
    """Every method on the practice list that groups `case`'s cells as it does, with its
    centring.

    GroupNorm counts with 1 < G < C only: G = 1 and G = C are other layers' groups.
    """
    target = case.ids()
    C = case.shape[LAYOUTS[case.layout].channel_axis]
    out = []
    for m in PRACTICE:
        if METHODS[m].centred != case.subtracts_mean:
            continue
        gs = [g for g in range(2, C) if C % g == 0] if METHODS[m].grouped else [None]
        if any(same_partition(Case(case.layout, case.shape, m, g).ids(), target) for g in gs):
            out.append(m)
    return tuple(out) or (NONE,)


def _case(rng: random.Random, method: str) -> Case:
    """A shape for `method`: groups of 2 or more cells, or any small shape when the method
    pools nothing (each cell its own group is the pattern to see)."""
    if METHODS[method].kind == "elementwise":
        return random_case(rng, method, max_cells=MAX_ELEMENTWISE_CELLS)
    return interesting_case(rng, method)


def _why(case: Case, truth: tuple[str, ...]) -> tuple[str, ...]:
    m = case.group_size
    if m == 1:  # nothing pooled: no contract to name
        n = case.ids().size
        pattern = f"pools nothing: each of the {n} cells is a group of its own (m = 1)"
        centring = "subtracts no mean" if not case.subtracts_mean else "subtracts the mean"
    else:
        pattern = contract_words(case.contract())
        centring = (
            "subtracts the mean"
            if case.subtracts_mean
            else "subtracts no mean (σ² is the mean square)"
        )
    first = f"The pattern {pattern}, and the layer {centring}."
    if truth == (NONE,):
        return (first, "No named layer pools exactly these axes: this is a custom choice.")
    names = " and ".join(METHODS[m].label for m in truth)
    more = (
        " With this shape several layers draw the same groups (a size-1 axis makes them coincide)."
        if len(truth) > 1
        else ""
    )
    what = tuple(
        f"{METHODS[k].label}: {METHODS[k].summary}."
        for k in truth
        if METHODS[k].kind == "elementwise"
    )
    return (
        first,
        f"That is what {names} compute{'s' if len(truth) == 1 else ' here'}.{more}",
        *what,
    )


def make(seed: int) -> Exercise:
    rng = rng_for(SLUG, seed)
    method = pick(POOL, SLUG, seed)
    for _ in range(100):  # a shape where one answer is right (a size-1 axis can merge two)
        case = _case(rng, method)
        truth = matching(case)
        if len(truth) == 1:
            break
    centring = (
        "The layer subtracts the mean." if case.subtracts_mean else "The layer subtracts no mean."
    )
    return Exercise(
        kind=SLUG,
        seed=seed,
        prompt=f"A tensor of shape {case.shape_text}, coloured by statistic group. {centring}",
        form="choice",
        truth=truth,
        explanation=_why(case, truth),
        link=("axes", "the Axis Explorer"),
        case=case,
        colour="groups",
        options=OPTIONS,
    )


SECTION = section(SLUG, LABEL, INTRO, make)
