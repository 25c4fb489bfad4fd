"""Faster convergence (issue 24): steps to a target accuracy, with and without normalization.

The run is checked against torch's own training loop (torch.nn modules, torch.optim.SGD),
the claim over 3 seeds with a stated margin, and every verdict branch through its numbers.
"""

from __future__ import annotations

import numpy as np
import pytest

from normviz.sections import no_progress
from normviz.training import SECTIONS, converge
from normviz.training.common import Setup
from normviz.training.train import Grid, train_loop
from normviz.training.wide import Variant


def _result(acc: list[list[list[float]]], steps=(0, 10, 20, 30), target=0.9):
    """A result with given curves: acc[norm][checkpoint][seed]."""
    return converge.ConvergeResult(tuple(steps), np.array(acc, dtype=float), target, 0.05, "")


def test_steps_to_target_is_the_first_checkpoint_at_or_above_it() -> None:
    res = _result(
        [
            [[0.1, 0.1], [0.5, 0.95], [0.9, 0.2], [0.95, 0.99]],  # none: 20 (exactly 0.9), 10
            [[0.1, 0.1], [0.2, 0.2], [0.3, 0.3], [0.4, 0.4]],  # batch: never
            [[0.1, 0.1], [0.1, 0.1], [0.1, 0.1], [0.91, 0.1]],  # layer: 30, never
        ]
    )
    np.testing.assert_array_equal(res.reached(0), [20, 10])
    assert np.isnan(res.reached(1)).all()
    r = res.reached(2)
    assert r[0] == 30 and np.isnan(r[1])
    assert converge.compare(res, "batch", "none") == (0, 2)
    table = converge.table(res)
    assert table["steps to 90.0 %"].tolist() == [
        "10–20 steps",
        "not reached within 30 steps",
        "30 steps in 1 of 2 seeds; the other 1 not within 30",
    ]


@pytest.mark.parametrize(
    ("bn", "none", "head", "why"),
    [
        (
            [10, 10],
            [20, 30],
            "**Holds here**",
            "in every seed BatchNorm reaches 90.0 % first, in 2.5×",
        ),
        ([10, 20], [None, None], "**Holds here**", "without a norm no seed does within 30 steps"),
        ([20, 20], [10, 20], "**Does not hold here**", "in no seed does BatchNorm reach"),
        (
            [None, None],
            [None, None],
            "**Does not hold here**",
            "BatchNorm does not reach 90.0 % within 30",
        ),
        ([10, 30], [20, 20], "**Mixed here**", "first in 1 of 2 seeds, later in 1"),
        (
            [10, 20],
            [20, 20],
            "**Mixed here**",
            "first in 1 of 2 seeds, at the same checkpoint in 1.",
        ),
    ],
)
def test_the_verdict_follows_the_runs(bn, none, head, why) -> None:
    steps = (0, 10, 20, 30)

    def curve(first):  # accuracy 0.95 from checkpoint `first` on, else 0.5
        return [[0.95 if f is not None and t >= f else 0.5 for f in first] for t in steps]

    res = _result([curve(none), curve(bn), curve([None, None])], steps)
    verdict = converge.notes(res)[-1]
    assert head in verdict and why in verdict, verdict


def test_the_curves_end_where_torchs_own_training_loop_ends() -> None:
    """The batched grid against torch.nn modules trained one at a time with torch.optim.SGD."""
    setup = Setup(0, 0.25)
    knobs = {**converge.SECTION.defaults(), "runs": 1, "cv_epochs": 2}
    res = converge.SECTION.run(setup, knobs, no_progress)
    variants = tuple(Variant(n, res.lr, 0) for n in converge.NORMS)
    grid = Grid(converge.NET, variants, batch=converge.BATCH, samples=setup.samples(2))
    ref, _ = train_loop(grid)
    np.testing.assert_allclose(res.acc[:, -1, 0], ref.val_acc, atol=1 / 359 + 1e-9)
    assert res.total == grid.steps and res.steps[0] == 0


def test_batchnorm_reaches_90_percent_in_half_the_steps_over_3_seeds() -> None:
    """Ioffe & Szegedy 2015; margin: in every one of 3 seeds BatchNorm needs at most half the
    steps of the network without a norm (one that never gets there counts as all steps + 1)."""
    knobs = {**converge.SECTION.defaults(), "runs": 3, "cv_epochs": 2, "cv_target": 0.9}
    res = converge.SECTION.run(Setup(0, 1.0), knobs, no_progress)
    bn = res.reached(converge.NORMS.index("batch"))
    none = np.nan_to_num(res.reached(converge.NORMS.index("none")), nan=res.total + 1)
    assert not np.isnan(bn).any(), bn
    assert (2 * bn <= none).all(), (bn, none)
    assert "**Holds here**" in converge.notes(res)[-1]


def test_registered_in_the_lab() -> None:
    assert converge.SECTION in SECTIONS
