"""The contract card: a method's axis contract at the current shape, as a student asks it.

Which axes does it pool, which does it keep apart, how many statistics, from how
many values each, does it subtract the mean, does a sample's output depend on the
other samples, and does it behave differently in training and evaluation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd

from normviz.axes.cells import AxesSetup
from normviz.core import Contract
from normviz.knobs import Value
from normviz.sections import Extra, Progress, Section

INTRO = "The current setting's axis contract, in the questions a student asks about it:"


@dataclass(frozen=True)
class ContractCard:
    """The axis contract of a method at one shape, in the terms a student asks about."""

    label: str
    reduces: tuple[str, ...]  # axis names ("C/G" for GroupNorm's pooled channels)
    keeps: tuple[str, ...]  # axes that keep separate statistics ("G": GroupNorm's groups)
    n_stats: int
    per_stat: int  # m
    size_text: str  # "B·T = 24"
    centred: bool
    uses_other_samples: bool
    train_eval_differ: bool

    @property
    def stats_text(self) -> str:
        """What each statistic is: RMSNorm keeps a mean square, not a mean and a variance."""
        return "means and variances" if self.centred else "mean squares"

    def rows(self) -> list[tuple[str, str]]:
        """(question, answer) pairs for a two-column card."""
        yn = {True: "yes", False: "no"}
        return [
            ("reduces over", ", ".join(self.reduces)),
            ("keeps separate", ", ".join(self.keeps) or "nothing: one statistic for all"),
            ("number of statistics", f"{self.n_stats:,} {self.stats_text}"),
            ("values per statistic", f"m = {self.size_text}"),
            ("subtracts the mean", yn[self.centred]),
            ("depends on other samples in the batch", yn[self.uses_other_samples]),
            ("differs between training and evaluation", yn[self.train_eval_differ]),
        ]


def contract_card(con: Contract) -> ContractCard:
    """The contract card for the resolved contract `con`.

    "Depends on other samples" is read off the contract (does it pool the sample
    axis?); for the named methods that agrees with the registry's flag, and for
    custom axes it is the only source. A custom reduction that pools the batch
    would, like BatchNorm, need running statistics to work on one sample at a time.
    """
    m = con.method_obj
    pools_samples = con.layout_obj.sample in con.reduced
    differ = m.train_eval_differ if con.method != "custom" else pools_samples
    return ContractCard(
        label=m.label,
        reduces=con.axes,
        keeps=con.kept,
        n_stats=con.n_stats,
        per_stat=con.group_size,
        size_text=con.size_text(),
        centred=con.centred,
        uses_other_samples=pools_samples,
        train_eval_differ=differ,
    )


# ---- the section --------------------------------------------------------------------


def run(setup: AxesSetup, knobs: Mapping[str, Value], progress: Progress) -> ContractCard:
    return contract_card(setup.contract)


def extras(card: ContractCard) -> list[Extra]:
    """The card itself: a small two-column table, shown whole."""
    rows = card.rows()
    df = pd.DataFrame({"": [q for q, _ in rows], "answer": [a for _, a in rows]})
    return [Extra("static", df)]


def notes(card: ContractCard) -> list[str]:
    return [
        f"Contract card: {card.label} keeps {card.n_stats:,} {card.stats_text} apart, "
        f"each from m = {card.size_text} values."
    ]


SECTION = Section(
    slug="card",
    label="Contract card",
    intro=INTRO,
    run=run,
    notes=notes,
    extras=extras,
)
