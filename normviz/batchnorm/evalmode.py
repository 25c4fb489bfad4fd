"""Evaluation mode written out: the formula, determinism, and eval() against no_grad().

A real nn.BatchNorm with γ and β away from 1 and 0 tracks the lab's training batches;
then, on held-out data: evaluation mode written out by hand against the module, one
sample in many batches (training mode moves its output, evaluation mode does not),
the four combinations of train()/eval() and torch.no_grad(), and InstanceNorm with
and without running statistics.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch
import torch.nn.functional as F
from torch import nn

from normviz import style
from normviz.batchnorm import stream
from normviz.batchnorm.lab import HELD_OUT, TRAIN_SAMPLES, LabSetup, check, one_thread
from normviz.batchnorm.plot import BATCH, RUNNING, rounded
from normviz.figures.spec import Spec, trace
from normviz.knobs import Value
from normviz.sections import Extra, Progress, Section

INTRO = (
    "In evaluation mode BatchNorm is a fixed per-channel affine map: it normalizes with "
    "the running statistics, which no longer change, so the same input always gives the "
    "same output, whatever else is in the batch, even a batch of one. That determinism "
    "is a main reason for keeping running statistics. Two switches are easy to confuse: "
    "`model.eval()` picks the statistics, `torch.no_grad()` only stops autograd."
)
FORMULA = (
    r"$$y = \gamma \cdot \frac{x - \mathrm{running\_mean}}"
    r"{\sqrt{\mathrm{running\_var} + \varepsilon}} + \beta$$"
)
MAX_TRACK = 200  # training batches the module tracks before the demo
DRAWS = 20  # batches the same sample is put in


@dataclass(frozen=True)
class Case:
    """One forward pass of a copy of the trained layer: a mode and a grad setting."""

    mode: str  # "train" or "eval"
    no_grad: bool
    batch_stats: bool  # the output equals normalization with the batch's own statistics
    counter_delta: int  # change of num_batches_tracked
    running_moved: bool  # running_mean changed
    requires_grad: bool  # the output is part of an autograd graph


@dataclass(frozen=True)
class EvalMode:
    formula_diff: float  # max |module in eval − formula by hand|
    train_values: np.ndarray  # (DRAWS,) the probe's first value in training mode, per batch
    eval_values: np.ndarray  # (DRAWS,) the same in evaluation mode
    cases: tuple[Case, ...]
    instance: tuple[float, float] | None  # train/eval max diff: default, tracked (None: refused)
    tracked: int  # batches the layer tracked


def _cases(bn: nn.Module, x: torch.Tensor, eps: float) -> tuple[Case, ...]:
    own = F.batch_norm(x, None, None, bn.weight, bn.bias, True, 0.0, eps).detach()
    out = []
    for mode in ("train", "eval"):
        for no_grad in (False, True):
            m = copy.deepcopy(bn).train(mode == "train")
            before, count = m.running_mean.clone(), int(m.num_batches_tracked)
            with torch.no_grad() if no_grad else nullcontext():
                y = m(x)
            out.append(
                Case(
                    mode,
                    no_grad,
                    bool((y.detach() - own).abs().max() < 1e-5),
                    int(m.num_batches_tracked) - count,
                    not torch.equal(m.running_mean, before),
                    y.requires_grad,
                )
            )
    return tuple(out)


def _instance(setup: LabSetup, ds: stream.Dataset, idx: torch.Tensor) -> tuple[float, float] | None:
    """Max |train() − eval()| of InstanceNorm, default and with track_running_stats=True."""
    cls = nn.InstanceNorm1d if setup.layout == "BTC" else nn.InstanceNorm2d
    x = stream.to_torch_layout(ds.held_out[:8], setup.layout)
    diffs = []
    try:
        for track in (False, True):
            inst = cls(setup.C, eps=setup.eps, track_running_stats=track)
            with torch.no_grad():
                for rows in idx:
                    inst.train()(stream.to_torch_layout(ds.train[rows], setup.layout))
                diffs.append(float((inst.train()(x) - inst.eval()(x)).abs().max()))
    except ValueError:  # one position per channel: InstanceNorm refuses to train
        return None
    return diffs[0], diffs[1]


@one_thread()
def eval_demo(setup: LabSetup) -> EvalMode:
    check(setup)
    ds = stream.make_dataset(setup)
    L = setup.layout
    bn = stream.torch_batchnorm(
        L, setup.C, setup.eps, stream.torch_momentum(setup.momentum, setup.convention)
    )
    g = torch.Generator().manual_seed(setup.seed)
    steps = min(setup.steps, MAX_TRACK)
    idx = stream.batch_indices(TRAIN_SAMPLES, setup.batch_size, steps, setup.seed)
    with torch.no_grad():
        bn.weight.copy_(1 + 0.5 * torch.randn(setup.C, generator=g))  # as if learned
        bn.bias.copy_(0.5 * torch.randn(setup.C, generator=g))
        for rows in idx:
            bn.train()(stream.to_torch_layout(ds.train[rows], L))
    b = max(2, setup.batch_size)
    x = stream.to_torch_layout(ds.held_out[:b], L)
    view = [1] * x.dim()
    view[1] = -1  # channels-first
    with torch.no_grad():
        y = bn.eval()(x)
        rm, rv = bn.running_mean.reshape(view), bn.running_var.reshape(view)
        by_hand = bn.weight.reshape(view) * (x - rm) / torch.sqrt(rv + bn.eps)
        by_hand = by_hand + bn.bias.reshape(view)
        train_v, eval_v = [], []
        probe = ds.held_out[:1]
        for _ in range(DRAWS):
            mates = torch.randint(1, HELD_OUT, (b - 1,), generator=g)
            batch = stream.to_torch_layout(torch.cat([probe, ds.held_out[mates]]), L)
            first = (0,) * x.dim()  # sample 0, channel 0, position 0
            train_v.append(float(copy.deepcopy(bn).train()(batch)[first]))
            eval_v.append(float(bn.eval()(batch)[first]))
    return EvalMode(
        float((y - by_hand).abs().max()),
        np.asarray(train_v),
        np.asarray(eval_v),
        _cases(bn, x, setup.eps),
        _instance(setup, ds, idx),
        steps,
    )


def run(setup: LabSetup, knobs: Mapping[str, Value], progress: Progress) -> EvalMode:
    progress(0.0, "Tracking the training batches with a real nn.BatchNorm…")
    return eval_demo(setup)


def figure(res: EvalMode, presenter: bool = False) -> go.Figure:
    """The same sample's first value in DRAWS batches: training mode moves, evaluation does not."""
    fig = Spec()
    xs = list(range(1, len(res.train_values) + 1))
    for vals, name, colour, symbol in (
        (res.train_values, "training mode (batch statistics)", BATCH, "circle"),
        (res.eval_values, "evaluation mode (running statistics)", RUNNING, "diamond"),
    ):
        fig.add_trace(
            trace(
                "scatter",
                x=xs,
                y=rounded(vals, 5),
                mode="markers+lines",
                marker={"size": 10, "symbol": symbol, "color": colour},
                line={"color": colour, "width": 2},
                name=name,
            )
        )
    fig.update_xaxes(title="batch (the same sample, other batch-mates)", dtick=1)
    fig.update_yaxes(title="the sample's first value in channel 0")
    fig.update_layout(title="Same input, different batches", legend=style.LEGEND_BELOW)
    return style.apply(fig, presenter, height=420).figure()


