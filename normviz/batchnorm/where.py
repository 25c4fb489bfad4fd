"""Where BatchNorm sits relative to the activation: three orders of Linear, BatchNorm, ReLU.

The lab's data, each position a row of C features (what a 1×1 convolution sees), go
through one Linear(C, C), one BatchNorm1d(C) and one ReLU in three orders, in
training mode. Measured: what the ReLU receives, what comes out, and whether the
Linear's bias still does anything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch
from torch import nn

from normviz import sources, style
from normviz.batchnorm import stream
from normviz.batchnorm.lab import LabSetup, check, one_thread
from normviz.batchnorm.plot import rounded
from normviz.figures.spec import Spec, trace
from normviz.knobs import Value
from normviz.layouts import LAYOUTS
from normviz.sections import Progress, Section

ORDERS: dict[str, tuple[str, ...]] = {
    "Linear → BN → ReLU": ("linear", "bn", "relu"),
    "BN → ReLU → Linear": ("bn", "relu", "linear"),
    "Linear → ReLU → BN": ("linear", "relu", "bn"),
}
INTRO = (
    f"{sources.cite('ioffe2015')} put BatchNorm right after the weight layer and before "
    "the nonlinearity (Linear or Conv → BN → ReLU). Pre-activation networks "
    f"({sources.cite('he2016')}) run BN → ReLU → Conv inside each residual branch, so "
    "the skip path stays a pure identity. Some models put BN after the activation. Below, "
    "the lab's data (each position a row of C features, as a 1×1 convolution sees them) go "
    "through one Linear, one BatchNorm1d and one ReLU in each order, in training mode."
)
ROWS = 4096  # rows (sample positions) fed through the three orders
BINS = 60


@dataclass(frozen=True)
class OrderStats:
    """One order: what the ReLU receives and returns, and what the Linear's bias does."""

    name: str
    relu_in_mean: float  # mean over channels of the ReLU input's mean
    relu_in_std: float  # mean over channels of the ReLU input's std
    zeroed: float  # share of ReLU inputs below 0 (set to 0)
    out_mean: float  # mean over channels of |output mean|
    out_std: float  # mean over channels of the output's std
    bias_effect: float  # max |Δoutput| when every Linear bias grows by 1
    bias_grad: float  # ‖∂loss/∂bias‖ for loss = mean(output²)
    counts: np.ndarray  # histogram of the ReLU's inputs
    edges: np.ndarray


@dataclass(frozen=True)
class Orders:
    orders: tuple[OrderStats, ...]


def rows_of(setup: LabSetup) -> torch.Tensor:
    """The lab's training data as (rows, C): one row per sample position."""
    ds = stream.make_dataset(setup)
    x = ds.train.movedim(LAYOUTS[setup.layout].channel_axis, -1).reshape(-1, setup.C)
    return x[:ROWS]


def _through(parts: dict[str, nn.Module], order: tuple[str, ...], x: torch.Tensor):
    """(ReLU input, output) of the modules applied in `order`."""
    h, relu_in = x, x
    for name in order:
        if name == "relu":
            relu_in = h
        h = parts[name](h)
    return relu_in, h


def measure(name: str, x: torch.Tensor, seed: int) -> OrderStats:
    """One order, with a Linear initialized from `seed` (torch's default init) and a fresh BN."""
    C = x.shape[1]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        linear = nn.Linear(C, C)
    parts = {"linear": linear, "bn": nn.BatchNorm1d(C).train(), "relu": nn.ReLU()}
    order = ORDERS[name]
    relu_in, y = _through(parts, order, x)
    (bias_grad,) = torch.autograd.grad(y.square().mean(), [linear.bias])
    with torch.no_grad():
        linear.bias += 1.0
        _, y_shift = _through(parts, order, x)
    r, yd = relu_in.detach().double(), y.detach().double()
    counts, edges = np.histogram(stream.to_np(r.reshape(-1)), bins=BINS)
    return OrderStats(
        name,
        float(r.mean(0).mean()),
        float(r.std(0).mean()),
        float((r < 0).double().mean()),
        float(yd.mean(0).abs().mean()),
        float(yd.std(0).mean()),
        float((y_shift.double() - yd).abs().max()),
        float(bias_grad.norm()),
        counts,
        edges,
    )


