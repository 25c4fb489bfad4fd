"""The formula written out, d2l style: a second oracle for normviz.core in the tests.

`normalize()` here reads the registry for which axes to pool and nothing else: no
contract, no fused kernel, every step in float64, the statistic kept broadcastable
to x. It is slow and exact; normviz.core is fast and must agree with it.
"""

from __future__ import annotations

import torch

from normviz.layouts import LAYOUTS
from normviz.methods import METHODS


def normalize(
    x: torch.Tensor,
    method: str,
    layout: str,
    *,
    groups: int | None = None,
    axes: tuple[str, ...] = (),
    centred: bool = True,
    eps: float = 1e-5,
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """(y, μ, σ²) in float64, μ and σ² of x's shape (each value's own statistic).

    `axes` names the pooled axes for method="custom"; `groups` is GroupNorm's G.
    """
    lay = LAYOUTS[layout]
    m = METHODS[method]
    pooled = axes if method == "custom" else m.reduces[layout]
    centred = centred if method == "custom" else m.centred
    c = lay.channel_axis
    x = x.double()
    # GroupNorm: split C into (G, C/G) and pool C/G too; everyone else has G = C
    G = (groups or 1) if m.grouped else x.shape[c]
    xg = x.reshape(*x.shape[:c], G, x.shape[c] // G, *x.shape[c + 1 :])  # (.., G, C/G, ..)
    dims = []  # the dims of xg to pool
    for d in (lay.axes.index(a) for a in pooled):
        dims += [d] if d < c else [c, c + 1] if d == c else [d + 1]
    if m.grouped:
        dims.append(c + 1)  # the C/G channels inside each group
    if centred:
        mean = xg.mean(dim=dims, keepdim=True)
        var = ((xg - mean) ** 2).mean(dim=dims, keepdim=True)
        x_hat = (xg - mean) / torch.sqrt(var + eps)
    else:
        mean = None
        var = (xg**2).mean(dim=dims, keepdim=True)
        x_hat = xg / torch.sqrt(var + eps)
    y = x_hat.reshape(x.shape)
    shape = [1] * x.dim()
    shape[c] = x.shape[c]
    if weight is not None:
        y = y * weight.double().reshape(shape)
    if bias is not None:
        y = y + bias.double().reshape(shape)

    def spread(stat: torch.Tensor) -> torch.Tensor:
        return stat.expand(xg.shape).reshape(x.shape)

    return y, None if mean is None else spread(mean), spread(var)
