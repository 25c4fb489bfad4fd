"""The Axis Explorer (/axes): which cells share one mean and variance, and why.

Shape a tensor, pick a method, pick a cell: the cells that share that cell's
statistics light up in a 3D block and in the flat view's tensor grid; the selected
group's numbers go through the formula; a contract card, custom axes, the classic
confusions, every method side by side and the verified torch code follow.

Every section runs on one `AxesSetup` (the shared settings resolved to a
`Contract`, ε, the input and the selected cell):

    setup = AxesSetup(contract("batch", "BTC", (4, 6, 8)), cell=(1, 2, 3))
    result = block.SECTION.run(setup, {"partition": False, "split_hw": False}, no_progress)
"""

from __future__ import annotations

from normviz.axes import (
    block,
    card,
    code,
    confusions,
    custom,
    flat,
    gridview,
    group,
    multiples,
    pointwise,
    reshape,
)
from normviz.axes.cells import (
    CELL_KNOBS,
    AxesSetup,
    cell_keys,
    cell_text,
    clamp_cell,
    example_setup,
    group_slices,
    linked_cell_warnings,
)
from normviz.knobs import merge
from normviz.sections import Section

TITLE = "Axis Explorer"
INTRO = (
    "Every normalization layer computes its statistics once per group of values: a mean "
    "and a variance, or for RMSNorm (which does not centre) a mean square. Pick a method in "
    "the sidebar and a cell below: the cells that share that cell's statistics light up, in "
    "3D and unfolded flat."
)

# The selection: the block and the flat view side by side, then the selected group's
# numbers (the page reruns these alone when the cell changes).
SELECTION: tuple[Section, ...] = (block.SECTION, gridview.SECTION, group.SECTION)
# What the setting means, below the selection.
REST: tuple[Section, ...] = (
    card.SECTION,
    custom.SECTION,
    confusions.SECTION,
    multiples.SECTION,
    code.SECTION,
    reshape.SECTION,
)
# Far below the fold, drawn only when their fold is opened: on a first load they would
# bring one of the page's two charts and its two code blocks, whose syntax highlighter
# is a 1.5 MB script of its own (docs/serving.md, "First draw"). Every method side by
# side is a still picture (no chart library), so it is drawn at once.
FOLDED: tuple[Section, ...] = (code.SECTION, reshape.SECTION)
FOLD_LABEL = "Show this section"  # the fold's label, under the section's heading and intro
SECTIONS: tuple[Section, ...] = SELECTION + REST
KNOBS = merge(*(s.knobs for s in SECTIONS), CELL_KNOBS)
HELP = block.HELP  # widget help texts, by knob name

__all__ = [
    "FOLDED",
    "FOLD_LABEL",
    "HELP",
    "INTRO",
    "KNOBS",
    "REST",
    "SECTIONS",
    "SELECTION",
    "TITLE",
    "AxesSetup",
    "block",
    "card",
    "cell_keys",
    "cell_text",
    "clamp_cell",
    "code",
    "confusions",
    "custom",
    "example_setup",
    "flat",
    "gridview",
    "group",
    "group_slices",
    "linked_cell_warnings",
    "multiples",
    "pointwise",
    "reshape",
]
