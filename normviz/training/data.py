"""The lab's data: scikit-learn's handwritten digits, real and offline, and shifted copies.

`load_digits` ships 1,797 8×8 greyscale images (values 0-16) inside the package:
nothing is downloaded. They are scaled to [0, 1] and split once, with a fixed
seed, into a training and a validation set (stratified by class). MLPs read an
image as 64 numbers, CNNs as a (1, 8, 8) picture.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

VAL_FRACTION = 0.2
SPLIT_SEED = 0  # the split never changes: every experiment sees the same sets
CLASSES = 10
# Distortions of the validation images (a distribution shift), by name.
SHIFTS: dict[str, str] = {
    "contrast": "contrast lowered towards grey by the strength: x → (1 − s)·x + s/2",
    "brightness": "every pixel brighter by the strength: x → x + s",
    "noise": "Gaussian noise with standard deviation s on every pixel",
    "blur": "a 3×3 blur mixing each pixel with its neighbours (weight s)",
}


@dataclass(frozen=True)
class Digits:
    """The split: images as (N, 1, 8, 8) float32 in [0, 1], labels as int64."""

    x_train: torch.Tensor  # (1437, 1, 8, 8)
    y_train: torch.Tensor  # (1437,)
    x_val: torch.Tensor  # (360, 1, 8, 8)
    y_val: torch.Tensor  # (360,)

    @property
    def n_train(self) -> int:
        return len(self.y_train)

    @property
    def n_val(self) -> int:
        return len(self.y_val)


@functools.lru_cache(maxsize=1)
def digits() -> Digits:
    """The fixed, stratified train/validation split of the digits (read once)."""
    from sklearn.datasets import load_digits

    raw = load_digits()
    x = torch.from_numpy((raw.images / 16.0).astype(np.float32)).unsqueeze(1)
    y = torch.from_numpy(raw.target.astype(np.int64))
    rng = np.random.default_rng(SPLIT_SEED)
    val = np.concatenate(
        [
            idx[: round(VAL_FRACTION * len(idx))]
            for idx in (rng.permutation(np.flatnonzero(raw.target == c)) for c in range(CLASSES))
        ]
    )
    is_val = np.zeros(len(y), dtype=bool)
    is_val[val] = True
    tr, va = torch.from_numpy(~is_val), torch.from_numpy(is_val)
    return Digits(x[tr], y[tr], x[va], y[va])


def shifted(x: torch.Tensor, kind: str, strength: float, seed: int = 0) -> torch.Tensor:
    """A distorted copy of images `x` (N, 1, 8, 8): the shift the lab tests against."""
    if kind == "contrast":
        return (1.0 - strength) * x + 0.5 * strength
    if kind == "brightness":
        return x + strength
    if kind == "noise":
        g = torch.Generator().manual_seed(10_000 + seed)
        return x + strength * torch.randn(x.shape, generator=g)
    if kind == "blur":
        k = torch.full((1, 1, 3, 3), strength / 8.0)
        k[0, 0, 1, 1] = 1.0 - strength
        return F.conv2d(x, k, padding=1)
    raise ValueError(f"unknown shift {kind!r}: use one of {', '.join(SHIFTS)}")


def batches(seed: int, n: int, batch: int, samples: int) -> torch.Tensor:
    """(steps, batch) training indices for `seed`: reshuffled every epoch, full batches.

    Equal samples seen: `samples // batch` steps whatever the batch size.
    """
    steps = max(1, samples // batch)
    g = torch.Generator().manual_seed(1_000 + seed)
    epochs = -(-steps * batch // n)
    order = torch.cat([torch.randperm(n, generator=g) for _ in range(epochs)])
    return order[: steps * batch].view(steps, batch)
