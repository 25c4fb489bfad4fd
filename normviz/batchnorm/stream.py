"""The lab's data: a seeded training set, its minibatches, and many batches through BatchNorm.

Many small batches are run in one call: S batches of shape (b, ...) are folded
into the channel axis, so one `normalize()` over S·C "channels" gives every
batch its own mean and variance, exactly as S separate calls would.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from normviz.batchnorm.lab import CHUNK, HELD_OUT, TRAIN_SAMPLES, LabSetup, batch_weight
from normviz.core import NormConfigError, normalize
from normviz.data import generate
from normviz.layouts import LAYOUTS
from normviz.methods import METHODS
from normviz.running import RunningStats

Fraction = Callable[[float], None]  # progress of one stream: fraction done


def phase(progress: Callable[[float, str], None], text: str, lo: float = 0.0, hi: float = 1.0):
    """A stream's fraction callback reporting into the section's progress as [lo, hi]."""
    return lambda f: progress(lo + (hi - lo) * f, text)


# ---- the dataset and its minibatches -------------------------------------------------


@dataclass(frozen=True)
class Dataset:
    """A seeded training set, held-out samples, and the per-channel truth."""

    layout: str
    train: torch.Tensor  # (TRAIN_SAMPLES, *sample)
    held_out: torch.Tensor  # (HELD_OUT, *sample), same distribution
    mean: torch.Tensor  # (C,) training-set mean: where running_mean should end up
    var: torch.Tensor  # (C,) training-set variance (biased, over every value)

    @property
    def std(self) -> torch.Tensor:
        """σ per channel, floored so a constant channel does not divide by zero."""
        return self.var.sqrt().clamp_min(1e-6)

    def channel_view(self, t: torch.Tensor) -> torch.Tensor:
        """A (C,) tensor shaped to broadcast along the channel axis of a batch."""
        shape = [1] * self.train.ndim
        shape[LAYOUTS[self.layout].channel_axis] = -1
        return t.reshape(shape)

    def per_sample_view(self, t: torch.Tensor) -> torch.Tensor:
        """A (P, C) tensor (one value per sample and channel) shaped to broadcast on a batch."""
        shape = [1] * self.train.ndim
        shape[0], shape[LAYOUTS[self.layout].channel_axis] = t.shape[0], t.shape[1]
        return t.reshape(shape)


def make_dataset(setup: LabSetup) -> Dataset:
    """Training set + held-out samples from the shared generator (one call: one distribution)."""
    x = generate(
        setup.data, setup.layout, (TRAIN_SAMPLES + HELD_OUT, *setup.sample_shape), setup.seed
    )
    train, held = x[:TRAIN_SAMPLES], x[TRAIN_SAMPLES:]
    # the truth is what BatchNorm would compute with the whole training set as one batch
    whole = normalize(train, "batch", setup.layout)
    assert whole.mean is not None
    return Dataset(setup.layout, train, held, whole.mean.reshape(-1), whole.var.reshape(-1))


def batch_indices(n_samples: int, batch_size: int, steps: int, seed: int) -> torch.Tensor:
    """(steps, b) sample indices: shuffled epochs, as DataLoader(shuffle=True, drop_last=True)."""
    if batch_size > n_samples:
        raise NormConfigError(
            f"a batch of {batch_size:,} needs more than the {n_samples:,} samples available"
        )
    per_epoch = n_samples // batch_size
    g = torch.Generator().manual_seed(seed)
    epochs = -(-steps // per_epoch)
    idx = [
        torch.randperm(n_samples, generator=g)[: per_epoch * batch_size].view(per_epoch, -1)
        for _ in range(epochs)
    ]
    return torch.cat(idx)[:steps]


# ---- many batches through BatchNorm at once --------------------------------------------


@dataclass(frozen=True)
class BatchRun:
    """Training-mode BatchNorm applied to S batches, each with its own statistics."""

    output: torch.Tensor  # (S, b, *sample)
    mean: torch.Tensor  # (S, C) batch means
    var: torch.Tensor  # (S, C) biased batch variances: what normalizes each batch
    n: int  # values per channel in one batch


def normalize_batches(batches: torch.Tensor, layout: str, eps: float = 1e-5) -> BatchRun:
    """Training-mode BatchNorm on S batches (S, b, *sample) in one normalize() call.

    Raises:
        NormConfigError: a batch with one value per channel (the core's message).
    """
    S = batches.shape[0]
    c = LAYOUTS[layout].channel_axis
    b_shape = batches.shape[1:]
    C = b_shape[c]
    # (S, b, T, C) -> (b, T, S, C) -> (b, T, S·C): channel s·C + c is channel c of batch s
    moved = batches.movedim(0, c)
    folded = moved.reshape(*b_shape[:c], S * C, *b_shape[c + 1 :])
    res = normalize(folded, "batch", layout, eps=eps)
    assert res.mean is not None
    out = res.output.reshape(moved.shape).movedim(c, 0)
    return BatchRun(out, res.mean.reshape(S, C), res.var.reshape(S, C), res.contract.group_size)


@dataclass(frozen=True)
class StreamTrace:
    """Batch statistics of a training stream and the running buffers after every step."""

    batch_mean: torch.Tensor  # (S, C)
    batch_var: torch.Tensor  # (S, C), biased
    running_mean: torch.Tensor  # (R, S, C): one row per RunningStats fed
    running_var: torch.Tensor  # (R, S, C)
    n: int


def run_stream(
    samples: torch.Tensor,
    idx: torch.Tensor,
    layout: str,
    eps: float,
    runnings: Sequence[RunningStats],
    progress: Fraction | None = None,
) -> StreamTrace:
    """Feed the batches samples[idx[s]] through BatchNorm in training mode, in order.

    Every RunningStats in `runnings` is updated with each batch, as nn.BatchNorm's
    buffers would be; statistics are computed chunk by chunk, vectorized.
    """
    S, b = idx.shape
    C = samples.shape[LAYOUTS[layout].channel_axis]
    per_sample = samples[0].numel()
    per_chunk = max(1, CHUNK // max(1, b * per_sample))
    mean = torch.empty(S, C)
    var = torch.empty(S, C)
    r_mean = torch.empty(len(runnings), S, C)
    r_var = torch.empty(len(runnings), S, C)
    n = 0
    for start in range(0, S, per_chunk):
        stop = min(S, start + per_chunk)
        run = normalize_batches(samples[idx[start:stop]], layout, eps)
        n = run.n
        mean[start:stop], var[start:stop] = run.mean, run.var
        for s in range(stop - start):
            for r, rs in enumerate(runnings):
                rs.update(run.mean[s], run.var[s], n)
                r_mean[r, start + s], r_var[r, start + s] = rs.mean, rs.var
        if progress is not None:
            progress(stop / S)
    return StreamTrace(mean, var, r_mean, r_var, n)


def to_np(t: torch.Tensor) -> np.ndarray:
    """A tensor as a float64 numpy array (results hold plain arrays)."""
    return t.detach().double().numpy()


def shifted(
    x: torch.Tensor, mean: torch.Tensor, std: torch.Tensor, shift: float, scale: float
) -> torch.Tensor:
    """x' = μ + scale·(x − μ) + shift·σ: the mean moves `shift` σ, the spread grows ×scale.

    `mean` and `std` are the training data's, shaped to broadcast against x.
    """
    return mean + scale * (x - mean) + shift * std


# ---- real nn.BatchNorm modules ---------------------------------------------------------


def torch_momentum(momentum: float, convention: str) -> float | None:
    """nn.BatchNorm's momentum for a lab convention (Keras 0.9 is PyTorch 0.1; None: cumulative)."""
    return batch_weight(momentum, convention)


def torch_batchnorm(
    layout: str, C: int, eps: float = 1e-5, momentum: float | None = 0.1
) -> nn.Module:
    """The registry's torch reference for BatchNorm in this layout (BatchNorm1d or BatchNorm2d)."""
    return METHODS["batch"].torch[layout].cls(C, eps=eps, momentum=momentum)


def to_torch_layout(x: torch.Tensor, layout: str) -> torch.Tensor:
    """Channels at dim 1, as torch's BatchNorm wants them: (B, T, C) -> (B, C, T)."""
    if METHODS["batch"].torch[layout].channel_first and not LAYOUTS[layout].channel_first:
        return x.transpose(1, 2)
    return x


def from_torch_layout(x: torch.Tensor, layout: str) -> torch.Tensor:
    """The inverse of to_torch_layout (a transpose is its own inverse)."""
    return to_torch_layout(x, layout)
