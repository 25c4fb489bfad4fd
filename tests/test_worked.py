"""The worked example: the source text's numbers, torch.nn as the oracle, and bad input."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from signals import assert_within_budget

from normviz import NormConfigError, worked


def _source_snippet() -> tuple[list[float], list[float], list[float]]:
    """The source text's own code, run as printed (float32, rounded to 4 decimals)."""
    x = torch.tensor([[1.0, 2.0, 7.0], [3.0, 4.0, 9.0]])
    batch = (x - x.mean(0)) / torch.sqrt(x.var(0, unbiased=False) + 1e-5)
    layer = (x - x.mean(1, keepdim=True)) / torch.sqrt(
        x.var(1, unbiased=False, keepdim=True) + 1e-5
    )
    return (
        torch.round(batch.mean(0), decimals=4).tolist(),
        torch.round(batch.var(0, unbiased=False), decimals=4).tolist(),
        torch.round(layer[0], decimals=4).tolist(),
    )


def test_the_source_texts_printed_numbers() -> None:
    b = worked.method_steps(worked.SOURCE_MATRIX, "batch")
    l_ = worked.method_steps(worked.SOURCE_MATRIX, "layer")
    # the source prints: means [0, 0, 0], variances [1, 1, 1], row 0 [-0.889, -0.508, 1.397]
    assert tuple(np.round(b.output.mean(0), 4) + 0.0) == worked.SOURCE_BATCH_MEANS
    assert tuple(np.round(b.output.var(0), 4)) == worked.SOURCE_BATCH_VARS
    assert tuple(np.round(l_.output[0], 3)) == worked.SOURCE_LAYER_ROW0 == (-0.889, -0.508, 1.397)
    means, variances, row0 = _source_snippet()
    assert means == [0.0, 0.0, 0.0] and variances == [1.0, 1.0, 1.0]
    np.testing.assert_allclose(row0, worked.SOURCE_LAYER_ROW0, atol=1e-6)
    np.testing.assert_allclose(l_.output[0], row0, atol=1e-4)
    table = worked.source_comparison(b, l_)
    assert list(table["same"]) == ["yes", "yes", "yes"]
    assert table.loc["LayerNorm: output row 1", "normviz gives"] == "[-0.889, -0.508, 1.397]"


def test_each_statistic_of_the_source_example() -> None:
    b = worked.method_steps(worked.SOURCE_MATRIX, "batch")
    assert b.pools == "column" and len(b.stats) == 3
    assert [s.mean for s in b.stats] == pytest.approx([2.0, 3.0, 8.0])
    assert [s.var for s in b.stats] == pytest.approx([1.0, 1.0, 1.0])
    assert b.stats[2].values == (7.0, 9.0)
    l_ = worked.method_steps(worked.SOURCE_MATRIX, "layer")
    assert l_.pools == "row" and len(l_.stats) == 2
    assert [s.mean for s in l_.stats] == pytest.approx([10 / 3, 16 / 3])
    assert [s.var for s in l_.stats] == pytest.approx([62 / 9, 62 / 9])
    # row 2 is row 1 + 2: LayerNorm gives both rows the same output
    np.testing.assert_allclose(l_.output[0], l_.output[1], atol=1e-12)
    mu, var, y = worked.statistic_latex(l_.stats[0])
    assert "1 + 2 + 7" in mu and mu.endswith("3.333")
    assert var.endswith("6.889") and "10^{-5}" in y and y.endswith("-0.889")


@settings(max_examples=40, deadline=None)
@given(
    st.integers(2, worked.MAX_SIZE).flatmap(
        lambda r: st.integers(1, worked.MAX_SIZE).flatmap(
            lambda c: st.lists(
                st.lists(st.floats(-100, 100, allow_nan=False, width=32), min_size=c, max_size=c),
                min_size=r,
                max_size=r,
            )
        )
    )
)
def test_matches_torch_nn_on_any_matrix(rows: list[list[float]]) -> None:
    x = torch.tensor(rows, dtype=torch.float64)
    bn = torch.nn.BatchNorm1d(x.shape[1], affine=False, track_running_stats=False).double()
    ln = torch.nn.LayerNorm(x.shape[1], elementwise_affine=False).double()
    with torch.no_grad():
        want = {"batch": bn.train()(x).numpy(), "layer": ln(x).numpy()}
    for method in worked.METHODS_SHOWN:
        s = worked.method_steps(rows, method)
        np.testing.assert_allclose(s.output, want[method], atol=1e-9)
        assert s.matches_torch, s.torch_max_diff
        # each statistic is torch's biased var_mean over its column or row
        dim = 0 if s.pools == "column" else 1
        var, mean = torch.var_mean(x, dim=dim, correction=0)
        np.testing.assert_allclose([t.mean for t in s.stats], mean.numpy(), atol=1e-9)
        np.testing.assert_allclose([t.var for t in s.stats], var.numpy(), atol=1e-9)


def test_pools_is_read_from_the_registry() -> None:
    assert worked.pools("batch") == "column"
    assert worked.pools("layer") == "row"
    assert worked.controls("batch") == ("column means", "column variances")


def test_one_framing_rows_are_samples() -> None:
    """The matrix is a batch (N, C): BatchNorm pools axis 0 (samples), LayerNorm axis 1."""
    assert worked.pooled_axis("batch").startswith("axis 0, the N samples")
    assert worked.pooled_axis("layer").startswith("axis 1, the C features")
    x = np.array([[1.0, -2.0, 0.5], [2.0, 0.0, 1.5], [0.0, 3.0, 2.0], [4.0, 1.0, -1.0]])
    t = torch.from_numpy(x)
    bn = torch.nn.BatchNorm1d(3, eps=worked.EPS, affine=False, dtype=t.dtype).train()
    with torch.no_grad():
        np.testing.assert_allclose(worked.method_steps(x, "batch").output, bn(t), atol=1e-12)
    words = " ".join(
        [worked.INTRO, worked.EDITOR_HELP, worked.summary(worked.method_steps(x, "batch"))]
    )
    assert "samples" in words and "(N, C)" in words
    assert "token" not in words.lower() and "(1, T, C)" not in words