@one_thread()
def orders_demo(setup: LabSetup) -> Orders:
    check(setup)
    x = rows_of(setup)
    return Orders(tuple(measure(name, x, setup.seed) for name in ORDERS))


def run(setup: LabSetup, knobs: Mapping[str, Value], progress: Progress) -> Orders:
    progress(0.0, "Three orders of Linear, BatchNorm and ReLU…")
    return orders_demo(setup)


def figure(res: Orders, presenter: bool = False) -> go.Figure:
    """Histograms of what the ReLU receives in each order; the ReLU zeroes everything left of 0."""
    fig = Spec()
    colours = (style.METHOD_COLOURS["batch"], style.PALETTE[2], style.BEFORE)
    dashes = ("solid", "dash", "dot")  # the orders differ in dash too, not in colour alone
    for o, colour, dash in zip(res.orders, colours, dashes, strict=True):
        centres = (o.edges[:-1] + o.edges[1:]) / 2
        share = o.counts / max(1, o.counts.sum())
        fig.add_trace(
            trace(
                "scatter",
                x=rounded(centres, 4),
                y=rounded(share, 5),
                mode="lines",
                line={"color": colour, "width": 3, "shape": "hvh", "dash": dash},
                name=o.name,
            )
        )
    fig.add_vline(x=0, line={"color": style.SELECTED, "dash": "dash", "width": 2})
    fig.update_xaxes(title="value entering the ReLU (left of the dashed line → 0)")
    fig.update_yaxes(title="share of values")
    fig.update_layout(title="What the ReLU receives", legend=style.LEGEND_BELOW)
    return style.apply(fig, presenter, height=420).figure()


def table(res: Orders) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "order": [o.name for o in res.orders],
            "ReLU input: mean": [o.relu_in_mean for o in res.orders],
            "ReLU input: std": [o.relu_in_std for o in res.orders],
            "share zeroed by ReLU": [o.zeroed for o in res.orders],
            "output: |mean|": [o.out_mean for o in res.orders],
            "output: std": [o.out_std for o in res.orders],
            "max |Δoutput|, bias + 1": [o.bias_effect for o in res.orders],
            "‖∂loss/∂bias‖": [o.bias_grad for o in res.orders],
        }
    ).set_index("order")


DEAD = 1e-4  # a bias whose +1 moves the output by less than this does nothing


def _small(v: float) -> str:
    """A mean, with float32 rounding (|v| < 1e-4) shown as 0."""
    return "0" if abs(v) < DEAD else f"{v:.3g}"


def notes(res: Orders) -> Sequence[str]:
    out = []
    for o in res.orders:
        dead = o.bias_effect < DEAD
        bias = (
            f"the Linear's bias does nothing (bias + 1 moves the output by at most "
            f"{o.bias_effect:.1e}, its gradient is {o.bias_grad:.1e}): BN subtracts the mean "
            "right after it, so such layers are built with bias=False"
            if dead
            else "the Linear's bias matters (bias + 1 moves the output by up to "
            f"{o.bias_effect:.3g})"
        )
        out.append(
            f"- **{o.name}**: the ReLU receives values with mean {_small(o.relu_in_mean)} and "
            f"std {o.relu_in_std:.3g} per channel and zeroes {o.zeroed:.0%} of them; the "
            f"output has |mean| {_small(o.out_mean)} and std {o.out_std:.3g} per channel; "
            f"{bias}."
        )
    return tuple(out)


SECTION = Section("where", "Where BN sits", INTRO, run, figure=figure, table=table, notes=notes)
