"""Batch Renormalization (Ioffe 2017): BatchNorm that corrects each batch towards the
running statistics.

    x̂ = (x − μ_B) / σ_B · r + d,   r = clip(σ_B / σ, 1/r_max, r_max),
                                    d = clip((μ_B − μ) / σ, −d_max, d_max)
    y = γ ⊙ x̂ + β

μ_B, σ_B are the batch's statistics per channel (biased variance, ε inside the root,
like torch), μ, σ the running ones. r and d are constants in backprop (`.detach()`):
the gradient flows through μ_B and σ_B exactly as in BatchNorm, scaled by r. Unclipped,
r and d undo the batch's own statistics and put the running ones in their place, so a
training output is what evaluation mode would give; the clip keeps early, unreliable
running statistics from taking over. torch has no such module: this is the reference.
"""

from __future__ import annotations

import torch
from torch import nn

R_MAX, D_MAX = 3.0, 5.0  # the bounds the paper suggests (reached after a ramp from 1 and 0)


class BatchRenorm(nn.Module):
    """Batch Renormalization over channel dim 1 of (N, C) or (N, C, *) inputs.

    The running statistics are kept as torch's BatchNorm keeps them (running_mean and
    the unbiased running_var, updated with `momentum`; σ = √(running_var + ε)), so
    with r_max = 1, d_max = 0 this module is BatchNorm, in training and in evaluation.
    `r_max`, `d_max` are plain attributes: a schedule sets them between steps.
    `last_r`, `last_d` (C,) hold the corrections of the last training batch.
    """

    def __init__(
        self,
        num_features: int,
        r_max: float = R_MAX,
        d_max: float = D_MAX,
        momentum: float = 0.1,
        eps: float = 1e-5,
    ) -> None:
        super().__init__()
        if r_max < 1 or d_max < 0:
            raise ValueError(f"need r_max ≥ 1 and d_max ≥ 0, got r_max={r_max}, d_max={d_max}")
        self.r_max, self.d_max, self.momentum, self.eps = float(r_max), float(d_max), momentum, eps
        self.weight = nn.Parameter(torch.ones(num_features))  # γ, (C,)
        self.bias = nn.Parameter(torch.zeros(num_features))  # β, (C,)
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))
        self.register_buffer("last_r", torch.ones(num_features))
        self.register_buffer("last_d", torch.zeros(num_features))

    def _along(self, v: torch.Tensor, ndim: int) -> torch.Tensor:
        return v.reshape((1, -1) + (1,) * (ndim - 2))  # (C,) → (1, C, 1, ...)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim < 2 or x.shape[1] != self.weight.numel():
            raise ValueError(
                f"BatchRenorm({self.weight.numel()}) needs (N, C, ...) with "
                f"C = {self.weight.numel()}, got shape {tuple(x.shape)}"
            )
        sigma = torch.sqrt(self.running_var + self.eps)  # (C,)
        if self.training:
            dims = [0, *range(2, x.ndim)]  # every axis but the channel
            mu_b = x.mean(dims)  # (C,)
            var_b = x.var(dims, unbiased=False)
            sigma_b = torch.sqrt(var_b + self.eps)
            r = (sigma_b / sigma).clamp(1 / self.r_max, self.r_max).detach()
            d = ((mu_b - self.running_mean) / sigma).clamp(-self.d_max, self.d_max).detach()
            xhat = (x - self._along(mu_b, x.ndim)) / self._along(sigma_b, x.ndim)
            xhat = xhat * self._along(r, x.ndim) + self._along(d, x.ndim)
            n = x.numel() // x.shape[1]
            with torch.no_grad():  # torch's update: the unbiased batch variance
                m = self.momentum
                self.running_mean.mul_(1 - m).add_(m * mu_b)
                self.running_var.mul_(1 - m).add_(m * var_b * n / max(n - 1, 1))
                self.last_r.copy_(r)
                self.last_d.copy_(d)
        else:
            xhat = (x - self._along(self.running_mean, x.ndim)) / self._along(sigma, x.ndim)
        return xhat * self._along(self.weight, x.ndim) + self._along(self.bias, x.ndim)

    def extra_repr(self) -> str:
        return (
            f"{self.weight.numel()}, r_max={self.r_max:g}, d_max={self.d_max:g}, "
            f"momentum={self.momentum:g}, eps={self.eps:g}"
        )
