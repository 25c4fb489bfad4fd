"""Knobs: the settings a section exposes, declared as plain values.

A knob is what a widget sets and a shared link carries: a name (also the URL
parameter; its widget key is page-scoped, `page:name`), a default, and either a
numeric range or a set of choices. How a query string is parsed into knob values
is the UI's business (`ui/params.py`); this module only declares.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

Value = int | float | str | bool | tuple[str, ...]


@dataclass(frozen=True)
class Knob:
    """One setting: its default, and either a numeric range or a set of choices.

    `multi`: any subset of the choices (a multi-select widget), written as a comma
    list (empty for none); its value is a tuple in the order of `choices`. `widget`
    and `step` only say how it is drawn.
    """

    name: str
    default: Value
    lo: float | None = None
    hi: float | None = None
    choices: tuple[Value, ...] | None = None
    multi: bool = False
    label: str = ""  # the widget's label
    # how the UI draws it, where the kind of knob does not say (ui/knobs.py): "number"
    # (a number input instead of a slider), "select" (a dropdown instead of a radio)
    widget: str = ""
    step: float | None = None  # a slider's or number input's step (default 1, 0.1 for floats)


def merge(*groups: Iterable[Knob]) -> tuple[Knob, ...]:
    """Knobs of several sections, each name once (sections may share a knob)."""
    out: dict[str, Knob] = {}
    for group in groups:
        for k in group:
            if k.name in out and out[k.name] != k:
                raise ValueError(f"knob {k.name!r} is declared twice with different specs")
            out.setdefault(k.name, k)
    return tuple(out.values())
