"""Weight Standardization (Qiao et al. 2019): standardize each conv
filter's weights, not the activations.

Each output channel i of a conv has I = C_in · kH · kW weights (its fan-in). WS replaces
them, in every forward pass, by

    Ŵ_i = (W_i − μ_i) / sqrt(σ²_i + ε),   μ_i, σ²_i: mean and biased variance over W_i

and the gradient flows through μ_i and σ²_i back to W. There is no γ or β on Ŵ: the
activation norm after the conv (GroupNorm or BatchNorm in the paper) rescales anyway.
WS is therefore not a `normviz.methods` entry: it pools weights, not activations, so it
has no axis contract; it is a conv layer that pairs with one. torch has no WS module;
this is the reference, tested against the formula in float64 and against autograd.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

EPS = 1e-5  # inside the square root, as in the paper's σ (its code adds 1e-5 to σ instead)


def standardize(w: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """Ŵ: each w[i] (the filter of output channel i, all its other axes) to mean 0, variance 1."""
    flat = w.flatten(1)  # (C_out, I): one row per filter
    mu = flat.mean(1, keepdim=True)
    var = flat.var(1, unbiased=False, keepdim=True)
    return ((flat - mu) / torch.sqrt(var + eps)).view_as(w)


class WSConv2d(nn.Conv2d):
    """nn.Conv2d whose forward convolves with `standardize(weight)` (the weight stays raw)."""

    def __init__(self, *args, ws_eps: float = EPS, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.ws_eps = ws_eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = standardize(self.weight, self.ws_eps)
        return F.conv2d(x, w, self.bias, self.stride, self.padding, self.dilation, self.groups)

    def extra_repr(self) -> str:
        return super().extra_repr() + f", ws_eps={self.ws_eps:g}"
