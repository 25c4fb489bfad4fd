"""Registry-driven tables and phrases the pages show (no streamlit here)."""

from __future__ import annotations

import pandas as pd

from normviz.core import Contract, contract
from normviz.layouts import LAYOUTS
from normviz.methods import METHODS, STANDARD_METHODS

FORMULA = r"y \;=\; \gamma \cdot \frac{x - \mu}{\sqrt{\sigma^2 + \varepsilon}} \;+\; \beta"


def yes_no(flag: bool) -> str:
    return "yes" if flag else "no"


def _layout_contract(method: str, layout: str) -> Contract:
    """The method's contract at the layout's default shape (GroupNorm with G = 1)."""
    lay = LAYOUTS[layout]
    groups = 1 if METHODS[method].grouped else None
    return contract(method, layout, [lay.defaults[a] for a in lay.axes], groups=groups)


def reduces_text(method: str, layout: str) -> str:
    """`B, T` or `T, C/G`: what one statistic pools, as the contract table shows it."""
    return ", ".join(_layout_contract(method, layout).axes)


def keeps_text(method: str, layout: str) -> str:
    """`C` or `B, G`: the axes that keep separate statistics."""
    return ", ".join(_layout_contract(method, layout).kept)


def contract_table() -> pd.DataFrame:
    """One row per method: what it pools and keeps in each layout, and how it behaves."""
    rows = []
    for key in STANDARD_METHODS:
        m = METHODS[key]
        row = {"method": m.label}
        for lay in LAYOUTS:
            row[f"{lay} pools"] = reduces_text(key, lay)
            row[f"{lay} keeps apart"] = keeps_text(key, lay)
        row |= {
            "subtracts μ": yes_no(m.centred),
            "uses other samples": yes_no(m.batch_dependent),
            "train ≠ eval": yes_no(m.train_eval_differ),
            "natural setting": m.natural_setting,
        }
        rows.append(row)
    return pd.DataFrame(rows).set_index("method")
