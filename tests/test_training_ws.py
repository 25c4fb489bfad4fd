"""The training lab's Weight Standardization experiment: the batched trainer's WS runs
against torch.nn one at a time, the section at a small setup, and each verdict branch."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from normviz.errors import NormConfigError
from normviz.sections import no_progress
from normviz.training import example_setup
from normviz.training import ws as wsx
from normviz.training.common import Setup
from normviz.training.models import Net, build
from normviz.training.train import Grid, train, train_loop
from normviz.training.variants import BatchSizeRuns
from normviz.training.wide import Variant
from normviz.weightstd import WSConv2d, standardize


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_batched_ws_training_equals_one_model_at_a_time(optimizer: str) -> None:
    lr = 0.05 if optimizer == "sgd" else 0.003
    variants = (
        Variant("group", lr, 0, ws=True),
        Variant("batch", lr, 1),
        Variant("group", lr, 1),
        Variant("batch", lr, 0, ws=True),
        Variant("none", lr, 2, ws=True),
    )
    grid = Grid(wsx.NET, variants, batch=8, samples=8 * 10, optimizer=optimizer)
    out, wide, pos = train(grid)
    ref, models = train_loop(grid)
    assert wide.ws.tolist() == [variants[i].ws for i in pos]
    for k, i in enumerate(pos):  # the raw weights (WS standardizes them in each forward)
        for layer in (0, 1):
            torch.testing.assert_close(
                wide.w[layer][k], models[i][3 * layer].weight, rtol=1e-4, atol=1e-5
            )
    loose = np.array([v.norm == "batch" and optimizer == "adam" for v in variants])
    tol = np.where(loose, 1e-2, 1e-4)  # as test_training_engine: Adam on a bias before BN
    assert (np.abs(out.val_loss - ref.val_loss) <= tol * np.abs(ref.val_loss) + 1e-5).all()
    assert isinstance(models[0][0], WSConv2d) and not isinstance(models[2][0], WSConv2d)


def test_ws_changes_what_the_network_computes() -> None:
    """A WS network is not the plain one: the same init, different outputs (else the
    experiment would compare GroupNorm with itself)."""
    x = torch.randn(4, 1, 8, 8)
    plain, std = build(wsx.NET, "group", 0), build(wsx.NET, "group", 0, ws=True)
    torch.testing.assert_close(plain[0].weight, std[0].weight)
    assert not torch.allclose(plain(x), std(x))
    w = std[0].weight
    torch.testing.assert_close(
        std[0](x), torch.nn.functional.conv2d(x, standardize(w), std[0].bias, 1, 1)
    )


def test_ws_is_refused_in_the_mlp() -> None:
    with pytest.raises(NormConfigError, match="conv filters"):
        build(Net("mlp"), "group", 0, ws=True)


def test_section_at_the_example_setup() -> None:
    setup = example_setup()
    knobs = {**wsx.SECTION.defaults(), "runs": 3}
    res = wsx.SECTION.run(setup, knobs, no_progress)
    r = res.runs
    assert r.eval_acc.shape == r.train_acc.shape == (3, len(wsx.SIZES), 3)
    assert r.arms() == wsx.ARMS
    assert r.samples == setup.samples(0.5)
    assert [r.steps(b) for b in r.batch_sizes] == [r.samples // b for b in wsx.SIZES]
    assert ((r.eval_acc >= 0) & (r.eval_acc <= 1)).all() and not r.diverged.any()
    # GroupNorm has no batch statistics: at batch 1 (every validation image scored) its
    # training-mode score is its evaluation score
    np.testing.assert_allclose(r.train_acc[:2, 0], r.eval_acc[:2, 0], atol=1e-6)
    df = wsx.table(res).set_index(["normalization", "batch"])
    assert len(df) == 12 and list(df.columns) == ["steps", "accuracy (%)", "± sd"]
    for name, acc in [
        ("GroupNorm", r.eval_acc[0]),
        ("GroupNorm + WS", r.eval_acc[1]),
        ("BatchNorm", r.eval_acc[2]),
        ("BatchNorm, training mode", r.train_acc[2]),
    ]:
        for j, b in enumerate(wsx.SIZES):
            row = df.loc[(name, b)]
            assert row["accuracy (%)"] == pytest.approx(100 * acc[j].mean(), abs=0.005)
            assert row["± sd"] == pytest.approx(100 * acc[j].std(), abs=0.005)
            assert row["steps"] == r.samples // b
    fig = wsx.figure(res, False)
    assert [t.name for t in fig.data] == [
        "GroupNorm",
        "GroupNorm + WS",
        "BatchNorm",
        "BatchNorm, training mode",
    ]
    notes = wsx.notes(res)
    assert notes[0].startswith("Where the statistics come from: GroupNorm pools")
    moved = 100 * (res.mean(1) - res.mean(0))
    assert notes[2] == (
        "Weight Standardization changes GroupNorm's accuracy by "
        + ", ".join(
            f"{round(d, 1) + 0.0:+.1f} points at batch {b}"
            for d, b in zip(moved, wsx.SIZES, strict=True)
        )
        + " (mean over seeds)."
    )
    assert notes[3] == wsx.spread(res) and notes[3].startswith("Against the noise: at batch 1")
    # the verdict across the 3 seeds: its head is the rule recomputed from the arrays
    ok = [r.eval_acc[1, j].mean() >= r.eval_acc[2, j].mean() - wsx.MARGIN for j in (0, 1)]
    head = "Holds here" if all(ok) else "Does not hold here" if not any(ok) else "Mixed here"
    assert f"**{head}**" in notes[-1], notes[-1]
    for j, b in enumerate(wsx.SIZES[:2]):
        gnws, bn = 100 * r.eval_acc[1, j].mean(), 100 * r.eval_acc[2, j].mean()
        assert (
            f"at batch {b} GroupNorm + WS scores {gnws:.1f} % against BatchNorm's {bn:.1f} %"
            in (notes[-1])
        )


def test_what_batchnorm_measures_at_batch_1_is_read_off_the_network() -> None:
    text = wsx.measured()
    model = build(wsx.NET, "batch", 0)
    x = torch.zeros(1, 1, 8, 8)
    positions, fan_in = [], []
    for m in model:
        if isinstance(m, torch.nn.Conv2d):
            fan_in.append(m.weight[0].numel())
        x = m(x) if not isinstance(m, torch.nn.BatchNorm2d) else x
        if isinstance(m, torch.nn.Conv2d):
            positions.append(x.shape[-2] * x.shape[-1])
    assert positions == [64, 16] and fan_in == [9, 36]
    assert re.findall(r"(\d+) after conv", text) == [str(p) for p in positions]
    assert re.findall(r"(\d+) in conv", text) == [str(f) for f in fan_in]


def _synthetic(gn_ws: list[float], bn: list[float], seeds: int = 3) -> wsx.WSResult:
    """Runs with chosen mean accuracies at batch 1 and 2 (the reference batch: 0.95)."""
    acc = np.full((3, 3, seeds), 0.9)
    acc[1, :2] = np.array(gn_ws)[:, None]
    acc[2, :2] = np.array(bn)[:, None]
    acc[2, 2] = 0.95
    if seeds > 1:  # spread the seeds, the mean unchanged
        acc += np.linspace(-0.01, 0.01, seeds)
    runs = BatchSizeRuns(
        ("group", "group", "batch"),
        wsx.SIZES,
        tuple(range(seeds)),
        acc,
        acc.copy(),
        np.zeros(acc.shape, bool),
        1438,
        ws=(False, True, False),
    )
    return wsx.WSResult(runs)


@pytest.mark.parametrize(
    ("gn_ws", "bn", "head"),
    [
        ([0.90, 0.91], [0.80, 0.85], "**Holds here**"),  # beats BatchNorm at both
        ([0.905, 0.90], [0.91, 0.90], "**Holds here**"),  # within the 1-point margin
        ([0.85, 0.86], [0.90, 0.91], "**Does not hold here**"),
        ([0.90, 0.85], [0.86, 0.90], "**Mixed here**"),  # batch 1 yes, batch 2 no
    ],
)
def test_verdict_branches(gn_ws, bn, head) -> None:
    text = wsx.verdict(_synthetic(gn_ws, bn))
    assert head in text, text
    assert text.startswith(wsx.CLAIM)
    assert f"at batch 1 GroupNorm + WS scores {100 * gn_ws[0]:.1f} %" in text
    assert f"BatchNorm's {100 * bn[1]:.1f} %" in text
    assert "BatchNorm at batch 32 scores 95.0 %" in text
    for j, b in enumerate((1, 2)):  # the seeds share one spread: all or none as high
        k = 3 if gn_ws[j] >= bn[j] else 0
        assert f"at batch {b} GroupNorm + WS scores {100 * gn_ws[j]:.1f} %" in text
        assert f"BatchNorm's {100 * bn[j]:.1f} % (as high or higher in {k} of 3 seeds)" in text


def test_the_gap_is_weighed_against_the_seeds_spread() -> None:
    # seeds spread by ±1 point (sd 0.8): a 10-point gap is beyond it, a 0.5-point one within
    text = wsx.spread(_synthetic([0.90, 0.905], [0.80, 0.90]))
    assert text == (
        "Against the noise: at batch 1 the gap (+10.0 points) is beyond the seeds' spread "
        "(sd up to 0.8); at batch 2 the gap (+0.5 points) is within the seeds' spread "
        "(sd up to 0.8)."
    )
    res = _synthetic([0.9, 0.9], [0.8, 0.8], seeds=1)
    assert not any(n.startswith("Against the noise") for n in wsx.notes(res))  # no spread


def test_verdict_with_one_seed_counts_no_seeds() -> None:
    text = wsx.verdict(_synthetic([0.9, 0.9], [0.8, 0.8], seeds=1))
    assert "**Holds here**" in text and "as high or higher" not in text


def test_the_epochs_knob_sets_equal_samples() -> None:
    assert Setup().samples(2) == 2 * Setup().samples(1)
    assert [k.name for k in wsx.KNOBS] == ["ws_epochs", "runs"]
