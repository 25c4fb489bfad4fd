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

from normviz.batchnorm import (
    accumulation,
    batch_size,
    bessel,
    checkpoint,
    evalmode,
    freeze,
    gradients,
    model,
    noise,
    order,
    running,
    shift,
    sync,
    where,
)
from normviz.batchnorm.lab import (
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
)
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
    model.SECTION,
)
# more sections shown under a section's tab, after it (they have no tab or `sim` value)
PARTS: dict[str, tuple[Section, ...]] = {bessel.SECTION.slug: (bessel.ONE_VALUE,)}
# sections whose figure follows one channel (a view of the result: `channel` field),
# with the key of their channel picker
CHANNEL_VIEWS: dict[str, str] = {
    running.SECTION.slug: "bn_channel",
    order.SECTION.slug: "bn_order_channel",
}
# how a section knob's choice reads in its widget
CHOICE_LABELS: dict[str, str] = {**{k: m.label for k, m in METHODS.items()}, **gradients.INITS}
SIM = Knob("sim", SECTIONS[0].slug, choices=slugs(SECTIONS), label="Section")
KNOBS: tuple[Knob, ...] = merge(LAB_KNOBS, *(s.knobs for s in SECTIONS), (SIM,))


def example_setup() -> LabSetup:
    """A small, fast setup: every section runs in seconds at its knobs' maxima."""
    return LabSetup(sample_shape=(5, 6), batch_size=4, steps=30, model_steps=40)


__all__ = [
    "CHANNEL_VIEWS",
    "CHOICE_LABELS",
    "CONVENTION_LABELS",
    "HELP",
    "INTRO",
    "KNOBS",
    "PARTS",
    "SECTIONS",
    "SIM",
    "TITLE",
    "LabSetup",
    "check",
    "convert_momentum",
    "example_setup",
    "memory_text",
    "setup_caption",
]
