"""What each method does not control: the output grouped the way the other methods group it.

A method standardizes its own groups and nothing else: after LayerNorm the
per-channel means over the batch are not 0; after BatchNorm one token's features
are not standardized. A view that needs a G (GroupNorm's) uses the shared groups;
when that G does not divide C the view shows the refusal instead of vanishing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd
import torch

from normviz.core import Contract, as_tensor, contract
from normviz.distributions.histograms import Tensorish
from normviz.distributions.moments import MEAN_TOL, VAR_TOL, group_moments, same_groups
from normviz.distributions.setup import Setup, gated, input_tensor, norm
from normviz.errors import NormConfigError
from normviz.knobs import Value
from normviz.methods import METHODS, STANDARD_METHODS
from normviz.sections import Progress, Section

INTRO = (
    "A method standardizes its own groups and nothing else. Below, the same output is "
    "grouped the way each other method would group it: where the means are not 0 or "
    "the variances not 1, the method left that structure in place. LayerNorm, for "
    "instance, leaves each feature's mean over the batch alone, and BatchNorm does not "
    "standardize a single token's features."
)


def views(
    layout: str, shape: tuple[int, ...], groups: int
) -> list[tuple[str, Contract | NormConfigError]]:
    """Each distinct way the standard methods group values, labelled by its methods.

    GroupNorm's view uses `groups`; when that G cannot split C its entry is the
    refusal (which names the divisors of C), so the view is shown, not dropped.
    """
    seen: dict[object, list[str]] = {}
    cons: dict[object, Contract | NormConfigError] = {}
    for key in STANDARD_METHODS:
        try:
            con: Contract | NormConfigError = contract(
                key, layout, shape, groups=groups if METHODS[key].grouped else None
            )
            sig: object = (con.expanded_shape, con.reduce_dims)  # the grouping, not its name
        except NormConfigError as e:
            con, sig = e, key
        seen.setdefault(sig, []).append(METHODS[key].label)
        cons.setdefault(sig, con)
    return [(" / ".join(labels), cons[sig]) for sig, labels in seen.items()]


def _row(label: str, view: Contract, y: torch.Tensor, own: Contract) -> dict[str, object]:
    mean, var, ms = group_moments(y, view)
    # NaN (ε = 0 on a constant group) compares False: nothing holds there
    if mean.abs().max() <= MEAN_TOL and (var - 1).abs().max() <= VAR_TOL:
        holds = "mean 0 and variance 1"
    elif (ms - 1).abs().max() <= VAR_TOL:
        holds = "mean square 1"
    else:
        holds = "neither"
    return {
        "grouped like": label,
        "pools": ", ".join(view.axes),
        "one per": ", ".join(view.kept) or "whole tensor",
        "groups": view.n_stats,
        "largest |mean|": float(mean.abs().max()),
        "variance min": float(var.min()),
        "variance max": float(var.max()),
        "what holds": holds,
        "this method": "◀" if same_groups(view, own) else "",
    }


def uncontrolled(x: Tensorish, con: Contract, eps: float = 1e-5, groups: int = 2) -> pd.DataFrame:
    """The output's moments grouped the way each standard method groups values.

    One row per distinct grouping, with "standardized" judged from the numbers.
    `groups` is G for the GroupNorm view (the shared G).

    Raises:
        NormConfigError: the setting cannot run.
    """
    x = as_tensor(x)
    y = norm(x, con, eps)
    rows = []
    for label, view in views(con.layout, tuple(x.shape), groups):
        if isinstance(view, NormConfigError):
            rows.append({"grouped like": label, "what holds": f"cannot run: {view}"})
        else:
            rows.append(_row(label, view, y, con))
    return pd.DataFrame(rows).set_index("grouped like")


@dataclass(frozen=True, eq=False)
class Uncontrolled:
    method: str
    table: pd.DataFrame  # index: "grouped like"


@gated
def run(setup: Setup, knobs: Mapping[str, Value], progress: Progress) -> Uncontrolled:
    x = input_tensor(setup)
    return Uncontrolled(setup.method, uncontrolled(x, setup.contract, setup.eps, setup.groups))


def table(res: Uncontrolled) -> pd.DataFrame:
    return res.table.reset_index()


def notes(res: Uncontrolled) -> Sequence[str]:
    t = res.table
    label = METHODS[res.method].label
    loose = [str(i) for i, h in t["what holds"].items() if h == "neither"]
    refused = [str(i) for i, h in t["what holds"].items() if str(h).startswith("cannot run")]
    out = []
    if loose:
        out.append(f"After {label}, nothing is standardized when grouped like {', '.join(loose)}.")
    else:
        out.append(f"After {label}, every grouping shown here is standardized too.")
    if refused:
        out.append(
            f"{', '.join(refused)} cannot group this tensor with the shared G: the table says why."
        )
    return out


SECTION = Section(
    "uncontrolled", "What {method} does not control", INTRO, run, table=table, notes=notes
)
