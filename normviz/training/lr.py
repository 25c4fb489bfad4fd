"""Learning-rate tolerance (Ioffe & Szegedy 2015): how large a learning rate still trains.

One network (an MLP over the pixels, or a small CNN over the image) per
normalization, learning rate and seed, all trained at once with SGD (momentum 0.9)
on the same samples. A setting "trains" when every seed ends above `TRAINS_AT`
validation accuracy. InstanceNorm fits only the CNN (an MLP has one position).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from normviz import style
from normviz.errors import Refusal
from normviz.figures.spec import Spec
from normviz.knobs import Knob, Value
from normviz.sections import Progress, Section
from normviz.training import common
from normviz.training.common import SEEDS, Setup
from normviz.training.models import NORM_LABELS, NORMS, Net, pooled
from normviz.training.train import Grid, train
from normviz.training.wide import Variant

NETS: dict[str, Net] = {
    "mlp": Net("mlp", width=64, depth=3),  # the 64 pixels; activations (B, C)
    "cnn": Net("cnn", width=4, depth=2, groups=2),  # the 8×8 image; activations (N, C, H, W)
}
NET_LABELS = {"mlp": "MLP (3 hidden layers of 64)", "cnn": "CNN (two 3×3 convs, 4 and 8 channels)"}
LRS: tuple[float, ...] = (0.025, 0.05, 0.1, 0.2, 0.4, 0.8, 1.6)
TRAINS_AT = 0.5  # validation accuracy every seed must reach (chance: 0.1)
CLAIM = (
    "*Ioffe & Szegedy (2015): with BatchNorm a network trains at much higher learning rates "
    "(they raised theirs 5× and 30×).*"
)

INTRO = (
    "Each curve is one normalization: the validation accuracy after training, against "
    "the learning rate (SGD with momentum 0.9, the same samples for every run). Every "
    "point is several seeds; the bars are their spread. A learning rate *trains* when "
    f"every seed reaches {common.pct(TRAINS_AT)} validation accuracy (chance is 10 %); a run whose "
    "loss overflows stops and predicts one class. The whole grid (normalizations × "
    "learning rates × seeds) trains as one batched computation."
)

KNOBS = (
    Knob(
        "tol_norms",
        ("none", "batch", "layer"),
        choices=NORMS,
        multi=True,
        label="Normalizations",
    ),
    Knob("tol_net", "mlp", choices=tuple(NETS), label="Network"),
    Knob("tol_epochs", 3, choices=(1, 2, 3, 4), label="Epochs"),
    SEEDS,
)


@dataclass(frozen=True)
class LrResult:
    norms: tuple[str, ...]
    lrs: tuple[float, ...]
    acc: np.ndarray  # (norms, lrs, seeds) validation accuracy
    loss: np.ndarray
    diverged: np.ndarray  # (norms, lrs, seeds)
    pools: tuple[str, ...]  # the axes each norm pools, from the contract
    net: str  # a key of NETS
    left_out: tuple[str, ...]  # chosen norms that do not fit this network

    def largest(self, i: int) -> float | None:
        """The largest learning rate at which norm i trains (None: none does)."""
        ok = [lr for j, lr in enumerate(self.lrs) if (self.acc[i, j] >= TRAINS_AT).all()]
        return max(ok) if ok else None


def run(setup: Setup, knobs: Mapping[str, Value], progress: Progress) -> LrResult:
    net = NETS[str(knobs["tol_net"])]
    chosen = tuple(n for n in NORMS if n in tuple(knobs["tol_norms"]))  # type: ignore[arg-type]
    norms = tuple(n for n in chosen if n in net.norms()) or (() if chosen else ("none", "batch"))
    if not norms:
        raise Refusal(
            "InstanceNorm pools each channel over its positions, and an MLP's activation "
            "(B, C) has one position: one value per instance, which torch refuses to "
            "normalize in training. Choose the CNN, or another normalization"
        )
    seeds = setup.seeds(knobs["runs"])
    variants = tuple(Variant(n, lr, s) for n in norms for lr in LRS for s in seeds)
    grid = Grid(net, variants, batch=32, samples=setup.samples(knobs["tol_epochs"]))
    out = train(grid, progress)[0]
    shape = (len(norms), len(LRS), len(seeds))
    return LrResult(
        norms,
        LRS,
        out.val_acc.reshape(shape),
        out.val_loss.reshape(shape),
        out.diverged.reshape(shape),
        tuple(pooled(n, net) for n in norms),
        str(knobs["tol_net"]),
        tuple(n for n in chosen if n not in norms),
    )


def figure(res: LrResult, presenter: bool) -> go.Figure:
    fig = Spec()
    for i, n in enumerate(res.norms):
        common.add_line(
            fig,
            res.lrs,
            100 * res.acc[i],
            common.label(n),
            common.colour(n),
            symbol_=common.symbol(n),
        )
    fig.add_hline(100 * TRAINS_AT, line={"dash": "dot", "color": "#444"})
    fig.add_hline_note(100 * TRAINS_AT, "trains")
    fig.update_xaxes(style.log_axis(res.lrs), title="learning rate (SGD, momentum 0.9)")
    fig.update_yaxes(title="validation accuracy (%)", range=[0, 100])
    return common.finish(fig, "Validation accuracy after training,<br>by learning rate", presenter)


def table(res: LrResult) -> pd.DataFrame:
    rows = []
    for i, n in enumerate(res.norms):
        big = res.largest(i)
        best = res.acc[i].mean(-1)
        rows.append(
            {
                "normalization": NORM_LABELS[n],
                "statistics pool": res.pools[i],
                "largest lr that trains": "none" if big is None else f"{big:g}",
                "best accuracy (%)": float(100 * best.max()),
                "at lr": f"{res.lrs[int(best.argmax())]:g}",
                "runs diverged": int(res.diverged[i].sum()),
            }
        )
    return pd.DataFrame(rows)


def notes(res: LrResult) -> Sequence[str]:
    net = NETS[res.net]
    out = [
        f"{NET_LABELS[res.net]}. Where the statistics come from: {common.pools(res.norms, net)}."
    ]
    if res.left_out:
        left = ", ".join(NORM_LABELS[n] for n in res.left_out)
        out.append(f"Left out: {left} (one value per instance in an MLP; torch refuses it).")
    if "batch" not in res.norms or "none" not in res.norms:
        return [*out, f"{CLAIM} Select both *no norm* and *BatchNorm* to test it."]
    bn, none = (res.largest(res.norms.index(k)) for k in ("batch", "none"))
    if bn is None:
        why = "BatchNorm does not train at any learning rate of the grid"
        return [*out, common.verdict(False, CLAIM, why)]
    if none is None:
        why = f"without normalization no learning rate trains, BatchNorm trains up to {bn:g}"
        return [*out, common.verdict(True, CLAIM, why)]
    ratio = bn / none
    if ratio > 1:
        why = f"BatchNorm still trains at {bn:g}, {ratio:g}× the largest without it ({none:g})"
    else:
        why = f"BatchNorm's largest learning rate ({bn:g}) is not above the one without ({none:g})"
    return [*out, common.verdict(ratio > 1, CLAIM, why)]


SECTION = Section("lr", "Learning-rate tolerance", INTRO, run, KNOBS, figure, table, notes)
