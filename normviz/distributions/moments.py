"""Moments of a method's statistic groups, read off its contract.

A method's statistic groups are the pooled dimensions of its contract's expanded
view, (…, G, C/G, …): every function here takes the resolved `Contract` instead of
restating a method's axes.
"""

from __future__ import annotations

import pandas as pd
import torch

from normviz.core import Contract, as_tensor
from normviz.layouts import LAYOUTS

MEAN_TOL = 1e-3  # |mean| below this counts as "mean 0"
VAR_TOL = 1e-2  # |variance − 1| below this counts as "variance 1"


def expanded_names(con: Contract) -> list[str]:
    """Names of the dimensions of `con.expanded_shape`: (…, G or C, C/G, …)."""
    lay = con.layout_obj
    c = lay.channel_axis
    ch = "G" if con.method_obj.grouped else lay.channel
    return [*lay.axes[:c], ch, f"{lay.channel}/G", *lay.axes[c + 1 :]]


def reduce(x: torch.Tensor, dims: tuple[int, ...]) -> tuple[torch.Tensor, ...]:
    """(mean, variance, mean square) over `dims`, two passes, flattened to float64.

    Two plain means instead of torch.var_mean: several times faster on strided
    dimensions, and subtracting the mean first keeps the variance exact enough.
    """
    mean = x.mean(dims, keepdim=True)
    var = (x - mean).square_().mean(dims).reshape(-1).double()
    mean = mean.reshape(-1).double()
    return mean, var, var + mean.square()  # E[x²] = σ² + μ², without a third pass


def group_moments(x: torch.Tensor, con: Contract) -> tuple[torch.Tensor, ...]:
    """(mean, variance, mean square) of every statistic group, flat, in group-id order."""
    return reduce(x.reshape(con.expanded_shape), con.reduce_dims)


def same_groups(a: Contract, b: Contract) -> bool:
    """True when two contracts pool exactly the same values."""
    return a.stat_shape == b.stat_shape and a.expanded_shape == b.expanded_shape


def channel_moments(y: torch.Tensor, layout: str) -> pd.DataFrame:
    """Mean and standard deviation of each channel over every other axis."""
    t = as_tensor(y)
    c = LAYOUTS[layout].channel_axis
    mean, var, _ = reduce(t, tuple(d for d in range(t.ndim) if d != c))
    return pd.DataFrame({"mean": mean.numpy(), "std": var.sqrt().numpy()}).rename_axis("channel")
