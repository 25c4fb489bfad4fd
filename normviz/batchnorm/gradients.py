"""Deep plain networks at initialization: gradient norms per layer, with and without BatchNorm.

A stack of Linear → ReLU layers (no skip connections), once plain and once with
BatchNorm1d after every Linear, gets one batch of the lab's data and one backward
pass. Compared: the size of each layer's activations and of its weight gradient.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
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
from normviz.text import direction

INTRO = (
    "BatchNorm helps against vanishing and exploding gradients only indirectly: it keeps "
    "every layer's activations at a controlled scale, and "
    f"{sources.cite('ioffe2015')} point out that a layer followed by BatchNorm passes back "
    "the same gradient to its input whatever the scale of its weights. That is not a "
    "guarantee. Below, a deep stack of Linear → ReLU layers without skip connections gets "
    "one batch of the lab's data at initialization, once plain and once with BatchNorm1d "
    "after every Linear."
)
WIDTH = 64  # hidden units per layer
BATCH = 64  # samples in the batch (BatchNorm's statistics pool them)
OUT = 4  # regression targets
INITS: dict[str, str] = {
    "torch": "torch's default (uniform, variance 1/(3·fan_in))",
    "he": "He (normal, variance 2/fan_in)",
}
DEPTH = Knob("bn_depth", 20, lo=2, hi=50, label="Layers")
INIT = Knob("bn_init", "torch", choices=tuple(INITS), label="Weight init")
VARIANTS: tuple[str, ...] = ("plain", "with BatchNorm")
FACTOR = 10.0  # first/last within this factor either way: "about the same"


def build(depth: int, d_in: int, norm: bool, init: str, g: torch.Generator) -> nn.Sequential:
    """depth × (Linear → [BatchNorm1d] → ReLU), then a Linear readout; weights drawn from g."""
    layers: list[nn.Module] = []
    for i in range(depth):
        lin = nn.Linear(d_in if i == 0 else WIDTH, WIDTH)
        if init == "he":
            nn.init.kaiming_normal_(lin.weight, nonlinearity="relu", generator=g)
            nn.init.zeros_(lin.bias)
        else:  # torch's own default init, drawn from our generator
            nn.init.kaiming_uniform_(lin.weight, a=math.sqrt(5), generator=g)
            bound = 1 / math.sqrt(lin.in_features)
            nn.init.uniform_(lin.bias, -bound, bound, generator=g)
        layers += [lin, nn.BatchNorm1d(WIDTH)] if norm else [lin]
        layers.append(nn.ReLU())
    head = nn.Linear(WIDTH, OUT)
    nn.init.kaiming_uniform_(head.weight, a=math.sqrt(5), generator=g)
    nn.init.zeros_(head.bias)
    return nn.Sequential(*layers, head)


@dataclass(frozen=True)
class DeepGradients:
    """Per hidden layer, for each variant (plain, with BatchNorm): activation and gradient size."""

    depth: int
    init: str
    act_std: np.ndarray  # (2, depth) std of each layer's ReLU output
    grad_norm: np.ndarray  # (2, depth) ‖∂loss/∂W_l‖ of each hidden Linear

    def ratio(self, i: int) -> float:
        """First layer's weight gradient / last hidden layer's, for variant i."""
        return float(self.grad_norm[i, 0] / self.grad_norm[i, -1])


def _recorder(store: list[torch.Tensor]) -> Callable[..., None]:
    """A forward hook that appends the module's output to `store`."""
    return lambda _module, _inputs, out: store.append(out.detach())


@one_thread()
def deep_gradients(setup: LabSetup, depth: int, init: str) -> DeepGradients:
    """One batch of the lab's data through both stacks (the same weights) and back."""
    check(setup)
    if init not in INITS:
        raise ValueError(f"init must be one of {', '.join(INITS)}, got {init!r}")
    ds = stream.make_dataset(setup)
    x = ds.train[:BATCH].reshape(BATCH, -1)  # each sample flattened into one feature vector
    g = torch.Generator().manual_seed(setup.seed)
    y = torch.randn(BATCH, OUT, generator=g)
    acts, grads = [], []
    for norm in (False, True):
        model = build(depth, x.shape[1], norm, init, torch.Generator().manual_seed(setup.seed))
        seen: list[torch.Tensor] = []
        hooks = [m.register_forward_hook(_recorder(seen)) for m in model if isinstance(m, nn.ReLU)]
        loss = nn.functional.mse_loss(model.train()(x), y)
        for h in hooks:
            h.remove()
        linears = [m for m in model if isinstance(m, nn.Linear)][:-1]
        gw = torch.autograd.grad(loss, [m.weight for m in linears])
        acts.append([float(a.std()) for a in seen])
        grads.append([float(t.norm()) for t in gw])
    return DeepGradients(depth, init, np.asarray(acts), np.asarray(grads))


