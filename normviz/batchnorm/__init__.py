"""The BatchNorm lab (/batchnorm): one module per section, each reading top to bottom.

    from normviz import batchnorm as bn
    setup = bn.LabSetup(batch_size=8, steps=100)
    for section in bn.SECTIONS:            # the tabs, in order; `sim` names one by its slug
        result = section.run(setup, section.defaults(), no_progress)
        section.figure(result, False), section.table(result), section.notes(result)

`KNOBS` are all the page's URL parameters: the lab's own (batch size, steps, update
rule, momentum; they live in the `LabSetup`), every section's, and `sim`, the open
section, whose choices are the sections' slugs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from normviz.batchnorm import (
    accumulation,
    batch_size,
    bessel,
    causal,
    checkpoint,
    coupling,
    evalmode,
    freeze,
    gradients,
    model,
    noise,
    order,
    realnet,
    renorm,
    running,
    shift,
    sync,
    where,
)
from normviz.batchnorm.lab import (
    BATCH_SIZES,
    CHANNEL,
    CONVENTION_LABELS,
    HELP,
    INTRO,
    LAB_KNOBS,
    TITLE,
    LabSetup,
    check,
    convert_momentum,
    memory_text,
    setup_caption,
    snap_batch,
    snap_note,
)
from normviz.frames import Frames
from normviz.knobs import Knob, merge
from normviz.methods import METHODS
from normviz.sections import Section, slugs

SECTIONS: tuple[Section, ...] = (
    running.SECTION,
    evalmode.SECTION,
    bessel.SECTION,
    batch_size.SECTION,
    noise.SECTION,
    shift.SECTION,
    order.SECTION,
    accumulation.SECTION,
    sync.SECTION,
    freeze.SECTION,
    checkpoint.SECTION,
    where.SECTION,
    gradients.SECTION,
    coupling.SECTION,
    causal.SECTION,
    model.SECTION,
    renorm.SECTION,
    realnet.SECTION,
)
# more sections shown under a section's tab, after it (they have no tab or `sim` value)
PARTS: dict[str, tuple[Section, ...]] = {
    bessel.SECTION.slug: (bessel.ONE_VALUE,),
    model.SECTION.slug: (model.SHIFTED,),
    realnet.SECTION.slug: (realnet.SHIFTED,),
}


def part_setup(part: Section, setup: LabSetup, result: Any) -> Any | None:
    """The setup a part runs on: the lab's, or (the real model's re-scoring step) its
    section's result, the trained networks, so a slider never retrains. None: the part
    needs a result its section could not give."""
    if part.slug == model.SHIFTED.slug:
        return result
    return setup


# sections whose figure follows one channel (a view of the result: `channel` field),
# with the URL knob of their channel picker
CHANNEL_VIEWS: dict[str, Knob] = {running.SECTION.slug: CHANNEL, order.SECTION.slug: CHANNEL}
# sections with a step-through view: the URL knob of the batch their figure stops at
STEP_VIEWS: dict[str, Knob] = {running.SECTION.slug: running.STEP}
# what a step view's player plays: its result and the followed channel → normviz.frames.Frames
STEP_FRAMES: dict[str, Callable[[Any, int], Frames]] = {running.SECTION.slug: running.step_frames}
VIEW_KNOBS: tuple[Knob, ...] = merge(STEP_VIEWS.values(), CHANNEL_VIEWS.values())
# how a section knob's choice reads in its widget
CHOICE_LABELS: dict[str, str] = {**{k: m.label for k, m in METHODS.items()}, **gradients.INITS}


def choice_label(knob: str, value: object) -> str:
    """How a section knob's choice reads in its widget: a method's or an initialization's
    name; a layer of the real network by its number and place."""
    if knob == realnet.LAYER.name:
        return realnet.layer_choice(int(str(value)))
    return CHOICE_LABELS.get(str(value), str(value))


SIM = Knob("sim", SECTIONS[0].slug, choices=slugs(SECTIONS), label="Section")
PART_SECTIONS: tuple[Section, ...] = tuple(p for parts in PARTS.values() for p in parts)
KNOBS: tuple[Knob, ...] = merge(
    LAB_KNOBS, *(s.knobs for s in (*SECTIONS, *PART_SECTIONS)), VIEW_KNOBS, (SIM,)
)


def example_setup() -> LabSetup:
    """A small, fast setup: every section runs in seconds at its knobs' maxima."""
    return LabSetup(sample_shape=(5, 6), batch_size=4, steps=30, model_scale=0.1)


__all__ = [
    "BATCH_SIZES",
    "CHANNEL_VIEWS",
    "CHOICE_LABELS",
    "CONVENTION_LABELS",
    "HELP",
    "INTRO",
    "KNOBS",
    "PARTS",
    "SECTIONS",
    "SIM",
    "STEP_FRAMES",
    "STEP_VIEWS",
    "TITLE",
    "VIEW_KNOBS",
    "LabSetup",
    "check",
    "choice_label",
    "convert_momentum",
    "example_setup",
    "memory_text",
    "part_setup",
    "setup_caption",
    "snap_batch",
    "snap_note",
]
