"""Normalization variants trained at several batch sizes with equal samples seen.

The public entry point for any page that compares normalizations across batch sizes
(the training lab's tiny-batch experiment; the BatchNorm lab's real model): for
each batch size one batched computation trains every normalization × seed, each
run seeing the same number of samples (so a smaller batch takes more steps), and
scores the validation set twice: in evaluation mode (BatchNorm's running
statistics) and in training mode (the statistics of each validation batch of the
same size).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from normviz.sections import Progress, no_progress
from normviz.training.models import Net
from normviz.training.train import Grid, train
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


def train_at_batch_sizes(
    net: Net,
    norms: Sequence[str],
    batch_sizes: Sequence[int],
    seeds: Sequence[int],
    samples: int,
    lr: float,
    optimizer: str = "adam",
    progress: Progress = no_progress,
) -> BatchSizeRuns:
    """Train every norm × seed at each batch size, `samples` training samples per run."""
    norms, sizes, seeds = tuple(norms), tuple(batch_sizes), tuple(seeds)
    variants = tuple(Variant(n, lr, s) for n in norms for s in seeds)
    work = [samples // b for b in sizes]  # steps: what each size costs
    done = 0
    ev, tr, dv = [], [], []
    for b, steps in zip(sizes, work, strict=True):

        def part(f: float, text: str, done: int = done, steps: int = steps, b: int = b) -> None:
            progress((done + f * steps) / sum(work), f"batch size {b}: {text}")

        grid = Grid(
            net, variants, batch=b, samples=samples, train_mode_eval=True, optimizer=optimizer
        )
        out = train(grid, part)[0]
        ev.append(out.val_acc)
        tr.append(out.val_acc_batch_stats)
        dv.append(out.diverged)
        done += steps
    shape = (len(sizes), len(norms), len(seeds))
    arr = lambda a: np.asarray(a).reshape(shape).transpose(1, 0, 2)  # noqa: E731
    return BatchSizeRuns(norms, sizes, seeds, arr(ev), arr(tr), arr(dv))
