"""Future tokens leak through BatchNorm's statistics in a causal model.

A causal language model may let position t see tokens 0…t only. BatchNorm over a
(B, T, C) batch pools every position of every sequence into each channel's μ and
σ², so in training mode an earlier position's output moves when a later token
changes. LayerNorm pools one token's C features and cannot leak; BatchNorm in
evaluation mode uses fixed running statistics and does not leak either.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch
from torch import nn

from normviz import style
from normviz.batchnorm.lab import LabSetup, check, one_thread
from normviz.batchnorm.plot import rounded
from normviz.data import generate
from normviz.figures.spec import Spec, trace
from normviz.knobs import Knob, Value
from normviz.sections import Progress, Section

INTRO = (
    "A causal model (a GPT-style decoder, a causal convolution) must not let position t see "
    "the tokens after it: its attention mask or its padding make sure of that. A "
    "normalization layer can undo it. BatchNorm over a (B, T, C) batch pools every position "
    "of every sequence into each channel's mean and variance, so the statistics at position "
    "0 already contain the last token. Below, only the last token of sequence 0 changes, "
    "and each layer's output is compared position by position, before and after."
)
SHIFT = Knob("leak_shift", 3.0, lo=0.5, hi=10.0, label="Change of the last token")
SHAPE = (6, 8)  # (T, C) when the lab's samples are images: a sequence of its own
LAYERS: tuple[str, ...] = ("BatchNorm, training mode", "BatchNorm, evaluation mode", "LayerNorm")
COLOURS = (style.METHOD_COLOURS["batch"], style.PALETTE[4], style.METHOD_COLOURS["layer"])
TINY = 1e-6  # |Δy| below this is float32 rounding, not a leak


@dataclass(frozen=True, eq=False)
class Leak:
    """Per layer and position: the largest |Δ output| after the last token changed."""

    shape: tuple[int, int, int]  # (B, T, C)
    own_shape: bool  # the sequences have the lab's (T, C); else SHAPE (the lab's are images)
    shift: float
    own: np.ndarray  # (layers, T) in the changed sequence
    others: np.ndarray  # (layers, T) in the other sequences of the batch (0 when B = 1)

    def earlier(self, i: int) -> float:
        """Layer i's largest |Δy| at the positions before the changed token."""
        return float(self.own[i, :-1].max()) if self.shape[1] > 1 else 0.0


def _layers(C: int, eps: float) -> list[nn.Module]:
    """BatchNorm1d (training, then evaluation: running mean 0, variance 1) and LayerNorm."""
    bn = nn.BatchNorm1d(C, eps=eps)
    return [bn.train(), nn.BatchNorm1d(C, eps=eps).eval(), nn.LayerNorm(C, eps=eps)]


def apply(layer: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """`layer` on (B, T, C): BatchNorm1d wants the channels at dim 1, (B, C, T)."""
    if isinstance(layer, nn.BatchNorm1d):
        return layer(x.transpose(1, 2)).transpose(1, 2)
    return layer(x)


def change_last(x: torch.Tensor, shift: float, seed: int) -> torch.Tensor:
    """`x` (B, T, C) with the last token of sequence 0 moved by `shift` × a seeded random
    direction over its channels (a constant added to every channel would be invisible to
    LayerNorm, which subtracts the token's mean)."""
    g = torch.Generator().manual_seed(seed + 1)
    out = x.clone()
    out[0, -1] += shift * torch.randn(x.shape[-1], generator=g)
    return out


@one_thread()
def leak(setup: LabSetup, shift: float) -> Leak:
    """Change the last token of sequence 0 (`change_last`); compare each layer's outputs."""
    check(setup)
    T, C = setup.sample_shape if setup.layout == "BTC" else SHAPE
    B = setup.batch_size
    x = generate(setup.data, "BTC", (B, T, C), setup.seed)
    changed = change_last(x, shift, setup.seed)
    own, others = [], []
    with torch.no_grad():
        for layer in _layers(C, setup.eps):
            d = (apply(layer, changed) - apply(layer, x)).abs()  # (B, T, C)
            own.append(d[0].amax(-1).numpy())
            others.append(d[1:].amax((0, 2)).numpy() if B > 1 else np.zeros(T))
    return Leak((B, T, C), setup.layout == "BTC", shift, np.array(own), np.array(others))


def run(setup: LabSetup, knobs: Mapping[str, Value], progress: Progress) -> Leak:
    progress(0.0, "Changing one future token…")
    return leak(setup, float(knobs[SHIFT.name]))  # type: ignore[arg-type]


def figure(res: Leak, presenter: bool = False) -> go.Figure:
    """max |Δy| at each position of the changed sequence, one bar per layer."""
    fig = Spec()
    T = res.shape[1]
    for i, name in enumerate(LAYERS):
        fig.add_trace(
            trace(
                "bar",
                x=list(range(T)),
                y=rounded(res.own[i], 6),
                name=name,
                marker={"color": COLOURS[i], "pattern": {"shape": style.PATTERNS[i]}},
            )
        )
    fig.update_xaxes(title=f"position t in sequence 0 (the token at t = {T - 1} changed)", dtick=1)
    fig.update_yaxes(title="largest |Δ output| over the channels")
    fig.update_layout(
        title="Change the last token: which positions' outputs move?",
        barmode="group",
        legend=style.LEGEND_BELOW,
    )
    return style.apply(fig, presenter, height=420).figure()


def table(res: Leak) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "layer": list(LAYERS),
            "largest |Δy| before the changed token": [res.earlier(i) for i in range(len(LAYERS))],
            "at the changed token": res.own[:, -1],
            "in the other sequences": res.others.max(1),
        }
    )


def notes(res: Leak) -> Sequence[str]:
    B, T, C = res.shape
    where = "" if res.own_shape else " (the lab's samples are images: a sequence of its own)"
    out = [
        f"A batch of (B, T, C) = ({B}, {T}, {C}){where}; the token at t = {T - 1} of sequence 0 "
        f"moved by {res.shift:g} × a random direction over its channels."
    ]
    for i, name in enumerate(LAYERS):
        e = res.earlier(i)
        if T == 1:
            out.append(f"- {name}: a sequence of one token has no earlier position.")
        elif e > TINY:
            out.append(
                f"- {name}: the earlier positions' outputs move by up to **{e:.3g}** (position "
                f"0 by {float(res.own[i, 0]):.3g}): they see the future token through the batch "
                "statistics, a leak no causal mask can stop."
            )
        else:
            said = "exactly 0" if e == 0 else f"at most {e:.1e}, float rounding"
            out.append(f"- {name}: the earlier positions' outputs do not move (|Δy| {said}).")
    if B > 1 and float(res.others[0].max()) > TINY:
        out.append(
            f"BatchNorm in training mode also moves the other {B - 1} sequences of the batch "
            f"(by up to {float(res.others[0].max()):.3g}): they see a token of another sample."
        )
    if res.earlier(0) > TINY and res.earlier(1) <= TINY:
        out.append(
            "Evaluation mode uses fixed running statistics and does not leak, so a model "
            "trained with the leak meets different statistics at generation time, where the "
            "future tokens do not exist yet."
        )
    return tuple(out)


SECTION = Section(
    "causal",
    "Causal models",
    INTRO,
    run,
    knobs=(SHIFT,),
    figure=figure,
    table=table,
    notes=notes,
)
