"""Every chart on every page has a text alternative (AppTest: no browser needed).

`ui.runner.chart` draws each Plotly chart and each still picture with a closed "Chart as
text" fold under it,
and the runner does the same for each Graphviz flowchart and each tensor grid. The
sentences are computed from the figure or the section's result (`normviz.alttext`, `Section.alt`).
"""

from __future__ import annotations

import pytest
from conftest import assert_clean, run_app

from normviz import alttext, contract
from normviz.axes import block, cells, gridview, multiples
from normviz.sections import Section
from ui import tensorgrid
from ui.pages import PAGES
from ui.runner import ALT_LABEL

PATHS = [None, *(p.path for p in PAGES)]


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p or "home")
def test_every_chart_has_a_text_alternative(path: str | None) -> None:
    at = run_app(path)
    assert_clean(at)
    grids = [e for e in at.get("bidi_component") if e.proto.component_name == tensorgrid.NAME]
    pictures = [h for h in at.get("html") if h.proto.body.startswith('<div class="nv-picture">')]
    charts = len(at.get("plotly_chart")) + len(at.get("graphviz_chart")) + len(grids)
    charts += len(pictures)
    folds = [e for e in at.expander if e.label == ALT_LABEL]
    assert charts == len(folds), (charts, len(folds))
    for fold in folds:  # sentences, not an empty fold
        assert fold.markdown and all(m.value.startswith("- ") for m in fold.markdown)


def test_the_axes_sentences_come_from_the_result() -> None:
    setup = cells.example_setup()  # BatchNorm on (4, 6, 8), cell (1, 2, 3)
    view = block.run(setup, {"partition": False, "split_hw": False}, lambda *_: None)
    words = " ".join(block.alt(view))
    assert "(B, T, C) = (1, 2, 3)" in words and "m = 24 values: B 0–3, T 0–5, C 3" in words
    words = " ".join(gridview.axes_grid(setup, {"partition": True}).alt)
    assert "rows B (4) · T (6), columns C (8)" in words and "8 statistic groups" in words
    words = multiples.alt_lines("NCHW", (2, 6, 3, 3), 4)
    assert any(w.startswith("GroupNorm: not drawn") for w in words)


def test_a_figure_is_described_from_its_data() -> None:
    con = contract("layer", "BTC", (8, 16, 32))
    lines = alttext.describe(block.make_block_figure(con, cell=(3, 3, 3)))
    assert lines[0] == "Chart: LayerNorm: one μ and σ² from 32 values."
    assert any("3,968 of 4,096 cells" in line for line in lines)
    plain = Section("s", "S", "", run=lambda *_: None)  # no alt: the figure speaks
    fig = block.make_block_figure(contract("layer", "BTC", (2, 3, 4)))
    assert plain.alt_text(None, fig) == alttext.describe(fig)
