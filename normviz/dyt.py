"""Dynamic Tanh (Zhu, Chen, He, LeCun & Liu, CVPR 2025): y = γ ⊙ tanh(α·x) + β.

torch has no DyT module; this is the reference the registry builds. No statistic is
computed: every value goes through the same S-curve on its own, one learned scalar α
sets how soon it saturates, and γ, β (one per channel) give the scale and shift back.
"""

from __future__ import annotations

import torch
from torch import nn

ALPHA0 = 0.5  # the authors' default initial α (their code's alpha_init_value)


class DyT(nn.Module):
    """y = weight ⊙ tanh(alpha · x) + bias, weight and bias along `channel_dim`."""

    def __init__(self, num_features: int, alpha0: float = ALPHA0, channel_dim: int = -1) -> None:
        super().__init__()
        self.channel_dim = channel_dim  # -1 for (B, T, C), 1 for (N, C, H, W)
        self.alpha = nn.Parameter(torch.full((1,), float(alpha0)))  # one scalar for the layer
        self.weight = nn.Parameter(torch.ones(num_features))  # γ, (C,)
        self.bias = nn.Parameter(torch.zeros(num_features))  # β, (C,)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # channels moved last so γ and β broadcast, and back (a plain int: torch.fx traces it)
        t = torch.movedim(torch.tanh(self.alpha * x), self.channel_dim, -1)
        return torch.movedim(t * self.weight + self.bias, -1, self.channel_dim)

    def extra_repr(self) -> str:
        return f"{self.weight.numel()}, alpha={self.alpha.item():g}, channel_dim={self.channel_dim}"