def run(setup: LabSetup, knobs: Mapping[str, Value], progress: Progress) -> DeepGradients:
    progress(0.0, "One batch through two deep stacks…")
    return deep_gradients(setup, int(knobs["bn_depth"]), str(knobs["bn_init"]))  # type: ignore[call-overload]


def figure(res: DeepGradients, presenter: bool = False) -> go.Figure:
    """Activation std and weight-gradient norm per layer, plain vs BatchNorm (log y)."""
    fig = Spec.grid(
        1,
        2,
        # two short lines each: half a phone's column holds about 18 characters
        ("activation std<br>after each layer", "weight-gradient<br>norm per layer"),
        horizontal_spacing=0.12,
    )
    xs = list(range(1, res.depth + 1))
    colours = (style.BEFORE, style.METHOD_COLOURS["batch"])
    for col, data in enumerate((res.act_std, res.grad_norm), start=1):
        for i, name in enumerate(VARIANTS):
            fig.add_trace(
                trace(
                    "scatter",
                    x=xs,
                    y=[v if v and v > 0 else None for v in rounded(data[i], 4)],
                    mode="lines+markers",
                    line={"color": colours[i], "width": 3, "dash": ("dot", "solid")[i]},
                    name=name,
                    legendgroup=name,
                    showlegend=col == 1,
                ),
                row=1,
                col=col,
            )
        fig.update_yaxes(style.log_axis(data), row=1, col=col)  # labelled at decades
        fig.update_xaxes(title="layer (1 = input)", row=1, col=col)
    fig.update_layout(
        # two short lines (a phone's chart holds about 45 characters a line): the init's
        # name here, its distribution in the section's choice of init
        title=f"{res.depth} Linear → ReLU layers at initialization<br>"
        f"weights: {INITS[res.init].split(' (')[0]} init",
        legend=style.LEGEND_BELOW,
    )
    style.apply(fig, presenter, height=500)
    fig.update_annotations(font={"size": style.font_size(presenter)})  # the panel titles
    return style.top_room(fig, presenter, below=2).figure()


def table(res: DeepGradients) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "network": list(VARIANTS),
            "activation std, last layer": res.act_std[:, -1],
            "gradient norm, first layer": res.grad_norm[:, 0],
            "gradient norm, last layer": res.grad_norm[:, -1],
            "first / last": [res.ratio(i) for i in range(len(VARIANTS))],
        }
    )


def _verdict(r: float) -> str:
    """What a first/last gradient ratio says, in words."""
    return {
        -1: f"shrinks toward the input: the first layer's is {r:.2g} of the last one's",
        1: f"grows toward the input: the first layer's is {r:.3g}× the last one's",
        0: f"stays within a factor {FACTOR:g} from layer to layer (first / last = {r:.3g})",
    }[direction(r, FACTOR)]


def notes(res: DeepGradients) -> Sequence[str]:
    out = [
        f"- {name}: the weight gradient {_verdict(res.ratio(i))}; the last layer's activations "
        f"have std {res.act_std[i, -1]:.3g}."
        for i, name in enumerate(VARIANTS)
    ]
    if res.ratio(1) > FACTOR:
        out.append(
            "BatchNorm kept the activations in range, yet its weight gradients grow toward "
            f"the input. {sources.cite('yang2019')} show that at initialization gradients "
            "explode with depth in deep BatchNorm networks without skip connections."
        )
    out.append(
        f"{sources.cite('santurkar2018')} argue that what BatchNorm changes in training is "
        "mostly a smoother loss landscape; this snapshot at initialization shows only the "
        "gradients' sizes."
    )
    return tuple(out)


SECTION = Section(
    "gradients",
    "Deep networks",
    INTRO,
    run,
    knobs=(DEPTH, INIT),
    figure=figure,
    table=table,
    notes=notes,
)
