"""The worked example: BatchNorm and LayerNorm on a small matrix, step by step.

The matrix is a batch of N samples with C features each, shape (N, C), as in the
source text (`x.mean(0)` averages over the samples) and as `nn.BatchNorm1d` takes
it. BatchNorm pools axis 0, the samples: one mean and variance per feature (a
column). LayerNorm pools axis 1, the features: one mean and variance per sample (a
row). Which of the two a method pools is read from its axis contract, not restated
here. Every number comes from normviz.normalize and is checked against torch.nn.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from torch import nn

from normviz.core import contract, normalize
from normviz.errors import NormConfigError
from normviz.methods import METHODS

# The source text's example and the numbers it prints (rounded to 3 decimals).
SOURCE_MATRIX: tuple[tuple[float, ...], ...] = ((1.0, 2.0, 7.0), (3.0, 4.0, 9.0))
SOURCE_BATCH_MEANS: tuple[float, ...] = (0.0, 0.0, 0.0)
SOURCE_BATCH_VARS: tuple[float, ...] = (1.0, 1.0, 1.0)
SOURCE_LAYER_ROW0: tuple[float, ...] = (-0.889, -0.508, 1.397)
EPS = 1e-5
METHODS_SHOWN: tuple[str, ...] = ("batch", "layer")
MAX_SIZE = 8  # rows and columns an edited matrix may have
MAX_ABS = 1e6  # larger entries make the squares in the variance unreadable
TORCH_TOL = 1e-6  # float64: ours and torch.nn agree far below this
TORCH_NAME: dict[str, str] = {"batch": "BatchNorm1d", "layer": "LayerNorm"}


Matrix = tuple[tuple[float, ...], ...]  # the page's setup: the edited matrix, row by row


class WorkedInputError(NormConfigError):
    """The edited matrix cannot be used; the message names the cell or the size."""


def as_matrix(data: object) -> np.ndarray:
    """A float64 (rows, cols) array from a list of rows or a DataFrame, checked.

    Raises:
        WorkedInputError: not 2-D, too large, or a cell that is empty or not a number.
    """
    if isinstance(data, pd.DataFrame):
        data = data.to_numpy()
    try:
        x = np.array(data, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise WorkedInputError(f"every cell must be a number ({e})") from e
    if x.ndim != 2 or 0 in x.shape:
        raise WorkedInputError(f"the matrix must have rows and columns; got shape {x.shape}")
    if x.shape[0] > MAX_SIZE or x.shape[1] > MAX_SIZE:
        raise WorkedInputError(
            f"use at most {MAX_SIZE} rows and {MAX_SIZE} columns; got {x.shape[0]}×{x.shape[1]}"
        )
    bad = np.argwhere(~np.isfinite(x) | (np.abs(x) > MAX_ABS))
    if bad.size:
        r, c = (int(i) + 1 for i in bad[0])
        raise WorkedInputError(
            f"row {r}, column {c} is empty or not a number between −{MAX_ABS:g} and {MAX_ABS:g}: "
            "type a number there"
        )
    return x


def setup_from(data: object) -> Matrix:
    """The page's setup from the edited grid (a DataFrame or a list of rows), checked.

    Raises:
        WorkedInputError: as `as_matrix`.
    """
    return tuple(tuple(float(v) for v in row) for row in as_matrix(data))


def pools(method: str) -> str:
    """ "column" or "row": what one statistic pools when the matrix is a batch (N, C).

    The matrix enters the BTC layout as (N, 1, C), N samples of one position each: a
    contract that pools the samples (B) pools a column, one that pools C pools a row.
    """
    axes = contract(method, "BTC", (2, 1, 2)).axes
    return "column" if "B" in axes else "row"


def pooled_axis(method: str) -> str:
    """In words, the axis of the (N, C) matrix one statistic pools."""
    if pools(method) == "column":
        return "axis 0, the N samples (one statistic per feature)"
    return "axis 1, the C features (one statistic per sample)"


@dataclass(frozen=True)
class Statistic:
    """One mean/variance and the values it normalizes: a column (BatchNorm) or a row."""

    index: int  # 0-based column or row
    values: tuple[float, ...]
    mean: float
    var: float  # biased (divide by m)
    outputs: tuple[float, ...]


@dataclass(frozen=True)
class MethodSteps:
    """A method applied to the matrix: its statistics, its output, and the torch check."""

    method: str
    pools: str  # "column" or "row"
    stats: tuple[Statistic, ...]
    output: np.ndarray  # same shape as the matrix
    torch_output: np.ndarray  # the same thing from torch.nn
    eps: float

    @property
    def label(self) -> str:
        return METHODS[self.method].label

    @property
    def torch_max_diff(self) -> float:
        return float(np.max(np.abs(self.output - self.torch_output)))

    @property
    def matches_torch(self) -> bool:
        return self.torch_max_diff <= TORCH_TOL


def torch_reference(x: np.ndarray, method: str, eps: float = EPS) -> np.ndarray:
    """The same normalization by torch.nn: BatchNorm1d (training) or LayerNorm on (N, C)."""
    t = torch.from_numpy(np.ascontiguousarray(x))
    if method == "batch":
        layer: nn.Module = nn.BatchNorm1d(
            x.shape[1], eps=eps, affine=False, track_running_stats=False, dtype=t.dtype
        )
    elif method == "layer":
        layer = nn.LayerNorm(x.shape[1], eps=eps, elementwise_affine=False, dtype=t.dtype)
    else:
        raise WorkedInputError(f"the worked example shows {', '.join(METHODS_SHOWN)}, not {method}")
    with torch.no_grad():
        return layer.train()(t).numpy()


def method_steps(data: object, method: str, eps: float = EPS) -> MethodSteps:
    """normalize() on the matrix as a batch of N samples (N, C), split into its statistics.

    Raises:
        WorkedInputError: a bad matrix or method.
        NormConfigError: the method cannot run on it (BatchNorm with a single row).
    """
    if method not in METHODS_SHOWN:
        raise WorkedInputError(f"the worked example shows {', '.join(METHODS_SHOWN)}, not {method}")
    x = as_matrix(data)
    res = normalize(torch.from_numpy(x)[:, None, :], method, "BTC", eps=eps)  # (N, 1, C)
    out = res.output[:, 0].numpy()
    assert res.mean is not None  # both methods shown are centred
    mean = res.mean[:, 0].numpy()  # (1, C) per column or (N, 1) per row
    var = res.var[:, 0].numpy()
    along = pools(method)
    view = (lambda a: a.T) if along == "column" else (lambda a: a)
    stats = tuple(
        Statistic(
            index=i,
            values=tuple(float(v) for v in row),
            mean=float(m),
            var=float(s),
            outputs=tuple(float(v) for v in orow),
        )
        for i, (row, m, s, orow) in enumerate(
            zip(view(x), view(mean).ravel(), view(var).ravel(), view(out), strict=True)
        )
    )
    return MethodSteps(method, along, stats, out, torch_reference(x, method, eps), eps)


# ---- formatting ------------------------------------------------------------------


def fmt(v: float, decimals: int = 3) -> str:
    """A number rounded as the source prints it; −0.000 shows as 0.000."""
    r = round(float(v), decimals)
    if r == 0:
        r = 0.0
    if float(r).is_integer() and abs(r) < 1e6:
        return str(int(r))
    return f"{r:.{decimals}f}".rstrip("0").rstrip(".")


def fmt_list(values: Sequence[float] | np.ndarray, decimals: int = 3) -> str:
    return "[" + ", ".join(fmt(v, decimals) for v in values) + "]"


def _tex(v: float) -> str:
    s = fmt(v)
    return f"({s})" if s.startswith("-") else s


def eps_tex(eps: float) -> str:
    """ε in LaTeX: 10^{-5} for a power of ten, else its short decimal form."""
    if eps > 0 and float(math.log10(eps)).is_integer():
        return f"10^{{{int(math.log10(eps))}}}"
    return f"{eps:g}"


def statistic_latex(
    stat: Statistic, eps: float = EPS, position: int = 0, cell: tuple[int, int] | None = None
) -> tuple[str, str, str]:
    """Three LaTeX lines for one statistic: μ, σ², and its output at `position` (0-based)
    worked through, labelled y_k (k = position + 1) or, given a 1-based `cell`, y_{row,col}."""
    m = len(stat.values)
    mu = rf"\mu = \frac{{{' + '.join(_tex(v) for v in stat.values)}}}{{{m}}} = {fmt(stat.mean)}"
    var = (
        r"\sigma^2 = \frac{"
        + " + ".join(f"({_tex(v)} - {_tex(stat.mean)})^2" for v in stat.values)
        + rf"}}{{{m}}} = {fmt(stat.var)}"
    )
    num = f"{_tex(stat.values[position])} - {_tex(stat.mean)}"
    den = rf"\sqrt{{{fmt(stat.var)} + {eps_tex(eps)}}}"
    name = f"y_{position + 1}" if cell is None else f"y_{{{cell[0]},{cell[1]}}}"
    y = rf"{name} = \frac{{{num}}}{{{den}}} = {fmt(stat.outputs[position])}"
    return mu, var, y