def test_moments_table_says_who_pins_what() -> None:
    t = worked.moments_table(worked.SOURCE_MATRIX)
    assert list(t.index) == ["column means", "column variances", "row means", "row variances"]
    assert t.loc["column means", "after BatchNorm"] == "[0, 0, 0]"
    assert t.loc["column variances", "after BatchNorm"] == "[1, 1, 1]"
    assert t.loc["row variances", "after BatchNorm"] == "[0, 0]"  # rows become constant
    assert t.loc["row means", "after LayerNorm"] == "[0, 0]"
    assert t.loc["column variances", "after LayerNorm"] == "[0, 0, 0]"  # rows become equal
    assert t.loc["column means", "pinned by"] == "BatchNorm"
    assert t.loc["row variances", "pinned by"] == "LayerNorm"
    assert t.loc["row means", "input"] == "[3.333, 5.333]"


def test_a_single_row_leaves_batchnorm_out_of_the_moments_table() -> None:
    t = worked.moments_table([[1.0, 2.0, 7.0]])
    assert "after BatchNorm" not in t.columns and "after LayerNorm" in t.columns


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ([[1.0, float("nan"), 3.0], [1.0, 2.0, 3.0]], "row 1, column 2"),
        ([[1.0, 2.0], [3.0, None]], "row 2, column 2"),
        ([[1.0, 2.0], [3.0, 1e9]], "row 2, column 2"),
        ([[1.0, "a"], [3.0, 4.0]], "number"),
        ([1.0, 2.0, 3.0], "rows and columns"),
        ([[]], "rows and columns"),
        ([[1.0] * 9] * 2, "at most 8"),
        ([[1.0] * 2] * 9, "at most 8"),
    ],
)
def test_bad_matrices_are_refused_with_the_cell_named(data: object, match: str) -> None:
    with pytest.raises(worked.WorkedInputError, match=match):
        worked.method_steps(data, "layer")
    assert issubclass(worked.WorkedInputError, ValueError)


def test_single_row_batchnorm_is_refused_as_torch_refuses_it() -> None:
    with pytest.raises(NormConfigError, match="more than 1 value"):
        worked.method_steps([[1.0, 2.0, 7.0]], "batch")
    with pytest.raises(ValueError, match="more than 1 value"):
        torch.nn.BatchNorm1d(3).train()(torch.tensor([[1.0, 2.0, 7.0]]))
    assert worked.method_steps([[1.0, 2.0, 7.0]], "layer").matches_torch


def test_unknown_method_and_preset() -> None:
    with pytest.raises(worked.WorkedInputError, match="instance"):
        worked.method_steps(worked.SOURCE_MATRIX, "instance")
    with pytest.raises(worked.WorkedInputError, match="nope"):
        worked.preset_frame("nope")


def test_presets_and_dataframe_input() -> None:
    for key, p in worked.PRESETS.items():
        frame = worked.preset_frame(key)
        assert isinstance(frame, pd.DataFrame)
        np.testing.assert_array_equal(worked.as_matrix(frame), np.array(p.matrix))
    assert worked.is_source(worked.as_matrix(worked.preset_frame("source")))
    assert not worked.is_source(worked.as_matrix(worked.preset_frame("scaled")))
    # scaled rows: LayerNorm cannot tell them apart
    s = worked.method_steps(worked.preset_frame("scaled"), "layer")
    np.testing.assert_allclose(s.output[0], s.output[1], atol=1e-6)
    # a constant column comes out as zeros under BatchNorm
    c = worked.method_steps(worked.preset_frame("constant"), "batch")
    np.testing.assert_array_equal(c.output[:, 1], 0.0)


def test_formatting() -> None:
    assert worked.fmt(-0.0001) == "0"
    assert worked.fmt(0.99999) == "1"
    assert worked.fmt(-0.88900024) == "-0.889"
    assert worked.fmt_list([1.3969, -0.5]) == "[1.397, -0.5]"
    assert worked.eps_tex(1e-5) == "10^{-5}" and worked.eps_tex(3e-5) == "3e-05"
    frame = worked.steps_frame(worked.method_steps(worked.SOURCE_MATRIX, "batch"))
    assert list(frame.index) == ["column 1", "column 2", "column 3"]
    assert frame.loc["column 3", "μ"] == "8"


def test_figure_outlines_each_statistic_and_stays_small() -> None:
    x = worked.as_matrix(worked.PRESETS["wide"].matrix)
    steps = tuple(worked.method_steps(x, m) for m in worked.METHODS_SHOWN)
    fig = worked.make_worked_figure(x, steps, presenter=True)
    assert [t.type for t in fig.data] == ["heatmap"] * 3
    assert fig.data[2].text[0][0] == worked.fmt(steps[1].output[0, 0])
    assert len(fig.layout.shapes) == 4 + 3  # BatchNorm: 4 columns; LayerNorm: 3 rows
    titles = [a.text for a in fig.layout.annotations]
    assert titles[1].startswith("BatchNorm") and "column" in titles[1]
    assert "row" in titles[2]
    big = np.arange(64, dtype=float).reshape(8, 8)
    big_steps = tuple(worked.method_steps(big, m) for m in worked.METHODS_SHOWN)
    assert_within_budget(worked.make_worked_figure(big, big_steps))
