"""Freezing: which state one optimizer step changes on a real nn.BatchNorm, per mode."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd
import plotly.graph_objects as go
import torch

from normviz import style
from normviz.batchnorm.lab import LabSetup, check, one_thread
from normviz.batchnorm.stream import make_dataset, to_torch_layout, torch_batchnorm, torch_momentum
from normviz.figures.spec import Spec, trace
from normviz.knobs import Value
from normviz.sections import Progress, Section

INTRO = (
    'Fine-tuning often "freezes" BatchNorm. A real `nn.BatchNorm` takes one SGD step in '
    "each setup below. `requires_grad=False` only stops γ and β; the running buffers are "
    "not parameters and keep moving as long as the layer is in `train()` mode. A layer "
    "is only fully frozen with both `eval()` and `requires_grad=False`."
)
STATE_NAMES: tuple[str, ...] = (
    "weight",
    "bias",
    "running_mean",
    "running_var",
    "num_batches_tracked",
)


@dataclass(frozen=True)
class FreezeRow:
    """One mode/requires_grad combination and which state entries one step changed."""

    training: bool
    requires_grad: bool
    changed: tuple[bool, ...]  # in STATE_NAMES order


@dataclass(frozen=True)
class FreezeResult:
    """The four freezing setups, one row each."""

    names: tuple[str, ...]
    rows: tuple[FreezeRow, ...]
    lr: float


@one_thread()
def freeze_demo(setup: LabSetup, lr: float = 0.1) -> FreezeResult:
    """One SGD step on a real nn.BatchNorm in each of the four freezing setups.

    γ and β only move when they require gradients; the running buffers only move
    in training mode, whatever requires_grad says.
    """
    check(setup)
    ds = make_dataset(setup)
    x = to_torch_layout(ds.train[: setup.batch_size], setup.layout)
    rows = []
    for training in (True, False):
        for requires_grad in (True, False):
            bn = torch_batchnorm(
                setup.layout, setup.C, setup.eps, torch_momentum(setup.momentum, setup.convention)
            )
            bn.train(training)
            for p in bn.parameters():
                p.requires_grad_(requires_grad)
            opt = torch.optim.SGD(bn.parameters(), lr=lr)
            before = {k: v.clone() for k, v in bn.state_dict().items()}
            # the input carries a gradient, as if a trainable layer came first: backward always
            # has a path, even when γ and β are frozen
            xin = x.clone().requires_grad_(True)
            loss = (bn(xin) - 1.0).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            after = bn.state_dict()
            changed = tuple(not torch.equal(before[k], after[k]) for k in STATE_NAMES)
            rows.append(FreezeRow(training, requires_grad, changed))
    return FreezeResult(STATE_NAMES, tuple(rows), lr)


def run(setup: LabSetup, knobs: Mapping[str, Value], progress: Progress) -> FreezeResult:
    """The section: one real step per setup."""
    progress(0.0, "Running real optimizer steps…")
    return freeze_demo(setup)


def figure(res: FreezeResult, presenter: bool = False) -> go.Figure:
    """Which state entries one optimizer step changed, per setup."""
    rows = [
        f"{'train()' if r.training else 'eval()'}, requires_grad={r.requires_grad}"
        for r in res.rows
    ]
    z = [[1 if c else 0 for c in r.changed] for r in res.rows]
    text = [["changed" if c else "unchanged" for c in r.changed] for r in res.rows]
    fig = Spec().add_trace(
        trace(
            "heatmap",
            z=z,
            x=list(res.names),
            y=rows,
            text=text,
            texttemplate="%{text}",
            colorscale=[[0, style.MUTED], [1, style.PALETTE[0]]],
            zmin=0,
            zmax=1,
            showscale=False,
            xgap=3,
            ygap=3,
            hovertemplate="%{y}<br>%{x}: %{text}<extra></extra>",
        )
    )
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(title="One optimizer step on a real nn.BatchNorm")
    return style.apply(fig, presenter, height=360).figure()


def table(res: FreezeResult) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "mode": "train()" if r.training else "eval()",
                "requires_grad": r.requires_grad,
                **{n: "changed" if c else "—" for n, c in zip(res.names, r.changed, strict=True)},
            }
            for r in res.rows
        ]
    )


def notes(res: FreezeResult) -> Sequence[str]:
    frozen = [
        f"`{'train()' if r.training else 'eval()'}` with requires_grad={r.requires_grad}"
        for r in res.rows
        if not any(r.changed)
    ]
    return (f"Nothing changed only with {' and '.join(frozen) or 'no setup'}.",)


SECTION = Section("freeze", "Freezing", INTRO, run, figure=figure, table=table, notes=notes)
