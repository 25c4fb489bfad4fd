"""The BatchNorm lab's real model: trained on the training lab's digits with equal samples
seen, re-scored apart on shifted digits, and every sentence computed from the scores."""

from __future__ import annotations

import numpy as np
import pytest
from signals import assert_within_budget

from normviz import batchnorm as bn
from normviz.batchnorm import model
from normviz.errors import NormConfigError
from normviz.sections import no_progress
from normviz.training import BatchSizeRuns, variants
from normviz.training.data import digits

SMALL = bn.LabSetup(model_scale=128 / 1438)  # 128 training digits per run: fast


@pytest.fixture(scope="module")
def trained() -> model.ModelRuns:
    return model.run(SMALL, {"compare": "group", "bn_seeds": 2}, no_progress)


def test_every_batch_size_sees_the_same_samples(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[int, int] = {}
    real = variants.train

    def spy(grid, progress):
        seen[grid.batch] = grid.steps * grid.batch  # samples the run actually sees
        return real(grid, progress)

    monkeypatch.setattr(variants, "train", spy)
    res = model.run(SMALL, {"compare": "layer", "bn_seeds": 1}, no_progress)
    assert seen == {2: 128, 64: 128}  # equal samples: batch 2 takes 32× the steps
    r = res.runs
    assert r.samples == 128 and r.steps(2) == 32 * r.steps(64)
    assert r.norms == ("batch", "layer") and r.batch_sizes == model.BATCH_SIZES
    assert (
        "every run sees 128 training digits, which is 64 steps at batch 2 and 2 steps"
        in (model.notes(res)[0])
    )


def test_seeds_start_at_the_sidebar_seed(trained: model.ModelRuns) -> None:
    assert trained.runs.seeds == (0, 1)
    assert trained.runs.eval_acc.shape == (2, 2, 2)  # norms × batch sizes × seeds
    assert len(trained.runs.weights) == 2  # kept, for the re-scoring step


def test_an_unfitting_method_is_refused() -> None:
    with pytest.raises(NormConfigError, match="does not fit the MLP"):
        model.run(SMALL, {"compare": "instance", "bn_seeds": 1}, no_progress)


def test_rescoring_clean_digits_gives_the_training_scores(trained: model.ModelRuns) -> None:
    # shift 0, scale 1 leaves the digits as they are: the same networks, the same scores
    same = model.run_shifted(trained, {"shift": 0.0, "scale": 1.0}, no_progress)
    np.testing.assert_array_equal(same.shifted_eval, trained.runs.eval_acc)
    np.testing.assert_array_equal(same.shifted_train, trained.runs.train_acc)
    # and scoring never moves the kept weights (running statistics included)
    before = [a.copy() for a in trained.runs.weights[0]]
    model.run_shifted(trained, {"shift": 3.0, "scale": 2.0}, no_progress)
    for a, b in zip(before, trained.runs.weights[0], strict=True):
        np.testing.assert_array_equal(a, b)


def test_batchnorm_training_mode_undoes_the_shift(trained: model.ModelRuns) -> None:
    # training mode re-centres and re-scales each test batch after the first linear layer:
    # a per-pixel shift and scale of the inputs cancels (up to ε)
    res = model.run_shifted(trained, {"shift": 2.0, "scale": 1.5}, no_progress)
    np.testing.assert_allclose(res.shifted_train[0], trained.runs.train_acc[0], atol=0.01)
    text = "\n".join(model.shifted_notes(res))
    moved = np.abs(res.shifted_train[0].mean(-1) - trained.runs.train_acc[0].mean(-1)).max()
    assert ("does not move with the shift" in text) == (100 * moved < model.SAME)


def test_the_sentences_describe_the_real_scores(trained: model.ModelRuns) -> None:
    # whatever the networks learned, the words say what the numbers show
    ev = trained.runs.eval_acc
    text = "\n".join(model.notes(trained))
    d = 100 * (ev[0, 0].mean() - ev[0, 1].mean())
    word = "about the same as" if abs(d) < model.SAME else ("lower" if d < 0 else "higher")
    assert f"trained with batches of 2 scores {model.pct(ev[0, 0])}: " in text
    first = text.split("\n")[1]
    assert word in first
    ranges = "overlap" if model.overlap(ev[0, 0], ev[0, 1]) else "do not overlap"
    assert first.endswith(f"the seeds' ranges {ranges}.")


def _runs(bn_eval, bn_train, other_eval, other_train) -> model.ModelRuns:
    """Fabricated scores: (batch sizes, seeds) arrays for BatchNorm and GroupNorm."""
    ev = np.array([bn_eval, other_eval], dtype=float)
    tr = np.array([bn_train, other_train], dtype=float)
    runs = BatchSizeRuns(
        ("batch", "group"), (2, 64), (0, 1, 2), ev, tr, np.zeros(ev.shape, bool), 1438
    )
    return model.ModelRuns(runs, 359)


def test_sentences_follow_fabricated_scores_both_ways() -> None:
    worse = _runs(
        [[0.60, 0.62, 0.64], [0.94, 0.95, 0.96]],
        [[0.40, 0.41, 0.42], [0.95, 0.96, 0.97]],
        [[0.88, 0.88, 0.88], [0.90, 0.90, 0.90]],
        [[0.88, 0.88, 0.88], [0.90, 0.90, 0.90]],
    )
    text = "\n".join(model.notes(worse))
    assert "scores 62.0 % (seeds 60.0–64.0 %): 33.0 points lower than BatchNorm trained" in text
    assert "(95.0 %, seeds 94.0–96.0 %); the seeds' ranges do not overlap." in text
    assert "scores 41.0 % (seeds 40.0–42.0 %): 21.0 points lower than the same networks" in text
    assert "26.0 points higher than BatchNorm at the same batch size" in text
    assert "its two scores agree" in text
    # the other way round: BatchNorm at batch 2 better in evaluation mode, ranges overlapping
    better = _runs(
        [[0.93, 0.96, 0.99], [0.90, 0.94, 0.95]],
        [[0.97, 0.97, 0.97], [0.95, 0.96, 0.97]],
        [[0.50, 0.50, 0.50], [0.50, 0.50, 0.50]],
        [[0.52, 0.52, 0.52], [0.50, 0.50, 0.50]],
    )
    text = "\n".join(model.notes(better))
    assert "3.0 points higher than BatchNorm trained with batches of 64" in text
    assert "the seeds' ranges overlap." in text
    assert "1.0 points higher than the same networks in evaluation mode" in text
    assert "46.0 points lower than BatchNorm at the same batch size" in text
    assert "about the same as GroupNorm trained with batches of 64" in text
    assert "differ (by up to 2.0 points) only because" in text
    assert "lower than BatchNorm trained" not in text


def test_shift_sentences_follow_fabricated_scores_both_ways() -> None:
    runs = _runs(
        [[0.6] * 3, [0.95] * 3], [[0.4] * 3, [0.96] * 3], [[0.88] * 3, [0.9] * 3], [[0.88] * 3] * 2
    ).runs
    shifted = np.array([[[0.6] * 3, [0.80] * 3], [[0.88] * 3, [0.9] * 3]])
    kept = model.ShiftScores(runs, shifted, runs.train_acc.copy(), 2.0, 1.5)
    text = "\n".join(model.shifted_notes(kept))
    assert "BatchNorm, batch 64: 80.0 % (seeds 80.0–80.0 %), 15.0 points below clean" in text
    assert "GroupNorm, batch 64: 90.0 % (seeds 90.0–90.0 %), about the same as on clean" in text
    assert "does not move with the shift (at most 0.0 points)" in text
    moved = model.ShiftScores(runs, shifted, runs.train_acc - 0.1, 2.0, 1.5)
    text = "\n".join(model.shifted_notes(moved))
    assert "does not move" not in text and "moves by up to 10.0 points" in text


def test_figures_and_tables(trained: model.ModelRuns) -> None:
    fig = model.figure(trained)
    names = [t.name for t in fig.data]
    assert names[0] == "evaluation mode" and names[1].startswith("training mode")
    assert list(fig.data[0].x) == [
        "BatchNorm, batch 2",
        "BatchNorm, batch 64",
        "GroupNorm, batch 2",
        "GroupNorm, batch 64",
    ]
    assert len(fig.data[0].error_y.array) == 4  # the seeds' spread
    res = model.run_shifted(trained, {"shift": 1.0, "scale": 1.0}, no_progress)
    sfig = model.shifted_figure(res)
    assert len(sfig.data) == 4 and "shift 1 σ" in sfig.layout.title.text
    assert_within_budget(sfig.to_plotly_json())
    df = model.table(trained)
    assert df.attrs["format"] == "percent"
    assert df["evaluation mode"].tolist() == pytest.approx(
        trained.runs.eval_acc.reshape(4, -1).mean(-1)
    )
    assert list(model.shifted_table(res).columns)[1] == "evaluation mode, shifted"


def test_the_rescoring_step_runs_on_the_trained_networks(trained: model.ModelRuns) -> None:
    # the part's setup is its section's result, so a shift or scale never retrains
    assert bn.part_setup(model.SHIFTED, SMALL, trained) is trained
    assert bn.part_setup(bn.PARTS["bessel"][0], SMALL, None) is SMALL
    assert {"compare", "bn_seeds", "shift", "scale", "bn_step"} <= {k.name for k in bn.KNOBS}
    assert digits().n_val == trained.n_test
