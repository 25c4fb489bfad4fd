"""Distributions: what each method does to the values, on generated or uploaded data.

One module per section, each reading top to bottom: intro, knobs, run, figure,
table, notes. The first sections count every value of the input (`WHOLE`); the
demonstrations after them run on its first `DEMO_MAX` values (`PART`, see
`setup.leading`); the downloads give the whole output.
"""

from __future__ import annotations

from normviz.data import GENERATORS
from normviz.distributions import (
    affine,
    all_methods,
    before_after,
    downloads,
    dyt_fit,
    eps,
    feature_dims,
    int8,
    massive,
    rms_layer,
    sample_scale,
    squash,
    uncontrolled,
)
from normviz.distributions.setup import (
    DEMO_MAX,
    GATE,
    Generated,
    Setup,
    Source,
    Uploaded,
    example_setup,
    input_tensor,
    leading,
    part_note,
)
from normviz.io import FORMATS
from normviz.knobs import merge
from normviz.layouts import LAYOUTS
from normviz.methods import METHODS
from normviz.sections import Section

WHOLE: tuple[Section, ...] = (
    before_after.SECTION,
    uncontrolled.SECTION,
    all_methods.SECTION,
    feature_dims.SECTION,
)
PART: tuple[Section, ...] = (
    affine.SECTION,
    eps.SECTION,
    rms_layer.SECTION,
    sample_scale.SECTION,
    sample_scale.RMS_SECTION,
)
SMOLLM2: tuple[Section, ...] = (
    massive.SECTION,
    dyt_fit.SECTION,
    int8.SECTION,
)  # on SmolLM2's stream only
SECTIONS: tuple[Section, ...] = (*WHOLE, *SMOLLM2, *PART, downloads.SECTION)
KNOBS = merge(*(s.knobs for s in SECTIONS))

INTRO = (
    "After *which axes?* comes *what happens to the numbers?* This page shows the values "
    "before and after each method, which moments a method pins down and which it leaves "
    "alone, and what γ, β and ε change. Use the sidebar's data, or upload your own "
    "activations below."
)

UPLOAD_HELP = (
    "Upload activations you saved yourself: "
    + "; ".join(f"`{ext}` ({what})" for ext, what in FORMATS.items())
    + ". A 2-D array is read as one sequence (1, T, C), 3-D as (B, T, C) and 4-D as "
    "(N, C, H, W). Nothing in the file is ever executed: pickled Python objects are "
    "refused, not loaded."
)


def upload_note(key_md: str, source_shape: tuple[int, ...], shape_text: str) -> str:
    """What the page says about an uploaded input (`key_md`: the key, already escaped)."""
    return (
        f"Using **{key_md}** from the uploaded file: shape {source_shape} read as "
        f"{shape_text}. The sidebar's shape, data and seed do not apply while a file is "
        "loaded; the method, groups and ε do."
    )


def input_caption(source: Generated) -> str:
    """The line naming a generated input."""
    g = GENERATORS[source.data]
    lay = LAYOUTS[source.layout]
    shape = lay.shape_text(source.shape)
    what = g.describe(source.shape[lay.channel_axis])
    return f"Input: **{g.label}**, {what}. {shape}, seed {source.seed}."


def choice_label(knob: str, value: object) -> str:
    """How a knob's choice reads in its widget."""
    if knob == "guess":
        return massive.choice_label(str(value))
    return eps.choice_label(str(value)) if knob == "edata" else str(value)


def title(section: Section, setup: Setup) -> str:
    """The section's heading, naming the page's method where its label asks for it."""
    return section.label.format(method=METHODS[setup.method].label)


def sections_for(source: Source) -> tuple[Section, ...]:
    """The sections shown for an input: feature dimensions by size only for data that
    may have outlier channels (a real source, an upload, the outliers generator); the
    massive activation only on SmolLM2's stream."""
    skip = isinstance(source, Generated) and source.data != "outliers"
    return tuple(
        s
        for s in SECTIONS
        if not (skip and s is feature_dims.SECTION)
        and (s not in SMOLLM2 or massive.applies(source))
    )


def setup_for(section: Section, setup: Setup) -> Setup:
    """The setup a section runs on: the input's leading part for the demonstrations."""
    return leading(setup) if section in PART else setup


__all__ = [
    "DEMO_MAX",
    "GATE",
    "INTRO",
    "KNOBS",
    "PART",
    "SECTIONS",
    "UPLOAD_HELP",
    "WHOLE",
    "Generated",
    "Setup",
    "Source",
    "Uploaded",
    "choice_label",
    "example_setup",
    "input_caption",
    "input_tensor",
    "part_note",
    "sections_for",
    "setup_for",
    "squash",
    "title",
    "upload_note",
]
