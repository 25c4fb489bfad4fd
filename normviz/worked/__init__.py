"""Worked example (/worked-example): BatchNorm and LayerNorm on a small matrix, step by step.

The matrix is a batch of N samples with C features each, shape (N, C): its rows are
samples, its columns features (as the source text's `x.mean(0)` and `nn.BatchNorm1d`
read it). BatchNorm pools each column (axis 0, the samples: one statistic per
feature) and LayerNorm each row (axis 1, the features: one statistic per sample);
which of the two a method pools is read from its axis contract, not restated here.
Every number comes from normviz.normalize and is checked against the torch.nn layer.

The page's setup is the edited matrix (`Matrix`, a tuple of rows). Its sections,
in order: `steps` (module `walkthrough`), `source` (the source text's printed
numbers, shown for its own matrix) and `moments`. `steps` holds the arithmetic,
`presets` the editor's starting matrices.
"""

from __future__ import annotations

from normviz.sections import Section
from normviz.worked import moments, source, walkthrough
from normviz.worked.moments import Moments, MomentsView, controls, moments_table
from normviz.worked.picker import cell_grid
from normviz.worked.presets import EDITOR_HELP, PRESETS, Preset, preset_frame
from normviz.worked.source import SourceCheck, is_source, source_comparison
from normviz.worked.stepping import method_frames
from normviz.worked.steps import (
    EPS,
    MAX_ABS,
    MAX_SIZE,
    METHODS_SHOWN,
    SOURCE_BATCH_MEANS,
    SOURCE_BATCH_VARS,
    SOURCE_LAYER_ROW0,
    SOURCE_MATRIX,
    TORCH_NAME,
    TORCH_TOL,
    Matrix,
    MethodSteps,
    Statistic,
    WorkedInputError,
    as_matrix,
    eps_tex,
    fmt,
    fmt_list,
    method_steps,
    pooled_axis,
    pools,
    setup_from,
    statistic_latex,
    torch_reference,
)
from normviz.worked.walkthrough import (
    AFFINE,
    INTRO,
    Walkthrough,
    cell_text,
    heading,
    make_worked_figure,
    refusal_text,
    stat_heading,
    steps_frame,
    summary,
    torch_check,
    worked_stats,
)

SECTIONS: tuple[Section, ...] = (walkthrough.SECTION, source.SECTION, moments.SECTION)


def example_setup() -> Matrix:
    """The source text's 2×3 matrix."""
    return SOURCE_MATRIX


__all__ = [
    "AFFINE",
    "EDITOR_HELP",
    "EPS",
    "INTRO",
    "MAX_ABS",
    "MAX_SIZE",
    "METHODS_SHOWN",
    "PRESETS",
    "SECTIONS",
    "SOURCE_BATCH_MEANS",
    "SOURCE_BATCH_VARS",
    "SOURCE_LAYER_ROW0",
    "SOURCE_MATRIX",
    "TORCH_NAME",
    "TORCH_TOL",
    "Matrix",
    "MethodSteps",
    "Moments",
    "MomentsView",
    "Preset",
    "SourceCheck",
    "Statistic",
    "Walkthrough",
    "WorkedInputError",
    "as_matrix",
    "cell_grid",
    "cell_text",
    "controls",
    "eps_tex",
    "example_setup",
    "fmt",
    "fmt_list",
    "heading",
    "is_source",
    "make_worked_figure",
    "method_frames",
    "method_steps",
    "moments_table",
    "pooled_axis",
    "pools",
    "preset_frame",
    "refusal_text",
    "setup_from",
    "source_comparison",
    "stat_heading",
    "statistic_latex",
    "steps_frame",
    "summary",
    "torch_check",
    "torch_reference",
    "worked_stats",
]