def table(res: EvalMode) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "mode": [f"model.{c.mode}()" for c in res.cases],
            "torch.no_grad()": ["yes" if c.no_grad else "no" for c in res.cases],
            "normalizes with": [
                "batch statistics" if c.batch_stats else "running statistics" for c in res.cases
            ],
            "num_batches_tracked": [f"+{c.counter_delta}" for c in res.cases],
            "running_mean moved": ["yes" if c.running_moved else "no" for c in res.cases],
            "output tracks gradients": ["yes" if c.requires_grad else "no" for c in res.cases],
        }
    ).set_index(["mode", "torch.no_grad()"])


def _case(res: EvalMode, mode: str, no_grad: bool) -> Case:
    return next(c for c in res.cases if c.mode == mode and c.no_grad == no_grad)


def notes(res: EvalMode) -> Sequence[str]:
    spread_train = float(np.ptp(res.train_values))
    spread_eval = float(np.ptp(res.eval_values))
    out = [
        f"Written out by hand, the formula above matches nn.BatchNorm in evaluation mode to "
        f"{res.formula_diff:.1e} on a held-out batch (the layer tracked {res.tracked} "
        "training batches first).",
        f"The same sample in {len(res.train_values)} batches with other batch-mates: in "
        f"training mode its first value spans {spread_train:.3g}; in evaluation mode "
        + ("it is the same every time." if spread_eval == 0 else f"it spans {spread_eval:.1e}."),
    ]
    ng = _case(res, "train", True)
    ev = _case(res, "eval", False)
    out.append(
        "`model.eval()` is not `torch.no_grad()`: under `no_grad()` alone, in training "
        f"mode, BatchNorm normalizes with {'batch' if ng.batch_stats else 'running'} "
        f"statistics and num_batches_tracked grows by {ng.counter_delta}"
        + (" (the running statistics move)" if ng.running_moved else "")
        + "; `eval()` alone normalizes with "
        + f"{'batch' if ev.batch_stats else 'running'} statistics, and its output "
        + ("still tracks gradients" if ev.requires_grad else "tracks no gradients")
        + ". For inference use both."
    )
    if res.instance is None:
        out.append("InstanceNorm is not shown: this shape has one position per channel.")
    else:
        plain, tracked = res.instance
        out.append(
            f"InstanceNorm with torch's default track_running_stats=False gives the same "
            f"output in train() and eval() (max difference {plain:.1e}); with "
            f"track_running_stats=True, after the same {res.tracked} batches, eval() differs "
            f"by up to {tracked:.3g}."
        )
    return tuple(out)


def extras(res: EvalMode) -> Sequence[Extra]:
    return (Extra("markdown", FORMULA, top=True),)


SECTION = Section(
    "eval", "Evaluation mode", INTRO, run, figure=figure, table=table, notes=notes, extras=extras
)
