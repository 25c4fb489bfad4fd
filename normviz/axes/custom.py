"""Custom axes: tick the axes a statistic should pool, and learn which layer that is.

`identify` names the standard method that reduces exactly the ticked axes (the
same axes without centring are RMSNorm's); any other set is a custom
normalization that no torch.nn module computes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from normviz.axes.cells import AxesSetup
from normviz.core import AxesArg, Contract, identify, parse_axes
from normviz.knobs import Value
from normviz.methods import METHODS
from normviz.sections import Progress, Section

INTRO = (
    "Tick the axes a statistic should pool. The page switches to custom axes and "
    "names the layer that reduces exactly those axes, if there is one."
)


@dataclass(frozen=True)
class AxesVerdict:
    """Which method, if any, reduces exactly the chosen axes."""

    axes: tuple[str, ...]
    method: str | None  # a registry key, or None
    text: str


def explain_axes(layout: str, axes: AxesArg, centred: bool = True) -> AxesVerdict:
    """Name the standard method behind `axes` (via identify), or say that none matches.

    Raises:
        NormConfigError: an axis the layout does not have.
    """
    names = parse_axes(layout, axes)
    if not names:
        return AxesVerdict((), None, "Tick at least one axis: a statistic needs values to pool.")
    key = identify(layout, names)
    listed = ", ".join(names)
    if key is not None and not centred and key == "layer":
        key = "rms"  # the same axes without centring is RMSNorm's contract
    if key is None:
        text = (
            f"No standard layer reduces exactly {listed}. This is a custom normalization: "
            "the formula still works, but no torch.nn module computes it for you."
        )
    else:
        label = METHODS[key].label
        text = f"Reducing {listed} is exactly what {label} does: {METHODS[key].summary}."
        if centred != METHODS[key].centred:
            text += (
                " (Its statistics come from the same values, but it "
                + ("subtracts" if METHODS[key].centred else "does not subtract")
                + " the mean.)"
            )
    return AxesVerdict(names, key, text)


def ticked(con: Contract) -> tuple[str, ...]:
    """The axes whose boxes are ticked: the ones `con` pools entirely."""
    return tuple(a for a in con.layout_obj.axes if a in con.axes)


# ---- the section --------------------------------------------------------------------


@dataclass(frozen=True)
class CustomAxes:
    """The verdict on custom axes, or what the boxes cannot say about the method."""

    verdict: AxesVerdict | None  # None when a named method is chosen
    splits_channels: bool  # GroupNorm pools part of C, which no box can say


def run(setup: AxesSetup, knobs: Mapping[str, Value], progress: Progress) -> CustomAxes:
    con = setup.contract
    verdict = explain_axes(con.layout, con.reduced, con.centred) if con.method == "custom" else None
    return CustomAxes(verdict, con.method_obj.grouped)


def notes(res: CustomAxes) -> list[str]:
    if res.verdict is not None:
        return [f":material/search: {res.verdict.text}"]
    if res.splits_channels:
        return ["GroupNorm pools part of C (C/G channels), which no single checkbox can say."]
    return []


SECTION = Section(
    slug="custom",
    label="Custom axes",
    intro=INTRO,
    run=run,
    notes=notes,
)
