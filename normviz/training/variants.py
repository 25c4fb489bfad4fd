"""Normalization variants trained at several batch sizes with equal samples seen.

The public entry point for any page that compares normalizations across batch sizes
(the training lab's tiny-batch experiment; the BatchNorm lab's real model): for
each batch size one batched computation trains every normalization × seed, each
run seeing the same number of samples (so a smaller batch takes more steps), and
scores the validation set twice: in evaluation mode (BatchNorm's running
statistics) and in training mode (the statistics of each validation batch of the
same size). With `keep=True` the trained weights are kept (as numpy arrays), so
`score_runs` can test the same networks on other data (a shifted test set) without
training again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from normviz.sections import Progress, no_progress
from normviz.training.models import Net
from normviz.training.train import Grid, build_wide, evaluate, single_threaded, train
from normviz.training.wide import Variant


@dataclass(frozen=True)
class BatchSizeRuns:
    """Validation accuracies by normalization, batch size and seed."""

    norms: tuple[str, ...]
    batch_sizes: tuple[int, ...]
    seeds: tuple[int, ...]
    eval_acc: np.ndarray  # (norms, batch sizes, seeds): evaluation mode, running statistics
    train_acc: np.ndarray  # the same in training mode: each validation batch's statistics
    diverged: np.ndarray  # (norms, batch sizes, seeds) bool
    samples: int = 0  # training samples every run saw (equal for every batch size)
    net: Net | None = None  # the networks' shape (kept runs only)
    weights: tuple[tuple[np.ndarray, ...], ...] = ()  # per batch size: Wide.snapshot()
    ws: tuple[bool, ...] = ()  # per norm: its convs standardize their weights (empty: none)

    def arms(self) -> tuple[tuple[str, bool], ...]:
        """(norm, Weight Standardization) per row of the accuracy arrays."""
        return tuple(zip(self.norms, self.ws or (False,) * len(self.norms), strict=True))

    def steps(self, batch: int) -> int:
        """Optimizer steps of a run at `batch`: equal samples seen, so more for a smaller batch."""
        return max(1, self.samples // batch)


def train_at_batch_sizes(
    net: Net,
    norms: Sequence[str],
    batch_sizes: Sequence[int],
    seeds: Sequence[int],
    samples: int,
    lr: float,
    optimizer: str = "adam",
    progress: Progress = no_progress,
    keep: bool = False,
    ws: Sequence[bool] = (),
) -> BatchSizeRuns:
    """Train every norm × seed at each batch size, `samples` training samples per run.

    keep: also return the trained weights (for `score_runs`). ws: per norm, whether its
    convs standardize their weights (a norm may appear twice, with and without).
    """
    norms, sizes, seeds, ws = tuple(norms), tuple(batch_sizes), tuple(seeds), tuple(ws)
    flags = ws or (False,) * len(norms)
    variants = tuple(
        Variant(n, lr, s, ws=w) for n, w in zip(norms, flags, strict=True) for s in seeds
    )
    work = [samples // b for b in sizes]  # steps: what each size costs
    done = 0
    ev, tr, dv, kept = [], [], [], []
    for b, steps in zip(sizes, work, strict=True):

        def part(f: float, text: str, done: int = done, steps: int = steps, b: int = b) -> None:
            progress((done + f * steps) / sum(work), f"batch size {b}: {text}")

        grid = Grid(
            net, variants, batch=b, samples=samples, train_mode_eval=True, optimizer=optimizer
        )
        out, wide, _ = train(grid, part)
        if keep:
            kept.append(wide.snapshot())
        ev.append(out.val_acc)
        tr.append(out.val_acc_batch_stats)
        dv.append(out.diverged)
        done += steps
    arr = _by_norm(len(norms), len(sizes), len(seeds))
    return BatchSizeRuns(
        norms,
        sizes,
        seeds,
        arr(ev),
        arr(tr),
        arr(dv),
        samples,
        net if keep else None,
        tuple(kept),
        ws,
    )


def _by_norm(norms: int, sizes: int, seeds: int):
    """(batch sizes, norms · seeds) per-size rows → (norms, batch sizes, seeds)."""
    return lambda a: np.asarray(a).reshape(sizes, norms, seeds).transpose(1, 0, 2)


@single_threaded
def score_runs(
    runs: BatchSizeRuns, x: torch.Tensor, y: torch.Tensor
) -> tuple[np.ndarray, np.ndarray]:
    """Accuracy of kept runs on the set (x, y): (evaluation mode, training mode), each
    (norms, batch sizes, seeds); training mode normalizes each batch of the run's size
    by its own statistics (the running ones do not move)."""
    if runs.net is None or len(runs.weights) != len(runs.batch_sizes):
        raise ValueError("these runs kept no weights: train them with keep=True")
    variants = tuple(Variant(n, 0.0, s, ws=w) for n, w in runs.arms() for s in runs.seeds)
    ev, tr = [], []
    for b, arrays in zip(runs.batch_sizes, runs.weights, strict=True):
        wide, pos = build_wide(Grid(runs.net, variants, batch=b))
        wide.load(arrays)
        back = np.argsort(pos)  # the grid's sorted order back to the variants' order
        ev.append(evaluate(wide, x, y)[0][back])
        tr.append(evaluate(wide, x, y, b)[0][back])
    arr = _by_norm(len(runs.norms), len(runs.batch_sizes), len(runs.seeds))
    return arr(ev), arr(tr)
