"""Part of the model, not preprocessing: in training, gradients flow through μ and σ².

One channel of a batch of n samples (one value each, the first position of channel 0
of the lab's data) goes through torch's BatchNorm1d(1). torch's autograd gives the
Jacobian ∂y_i/∂x_j: in training mode every output depends on every input of the
batch, because μ and σ² do; in evaluation mode (fixed running statistics) the
Jacobian is diagonal. Standardizing with the batch's μ and σ² held constant, as a
preprocessing step would, gives that diagonal too, and a different gradient.
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
from normviz.knobs import Knob, Value
from normviz.sections import Progress, Section

INTRO = (
    "BatchNorm is a layer of the model, not a preprocessing step: in training, μ and σ² "
    "are computed from the batch inside the forward pass, and the backward pass "
    "differentiates through them. So the gradient of one sample's output depends on the "
    f"other samples of the batch, which is what lets {sources.cite('ioffe2015')} argue "
    "that a gradient step cannot simply shift or scale a layer's inputs behind "
    "BatchNorm's back. Below, one channel of a batch of n values goes through torch's "
    "`nn.BatchNorm1d(1)`, and torch's autograd gives the Jacobian ∂y_i/∂x_j."
)
SIZE = Knob("cp_n", 8, choices=(4, 8, 16), label="Batch of n values")
SHIFT = 3.0  # how far the last sample moves, in units of the batch's standard deviation
MODES: tuple[str, ...] = ("training mode", "evaluation mode")
TINY = 1e-12  # |∂y_i/∂x_j| below this is zero (float64 rounding)


def jacobian(bn: nn.BatchNorm1d, x: torch.Tensor) -> torch.Tensor:
    """(n, n) ∂y_i/∂x_j of `bn` on the column x (n,), by torch's autograd."""
    return torch.autograd.functional.jacobian(lambda v: bn(v.view(-1, 1)).view(-1), x)


def constant_stats_jacobian(x: torch.Tensor, eps: float) -> torch.Tensor:
    """The Jacobian with the batch's μ and σ² detached (standardizing as preprocessing)."""
    mu, var = x.mean().detach(), x.var(unbiased=False).detach()
    return torch.autograd.functional.jacobian(lambda v: (v - mu) / torch.sqrt(var + eps), x)


@dataclass(frozen=True, eq=False)
class Coupling:
    """The Jacobians of one channel's BatchNorm, and what moving one input does."""

    x: np.ndarray  # (n,) the batch
    train: np.ndarray  # (n, n) ∂y_i/∂x_j, training mode (batch statistics)
    eval: np.ndarray  # (n, n) evaluation mode (running statistics)
    preproc: np.ndarray  # (n, n) batch statistics held constant
    moved_diag: float  # ∂y_0/∂x_0 after the last sample moved by SHIFT standard deviations
    grad_sum: tuple[float, float]  # Σ_i ∂L/∂x_i through BN, and with constant statistics
    eps: float

    @property
    def n(self) -> int:
        return len(self.x)

    def off_diagonal(self, j: np.ndarray) -> float:
        """The largest |∂y_i/∂x_j| with i ≠ j."""
        return float(np.abs(j - np.diag(np.diag(j))).max())

    def coupled(self) -> int:
        """How many off-diagonal entries of the training-mode Jacobian are non-zero."""
        return int((np.abs(self.train) >= TINY).sum() - (np.abs(np.diag(self.train)) >= TINY).sum())


@one_thread()
def coupling(setup: LabSetup, n: int) -> Coupling:
    """The Jacobians of BatchNorm1d(1) on n values of the lab's data, in both modes."""
    check(setup)
    ds = stream.make_dataset(setup)
    c = 2 if setup.layout == "BTC" else 1  # the channel axis: (b, T, C) or (b, C, H, W)
    x = ds.train[:n].select(c, 0).reshape(n, -1)[:, 0].double()
    # momentum 0: a training-mode forward leaves the running statistics where they are
    bn = nn.BatchNorm1d(1, eps=setup.eps, momentum=0.0, dtype=torch.float64)
    bn.running_mean.fill_(float(ds.mean[0]))
    bn.running_var.fill_(float(ds.var[0]))
    j_train = jacobian(bn.train(), x)
    moved = x.clone()
    moved[-1] += SHIFT * x.std(unbiased=False)
    j_moved = jacobian(bn, moved)
    j_eval = jacobian(bn.eval(), x)
    j_pre = constant_stats_jacobian(x, setup.eps)
    w = torch.linspace(0.0, 1.0, n, dtype=torch.float64)  # dL/dy of a loss L = Σ w_i y_i
    return Coupling(
        x.numpy(),
        j_train.numpy(),
        j_eval.numpy(),
        j_pre.numpy(),
        float(j_moved[0, 0]),
        (float((w @ j_train).sum()), float((w @ j_pre).sum())),
        setup.eps,
    )


