"""Exercise 2: name the method behind a coloured pattern of statistic groups.

The truth is every standard method whose `group_ids` group the cells the same way
(with any valid G for GroupNorm) and that centres as the pattern does; "none of
these" when no method does (custom axes usually).
"""

from __future__ import annotations

from normviz.core import group_ids
from normviz.layouts import LAYOUTS
from normviz.methods import METHODS, STANDARD_METHODS
from normviz.practice.common import EVERY_METHOD, Case, Exercise, interesting_case, pick, rng_for
from normviz.practice.show import contract_words, same_partition, section

SLUG = "name"
LABEL = "Name the method"
INTRO = (
    "Each colour is one statistic group: the cells that share one μ and σ² (colours "
    "repeat when there are many groups). Which layer computes these groups?"
)
POOL = EVERY_METHOD
NONE = "none"
OPTIONS = (*((k, METHODS[k].label) for k in STANDARD_METHODS), (NONE, "none of these"))


def matching(case: Case) -> tuple[str, ...]:
    """Every standard method that groups `case`'s cells as it does, with its centring.

    GroupNorm counts with 1 < G < C only: G = 1 and G = C are other layers' groups.
    """
    target = case.ids()
    C = case.shape[LAYOUTS[case.layout].channel_axis]
    out = []
    for m in STANDARD_METHODS:
        if METHODS[m].centred != case.subtracts_mean:
            continue
        gs = [g for g in range(2, C) if C % g == 0] if METHODS[m].grouped else [None]
        if any(same_partition(group_ids(m, case.layout, case.shape, g), target) for g in gs):
            out.append(m)
    return tuple(out) or (NONE,)


def _why(case: Case, truth: tuple[str, ...]) -> tuple[str, ...]:
    con = case.contract()
    centring = (
        "subtracts the mean" if case.subtracts_mean else "subtracts no mean (σ² is the mean square)"
    )
    first = f"The pattern {contract_words(con)}, and the layer {centring}."
    if truth == (NONE,):
        return (first, "No named layer pools exactly these axes: this is a custom choice.")
    names = " and ".join(METHODS[m].label for m in truth)
    more = (
        " With this shape several layers draw the same groups (a size-1 axis makes them coincide)."
        if len(truth) > 1
        else ""
    )
    return (first, f"That is what {names} compute{'s' if len(truth) == 1 else ' here'}.{more}")


def make(seed: int) -> Exercise:
    rng = rng_for(SLUG, seed)
    method = pick(POOL, SLUG, seed)
    for _ in range(100):  # a shape where one answer is right (a size-1 axis can merge two)
        case = interesting_case(rng, method)
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
