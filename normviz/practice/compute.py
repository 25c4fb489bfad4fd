"""Exercise 4: compute y for the marked cell from the numbers shown, then see the computation.

The truth is normviz.normalize on the shown tensor (torch.nn agrees: see the tests);
the answer is accepted within a tolerance a hand computation to two decimals meets.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from normviz.core import normalize
from normviz.practice.common import (
    STATISTICS,
    Case,
    Exercise,
    cell_name,
    pick,
    random_case,
    rng_for,
)
from normviz.practice.show import contract_words, fmt, section, term

SLUG = "compute"
LABEL = "Compute y"
INTRO = (
    "The tensor's values are written in its cells. Compute the layer's output y for the "
    "marked cell: find the cells that share its statistics, then μ, σ² and y = γ·(x − μ) / "
    "√(σ² + ε) + β (RMSNorm: y = γ·x / √(mean square + ε), with no β: nn.RMSNorm has no "
    "bias)."
)
POOL = STATISTICS  # the practice list's methods with a μ and σ² to compute
EPS = 1e-5
MAX_GROUP = 8  # values in the marked cell's group: a hand computation stays short


def tolerance(y: float) -> float:
    """Two decimals by hand: 0.01, and 1 % of |y| on larger outputs."""
    return 0.01 + 0.01 * abs(y)


def _case(rng, method: str) -> Case:  # type: ignore[no-untyped-def]
    for _ in range(500):
        case = random_case(rng, method, max_cells=24)
        if 2 <= case.contract().group_size <= MAX_GROUP:
            return case
    raise AssertionError(f"no small case for {method}")  # pragma: no cover


def make(seed: int) -> Exercise:
    rng = rng_for(SLUG, seed)
    case = _case(rng, pick(POOL, SLUG, seed))
    x = np.array([rng.randint(-4, 6) for _ in range(math.prod(case.shape))], dtype=np.float64)
    x = x.reshape(case.shape)
    gamma, beta = rng.choice((1.0, 1.0, 2.0, 0.5)), rng.choice((0.0, 0.0, 1.0, -1.0))
    has_bias = case.method != "rms"  # nn.RMSNorm learns a weight (γ) and no bias (β)
    C = case.shape[1] if case.layout == "NCHW" else case.shape[-1]
    res = normalize(
        torch.from_numpy(x),
        case.method,
        case.layout,
        eps=EPS,
        weight=torch.full((C,), gamma, dtype=torch.float64),
        bias=torch.full((C,), beta, dtype=torch.float64) if has_bias else None,
        **case.norm_kwargs(),  # type: ignore[arg-type]
    )
    marked = tuple(rng.randrange(n) for n in case.shape)
    y = float(res.output[marked])
    ids = case.ids()
    group = x[ids == ids[marked]]
    var = float(res.var.expand(case.shape)[marked])
    xm = float(x[marked])
    if case.subtracts_mean:
        mu = float(res.mean.expand(case.shape)[marked])  # type: ignore[union-attr]
        total = " + ".join(term(v) for v in group)
        stats = f"μ = ({total}) / {group.size} = {fmt(mu)}, σ² = {fmt(var)}"
        formula = f"y = {fmt(gamma)}·({fmt(xm)} − {term(mu)}) / √({fmt(var)} + ε) + {fmt(beta)}"
    else:
        total = " + ".join(f"{term(v)}²" for v in group)
        stats = f"mean square = ({total}) / {group.size} = {fmt(var)}"
        formula = f"y = {fmt(gamma)}·{term(xm)} / √({fmt(var)} + ε)"
    affine = f"γ = {fmt(gamma)} and β = {fmt(beta)}" if has_bias else f"γ = {fmt(gamma)} (no β)"
    return Exercise(
        kind=SLUG,
        seed=seed,
        prompt=(
            f"**{case.label}** on a tensor of shape {case.shape_text}, with {affine} for every "
            "channel, ε = 10⁻⁵. What is y at the marked cell "
            f"**{cell_name(case.layout, marked)}** (x = {fmt(xm)})?"
        ),
        form="numbers",
        truth=(repr(y),),
        explanation=(
            f"{case.label} {contract_words(case.contract())}: the marked cell's group holds "
            f"{', '.join(fmt(v) for v in group)}.",
            f"{stats}.",
            f"{formula} = {fmt(y)}.",
        ),
        link=("worked-example", "the worked example"),
        case=case,
        marked=marked,
        colour="values",
        values=tuple(float(v) for v in x.reshape(-1)),
        fields=("y",),
        tolerance=(tolerance(y),),
    )


SECTION = section(SLUG, LABEL, INTRO, make)
