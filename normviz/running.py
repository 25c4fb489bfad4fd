"""RunningStats: BatchNorm's running mean and variance, kept apart from the formula."""

from __future__ import annotations

from typing import Literal

import torch

from normviz.errors import NormConfigError

Convention = Literal["pytorch", "keras"]
CONVENTIONS: dict[str, str] = {
    "pytorch": "PyTorch: new = (1 − m)·old + m·batch, unbiased batch variance",
    "keras": "Keras 3: new = m·old + (1 − m)·batch, biased batch variance",
}


class RunningStats:
    """Running mean/var buffers updated exactly as torch (or Keras 3) updates them.

    pytorch: new = (1 − m)·old + m·batch, the variance update uses the unbiased
    batch variance (n/(n−1)); momentum=None is the cumulative average (factor
    1/num_batches_tracked). keras (as Keras 3's BatchNormalization does): new =
    m·old + (1 − m)·batch with the biased batch variance.
    """

    def __init__(
        self,
        num_features: int,
        momentum: float | None = 0.1,
        convention: Convention = "pytorch",
        dtype: torch.dtype = torch.float32,
    ) -> None:
        if convention not in CONVENTIONS:
            raise NormConfigError(
                f"unknown convention {convention!r}: choose one of {', '.join(CONVENTIONS)}"
            )
        if momentum is None and convention != "pytorch":
            raise NormConfigError("momentum=None (cumulative average) is PyTorch's convention")
        if momentum is not None and not 0.0 <= float(momentum) <= 1.0:
            raise NormConfigError(f"momentum must be between 0 and 1, got {momentum}")
        if isinstance(num_features, bool) or not isinstance(num_features, int) or num_features < 1:
            raise NormConfigError(f"num_features must be a whole number ≥ 1, got {num_features!r}")
        self.num_features = num_features
        self.momentum = None if momentum is None else float(momentum)
        self.convention: Convention = convention
        self.mean = torch.zeros(num_features, dtype=dtype)
        self.var = torch.ones(num_features, dtype=dtype)
        self.num_batches_tracked = 0

    def factor(self) -> float:
        """Weight of the new batch in the update, after counting it."""
        if self.convention == "keras":
            assert self.momentum is not None
            return 1.0 - self.momentum
        if self.momentum is None:
            return 1.0 / self.num_batches_tracked
        return self.momentum

    def update(self, batch_mean: torch.Tensor, batch_var: torch.Tensor, n: int) -> None:
        """Fold in one batch: its mean and biased variance over n values per channel."""
        self.num_batches_tracked += 1
        f = self.factor()
        var = batch_var
        if self.convention == "pytorch":
            var = batch_var * (n / (n - 1)) if n > 1 else batch_var
        self.mean = (1 - f) * self.mean + f * batch_mean.to(self.mean.dtype)
        self.var = (1 - f) * self.var + f * var.to(self.var.dtype)

    def copy(self) -> RunningStats:
        new = RunningStats(self.num_features, self.momentum, self.convention, self.mean.dtype)
        new.mean, new.var = self.mean.clone(), self.var.clone()
        new.num_batches_tracked = self.num_batches_tracked
        return new

    def __repr__(self) -> str:
        return (
            f"RunningStats(num_features={self.num_features}, momentum={self.momentum}, "
            f"convention={self.convention!r}, num_batches_tracked={self.num_batches_tracked})"
        )
