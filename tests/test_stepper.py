"""Step-through frames (normviz.frames): built from the section's numbers, checked against torch."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from normviz import worked
from normviz.batchnorm import lab, running, stream
from normviz.frames import Column, Frames, Line
from normviz.worked import stepping

SETUP = lab.LabSetup(layout="BTC", sample_shape=(5, 3), batch_size=4, steps=12)


def test_frames_refuse_columns_of_another_length() -> None:
    with pytest.raises(ValueError, match="3 frames"):
        Frames("t", ("a", "b", "c"), columns=(Column("x", ("1", "2")),))
    with pytest.raises(ValueError, match="2 frames"):
        Frames("t", ("a", "b"), lines=(Line("y", (1.0, None, 2.0), "#000"),))


def test_a_frame_text_names_each_number_and_clamps_the_frame() -> None:
    f = Frames(
        "t", ("Step 1", "Step 2"), columns=(Column("μ", ("1", "2")), Column("σ²", ("3", "4")))
    )
    assert f.text(2) == "Step 2: μ 2; σ² 4"
    assert f.text(99) == f.text(2) and f.text(-3) == "Step 1: μ 1; σ² 3"
    assert f.data()["columns"][1] == {"name": "σ²", "text": ["3", "4"]}


@pytest.mark.parametrize("channel", [0, 2])
def test_running_frames_are_torch_batchnorm_after_k_batches(channel: int) -> None:
    trace = running.running_trace(SETUP)
    frames = running.step_frames(trace, channel)
    assert frames.count == SETUP.steps
    ds = stream.make_dataset(SETUP)
    idx = stream.batch_indices(lab.TRAIN_SAMPLES, SETUP.batch_size, SETUP.steps, SETUP.seed)
    bn = nn.BatchNorm1d(SETUP.C, eps=SETUP.eps, momentum=SETUP.momentum).double()
    cols = {c.name: c for c in frames.columns}
    lines = {(s.panel, s.name): s for s in frames.lines}
    with torch.no_grad():
        for k in range(1, SETUP.steps + 1):
            batch = ds.train[idx[k - 1]].double()
            bn(batch.transpose(1, 2))
            own = batch[..., channel]
            want = {
                "batch mean": own.mean(),
                "batch variance (biased)": own.var(unbiased=False),
                "running mean": bn.running_mean[channel],
                "running variance": bn.running_var[channel],
            }
            for name, v in want.items():
                assert float(cols[name].text[k - 1]) == pytest.approx(float(v), rel=1e-3, abs=1e-6)
            drawn = lines[(0, "running statistic")].values[k - 1]
            assert drawn == pytest.approx(float(bn.running_mean[channel]), abs=1e-5)
            assert f"Batch {k} of {SETUP.steps}: batch mean" in frames.text(k)
    truth = lines[(1, "training set (truth)")]
    assert truth.whole and np.allclose(truth.values, trace.true_var[channel], atol=1e-5)


MATRICES = [((1.0, 2.0, 7.0), (3.0, 4.0, 9.0)), ((0.5, -2.0), (3.0, 1.0), (-4.0, 8.0))]


@pytest.mark.parametrize("x", MATRICES)
@pytest.mark.parametrize("method", ["batch", "layer"])
def test_worked_frames_are_torch_mean_var_and_output(x, method: str) -> None:
    t = torch.tensor(x, dtype=torch.float64)  # (N, C)
    steps = worked.method_steps(t.numpy(), method)
    frames = worked.method_frames(steps, t.numpy())
    dim = 0 if method == "batch" else 1  # BatchNorm pools a column, LayerNorm a row
    if method == "batch":
        layer: nn.Module = nn.BatchNorm1d(t.shape[1], affine=False, dtype=t.dtype)
    else:
        layer = nn.LayerNorm(t.shape[1], elementwise_affine=False, dtype=t.dtype)
    with torch.no_grad():
        y = layer.train()(t)
    mean, var = t.mean(dim), t.var(dim, unbiased=False)
    groups = t.shape[1 - dim]
    assert frames.count == 4 * groups
    cols = {c.name: c.text for c in frames.columns}
    for g in range(groups):
        out = y[:, g] if method == "batch" else y[g]
        mu, s2, xh, yy = (4 * g + i for i in range(4))  # the frames of group g
        assert float(cols["μ"][mu]) == pytest.approx(float(mean[g]), abs=1e-3)
        assert cols["σ²"][mu] == stepping.NOT_YET
        assert float(cols["σ²"][s2]) == pytest.approx(float(var[g]), abs=1e-3)
        assert cols["x̂"][s2] == stepping.NOT_YET
        for name, k in (("x̂", xh), ("y", yy)):
            shown = [float(v) for v in cols[name][k].strip("[]").split(", ")]
            np.testing.assert_allclose(shown, out.numpy(), atol=1e-3)
        grid = frames.grids[yy]
        cells = (
            [(r, g) for r in range(t.shape[0])] if dim == 0 else [(g, c) for c in range(t.shape[1])]
        )
        assert sorted(grid.marked) == sorted(cells)
        for r, c in cells:  # the y frame writes the outputs into the group's cells
            assert float(grid.cells[r][c]) == pytest.approx(float(y[r, c]), abs=1e-3)
        assert frames.text(mu + 1).startswith(f"{steps.pools.capitalize()} {g + 1} of {groups}, μ")
    assert len(frames.grids[-1].done) == t.numel()  # at the end every cell holds its y


PLAYER_BUDGET = 300_000  # bytes of JSON: the player's data at the most steps a link allows


def test_the_longest_stream_ships_under_the_player_budget() -> None:
    import json

    setup = lab.LabSetup(layout="BTC", sample_shape=(2, 3), batch_size=4, steps=running.STEPS.hi)
    frames = running.step_frames(running.running_trace(setup), 1)
    assert frames.count == running.STEPS.hi
    assert len(json.dumps(frames.data())) < PLAYER_BUDGET