def run(setup: LabSetup, knobs: Mapping[str, Value], progress: Progress) -> Coupling:
    progress(0.0, "Differentiating BatchNorm…")
    return coupling(setup, int(knobs[SIZE.name]))  # type: ignore[call-overload]


def figure(res: Coupling, presenter: bool = False) -> go.Figure:
    """∂y_i/∂x_j as two heatmaps, training and evaluation mode, on one colour scale."""
    fig = Spec.grid(1, 2, tuple(f"∂y_i/∂x_j, {m}" for m in MODES), horizontal_spacing=0.12)
    top = float(np.abs(np.concatenate([res.train, res.eval])).max()) or 1.0
    for col, j in enumerate((res.train, res.eval), start=1):
        z = [rounded(row, 4) for row in j]
        fig.add_trace(
            trace(
                "heatmap",
                z=z,
                zmin=-top,
                zmax=top,
                colorscale=style.DIVERGING,
                showscale=col == 2,
                name=MODES[col - 1],
                hovertemplate="∂y_%{y}/∂x_%{x} = %{z}<extra></extra>",
            ),
            row=1,
            col=col,
        )
        fig.update_xaxes(title="input j", dtick=1, row=1, col=col)
        fig.update_yaxes(title="output i", dtick=1, autorange="reversed", row=1, col=col)
    fig.update_layout(title=f"BatchNorm1d(1) on a batch of {res.n} values: who affects whom")
    style.apply(fig, presenter, height=460)
    return style.top_room(fig, presenter, below=1).figure()  # room for the panel titles


def table(res: Coupling) -> pd.DataFrame:
    rows = {
        "BatchNorm, training mode": res.train,
        "BatchNorm, evaluation mode": res.eval,
        "batch μ, σ² held constant": res.preproc,
    }
    return pd.DataFrame(
        {
            "Jacobian of": list(rows),
            "∂y_0/∂x_0": [float(j[0, 0]) for j in rows.values()],
            f"∂y_0/∂x_{res.n - 1}": [float(j[0, -1]) for j in rows.values()],
            "largest |∂y_i/∂x_j|, i ≠ j": [res.off_diagonal(j) for j in rows.values()],
        }
    )


def _zero(v: float) -> bool:
    return abs(v) < TINY


def notes(res: Coupling) -> Sequence[str]:
    tr, ev, pre = (res.off_diagonal(j) for j in (res.train, res.eval, res.preproc))
    full = res.coupled() == res.n * (res.n - 1)
    last = res.n - 1
    out = [
        f"- Training mode: the largest off-diagonal |∂y_i/∂x_j| is **{tr:.3g}**; "
        f"{res.coupled()} of the {res.n * (res.n - 1)} off-diagonal entries are non-zero"
        + (": every output moves with every other input of the batch." if full else "."),
        f"- Evaluation mode: it is **{ev:.3g}**"
        + (
            ": the running statistics are constants, so each output depends on its own input "
            f"only, with slope 1/√(running var + ε) = {res.eval[0, 0]:.4g}."
            if _zero(ev)
            else "."
        ),
        f"- With the batch's μ and σ² held constant (preprocessing), it is **{pre:.3g}**; the "
        f"diagonal is {res.preproc[0, 0]:.4g} against training mode's {res.train[0, 0]:.4g}"
        + (
            ": leaving μ and σ² out of the backward pass changes the gradient."
            if not np.allclose(res.preproc, res.train, rtol=1e-9, atol=TINY)
            else "."
        ),
    ]
    d0, d1 = float(res.train[0, 0]), res.moved_diag
    verb = "changes" if abs(d1 - d0) > 1e-9 * max(1.0, abs(d0)) else "does not change"
    out.append(
        f"Move only sample {last} by {SHIFT:g} standard deviations, and sample 0's own slope "
        f"∂y_0/∂x_0 {verb}: {d0:.4g} → {d1:.4g}"
        + (". Its gradient depends on its batch-mates." if verb == "changes" else ".")
    )
    s_bn, s_pre = res.grad_sum
    out.append(
        f"For a loss L = Σ w_i y_i (w from 0 to 1), the gradient ∂L/∂x sums to {s_bn:.1e} "
        f"through BatchNorm and to {s_pre:.3g} with μ and σ² held constant: through μ, "
        "BatchNorm takes out the part of a step that would shift the whole batch, a shift its "
        "output could not see anyway."
    )
    return tuple(out)


SECTION = Section(
    "coupling",
    "Gradients through μ, σ²",
    INTRO,
    run,
    knobs=(SIZE,),
    figure=figure,
    table=table,
    notes=notes,
)
