"""Batch Renormalization: BatchNorm and BRN trained on digits at batch 2 and on sorted batches.

Ioffe 2017's fix for small or non-i.i.d. batches (the reference is
`normviz.batchrenorm.BatchRenorm`): each batch's statistics are corrected towards the
running ones by r and d, clipped, so training sees what evaluation will use. The same
networks as the real-model section (`model.NET`, torch's init from the same seed, Adam),
one with BatchNorm and one with BRN in its place, in two regimes: batches of 2 in
random order, and batches of 16 that each hold one digit class. Every sentence is
computed from the accuracies and the recorded r and d.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch
import torch.nn.functional as F
from torch import nn

from normviz import style
from normviz.batchnorm.lab import LabSetup
from normviz.batchnorm.model import LR, NET, SEEDS, pct
from normviz.batchnorm.plot import TRUTH
from normviz.batchrenorm import D_MAX, R_MAX, BatchRenorm
from normviz.figures.spec import Spec, trace
from normviz.knobs import Value
from normviz.sections import Progress, Section
from normviz.sources import cite
from normviz.threads import single_threaded
from normviz.training.data import CLASSES, batches, digits
from normviz.training.models import EPS, build
from normviz.training.train import GATE, inputs, make_optimizer

REGIMES: tuple[tuple[str, int, bool], ...] = (  # label, batch size, one class per batch
    ("batch 2", 2, False),
    ("sorted batches of 16", 16, True),
)
WHERE = ("At batch 2", "On sorted batches of 16")  # how a verdict opens, per regime
NORMS = ("BatchNorm", "BRN")
EPOCHS = 1.0  # training samples per run, in passes over the training digits
# the bounds' schedule, as fractions of a run's steps (the paper, 5k/40k/25k of ~160k
# steps, scaled): r_max 1 and d_max 0 at first, then linear ramps to 3 and 5, then held
WARM, R_RAMP, D_RAMP = 0.05, 0.30, 0.20
POINTS = 200  # steps kept of the r, d traces (the figure's payload)
CHANCE = 1 / CLASSES
NEAR = 0.05  # within this of chance, an accuracy reads as "near chance"
CLAIMS = (  # each verdict's two claims: as said when they hold, and when they do not
    ("BRN's evaluation accuracy is higher", "BRN's evaluation accuracy is not higher"),
    ("its train/eval gap is smaller", "its train/eval gap is not smaller"),
)

INTRO = (
    f"**Batch Renormalization** ({cite('ioffe2017')}) keeps BatchNorm's running mean μ and "
    "spread σ, and corrects each training batch towards them: "
    "x̂ = (x − μ_B)/σ_B · r + d, with r = clip(σ_B/σ, 1/r_max, r_max) and "
    "d = clip((μ_B − μ)/σ, −d_max, d_max), both treated as constants in backprop. Unclipped, "
    "r and d replace the batch's statistics by the running ones, so the network trains on "
    "what evaluation mode will give it; with r_max = 1, d_max = 0 it is BatchNorm. The "
    "same small networks as the real-model section learn the digits with BatchNorm and "
    "with BRN, once with batches of 2 and once with *sorted* batches (each batch of 16 "
    "holds one digit class: not i.i.d.). The chart follows r and d of the first "
    "normalization layer of the first seed's BRN network, between their bounds."
)


def bounds(step: int, steps: int) -> tuple[float, float]:
    """(r_max, d_max) at `step` of `steps`: 1 and 0, then linear ramps to R_MAX and D_MAX."""
    t = step / max(steps, 1) - WARM
    r = 1 + (R_MAX - 1) * min(max(t / R_RAMP, 0.0), 1.0)
    d = D_MAX * min(max(t / D_RAMP, 0.0), 1.0)
    return r, d


def renormed(model: nn.Sequential) -> nn.Sequential:
    """A copy of the network (no weight shared) with each BatchNorm1d swapped for a
    BatchRenorm with its γ, β."""
    mods = []
    for m in copy.deepcopy(model):
        if isinstance(m, nn.BatchNorm1d):
            brn = BatchRenorm(m.num_features, 1.0, 0.0, momentum=m.momentum or 0.1, eps=EPS)
            with torch.no_grad():
                brn.weight.copy_(m.weight), brn.bias.copy_(m.bias)
            m = brn
        mods.append(m)
    return nn.Sequential(*mods)


def sorted_batches(seed: int, y: torch.Tensor, batch: int, samples: int) -> torch.Tensor:
    """(steps, batch) indices: each epoch shuffled, sorted by class, cut into batches, and
    the batches shuffled: almost every batch holds one class."""
    rows = batches(seed, len(y), len(y), max(samples, len(y)) // len(y) * len(y) + len(y))
    g = torch.Generator().manual_seed(2_000 + seed)
    out = []
    for perm in rows:
        by_class = perm[torch.argsort(y[perm], stable=True)]
        cut = by_class[: len(by_class) // batch * batch].view(-1, batch)
        out.append(cut[torch.randperm(len(cut), generator=g)])
    return torch.cat(out)[: max(1, samples // batch)]


@dataclass(frozen=True)
class RenormRuns:
    """Accuracies (regimes, norms, seeds) and the first seed's BRN r, d (first layer)."""

    seeds: tuple[int, ...]
    steps: tuple[int, ...]  # per regime
    eval_acc: np.ndarray  # (regimes, norms, seeds): evaluation mode (running statistics)
    train_acc: np.ndarray  # the same in training mode: test batches built as in training
    trace_steps: tuple[np.ndarray, ...]  # per regime: the steps kept
    r: tuple[np.ndarray, ...]  # per regime: (kept steps, 3) min, median, max over units
    d: tuple[np.ndarray, ...]

    @property
    def gap(self) -> np.ndarray:
        """|training-mode − evaluation-mode accuracy|, (regimes, norms, seeds)."""
        return np.abs(self.train_acc - self.eval_acc)


def _score(model: nn.Module, x: torch.Tensor, y: torch.Tensor, rows: torch.Tensor | None):
    """Accuracy in evaluation mode (rows None) or in training mode on the batches `rows`
    (the running statistics left as they are)."""
    with torch.no_grad():
        if rows is None:
            return float((model.eval()(x).argmax(-1) == y).float().mean())
        state = {k: v.clone() for k, v in model.state_dict().items()}
        model.train()
        hits = sum(int((model(x[b]).argmax(-1) == y[b]).sum()) for b in rows)
        model.load_state_dict(state)
        return hits / rows.numel()


def _train(
    model: nn.Sequential, rows: torch.Tensor, x: torch.Tensor, y: torch.Tensor, record: bool
):
    """Adam over the batches `rows`; for BRN, the bounds' schedule (and, `record`, the
    first layer's r and d per step: min, median, max over its units)."""
    opt = make_optimizer("adam", model.parameters(), LR)
    layers = [m for m in model if isinstance(m, BatchRenorm)]
    r, d = [], []
    model.train()
    for step, b in enumerate(rows):
        for m in layers:
            m.r_max, m.d_max = bounds(step, len(rows))
        loss = F.cross_entropy(model(x[b]), y[b])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if record:
            r.append(_spread(layers[0].last_r))
            d.append(_spread(layers[0].last_d))
    return np.array(r), np.array(d)


def _spread(v: torch.Tensor) -> tuple[float, float, float]:
    return float(v.min()), float(v.median()), float(v.max())


@single_threaded
def run(setup: LabSetup, knobs: Mapping[str, Value], progress: Progress) -> RenormRuns:
    """Both norms × regimes × seeds; waits for the training lab's gate first."""
    seeds = tuple(range(setup.seed, setup.seed + int(knobs["bn_seeds"])))  # type: ignore[call-overload]
    data = digits()
    x, y = inputs(NET, data.x_train), data.y_train
    xv, yv = inputs(NET, data.x_val), data.y_val
    samples = max(32, round(EPOCHS * data.n_train * setup.model_scale))
    ev = np.zeros((len(REGIMES), len(NORMS), len(seeds)))
    tr = np.zeros_like(ev)
    steps, kept, rs, ds = [], [], [], []
    with GATE.enter(progress):
        for i, (label, size, one_class) in enumerate(REGIMES):
            for k, seed in enumerate(seeds):
                done = (i * len(seeds) + k) / (len(REGIMES) * len(seeds))
                progress(done, f"{label}, seed {seed}")
                if one_class:
                    rows = sorted_batches(seed, y, size, samples)
                    val = sorted_batches(seed, yv, size, len(yv))  # test batches alike
                else:
                    rows = batches(seed, data.n_train, size, samples)
                    val = torch.arange(len(yv) // size * size).view(-1, size)
                bn = build(NET, "batch", seed)
                for j, model in enumerate((bn, renormed(bn))):
                    r, d = _train(model, rows, x, y, record=j == 1 and k == 0)
                    ev[i, j, k] = _score(model, xv, yv, None)
                    tr[i, j, k] = _score(model, xv, yv, val)
                    if j == 1 and k == 0:
                        keep = np.unique(np.linspace(0, len(r) - 1, POINTS).round().astype(int))
                        kept.append(keep), rs.append(r[keep]), ds.append(d[keep])
            steps.append(len(rows))
    progress(1.0, "done")
    return RenormRuns(seeds, tuple(steps), ev, tr, tuple(kept), tuple(rs), tuple(ds))


# ---- words --------------------------------------------------------------------------------


def _count(ok: np.ndarray, yes: str, no: str) -> str:
    """`yes` for every seed, for none (one seed: `no`), or for some: mixed."""
    n, k = ok.size, int(ok.sum())
    every = f"each of the {n} seeds" if n > 1 else "this seed"
    if k == n:
        return f"{yes} for {every}"
    if k == 0:
        return f"{yes} for none of the {n} seeds" if n > 1 else f"{no} for this seed"
    return f"{yes} for {k} of the {n} seeds only: mixed"


def verdict(res: RenormRuns, i: int) -> str:
    """Regime i's claim (BRN scores higher in evaluation mode, with a smaller train/eval
    gap than BatchNorm), checked seed by seed."""
    ev, tr, gap = res.eval_acc[i], res.train_acc[i], res.gap[i]
    higher = _count(ev[1] > ev[0], *CLAIMS[0])
    smaller = _count(gap[1] < gap[0], *CLAIMS[1])
    out = (
        f"{WHERE[i]}, BRN's evaluation accuracy is {pct(ev[1])} vs BatchNorm's {pct(ev[0])}; "
        f"its train/eval gap is {_points(gap[1])} vs {_points(gap[0])}. Verdict: "
        f"{higher}, and {smaller}."
    )
    if max(ev[0].mean(), tr[0].mean()) < CHANCE + NEAR:
        out += (
            f" BatchNorm's gap means little here: it scores near chance ({100 * CHANCE:.0f} %) "
            f"in both modes ({100 * ev[0].mean():.1f} % and {100 * tr[0].mean():.1f} %, mean "
            "over seeds)."
        )
    return out


def _points(gap: np.ndarray) -> str:
    g = 100 * np.asarray(gap)
    if g.size == 1:
        return f"{g.mean():.1f} points"
    return f"{g.mean():.1f} points (seeds {g.min():.1f}–{g.max():.1f})"


def on_bound(res: RenormRuns, i: int) -> tuple[float, float]:
    """Fractions of the traced steps after the warm-up where some unit's r (and d) sat
    on its bound: r at r_max or 1/r_max, d at ±d_max."""
    steps = res.trace_steps[i]
    rb, db = np.array([bounds(int(s), res.steps[i]) for s in steps]).T
    live = rb > 1  # before the ramp every r is 1 and every d is 0 by construction
    if not live.any():
        return 0.0, 0.0
    r, d = res.r[i][live], res.d[i][live]
    tol = 1e-6
    r_hit = (r[:, 2] >= rb[live] - tol) | (r[:, 0] <= 1 / rb[live] + tol)
    d_hit = (d[:, 2] >= db[live] - tol) | (d[:, 0] <= -db[live] + tol)
    return float(r_hit.mean()), float(d_hit.mean())


def notes(res: RenormRuns) -> Sequence[str]:
    """The design, r and d against their bounds, then each regime's verdict."""
    n = len(res.seeds)
    out = [
        f"Each network is an MLP over the 64 pixels (two hidden layers of {NET.width}, each "
        f"followed by BatchNorm or BRN and a ReLU), Adam with learning rate {LR:g}; every run "
        f"sees {res.steps[0] * REGIMES[0][1]:,} training digits ({res.steps[0]:,} steps at "
        f"batch 2, {res.steps[1]:,} with sorted batches of 16), {n} "
        f"seed{'s' if n > 1 else ''} from the sidebar's seed. "
        f"BRN's bounds: r_max = 1 and d_max = 0 for the first {WARM:.0%} of the steps, then "
        f"linear ramps to r_max = {R_MAX:g} (over {R_RAMP:.0%} of the steps) and d_max = "
        f"{D_MAX:g} (over {D_RAMP:.0%}), the paper's schedule scaled to these short runs. "
        "Evaluation mode uses the running statistics; training mode scores held-out batches "
        "built like the training ones (of 2; of 16 digits of one class), each normalized by "
        "its own statistics (BRN: corrected by r and d).",
    ]
    for i, (label, _, _) in enumerate(REGIMES):
        r, d = res.r[i][-1], res.d[i][-1]
        r_hit, d_hit = on_bound(res, i)
        out.append(
            f"{label.capitalize()}, first seed, first layer: at the last step r spans "
            f"{r[0]:.2f}–{r[2]:.2f} over the units and d {d[0]:.2f}–{d[2]:.2f}; after the "
            f"warm-up some unit's r sat on a bound at {r_hit:.0%} of the traced steps, some "
            f"unit's d at {d_hit:.0%}."
        )
    out += [verdict(res, i) for i in range(len(REGIMES))]
    return out


def alt(res: RenormRuns) -> Sequence[str]:
    return tuple(
        f"Two line charts for {label}: r and d of the first BRN layer over "
        f"{res.steps[i]:,} training steps (the median unit, and a band from the smallest to "
        f"the largest), between dashed bounds that ramp from 1 to {R_MAX:g} (and 1/{R_MAX:g}) "
        f"and from 0 to ±{D_MAX:g}; at the last step the median r is {res.r[i][-1][1]:.2f} "
        f"and the median d {res.d[i][-1][1]:.2f}."
        for i, (label, _, _) in enumerate(REGIMES)
    )


# ---- figure and table ---------------------------------------------------------------------


def figure(res: RenormRuns, presenter: bool = False) -> go.Figure:
    """r (top) and d (bottom) of the first BRN layer over steps, one column per regime."""
    titles = tuple(f"{q}, {label}" for q in ("r", "d") for label, _, _ in REGIMES)
    fig = Spec.grid(2, len(REGIMES), titles, vertical_spacing=0.16)
    band, mid = style.PALETTE[4], style.PALETTE[0]
    for i in range(len(REGIMES)):
        x = res.trace_steps[i].tolist()
        rb, db = np.array([bounds(int(s), res.steps[i]) for s in x]).T
        for row, vals, hi, lo in ((1, res.r[i], rb, 1 / rb), (2, res.d[i], db, -db)):
            first = i == 0 and row == 1
            bound = dict(line={"color": TRUTH, "dash": "dash", "width": 2}, name="clipping bound")
            lines = (  # (values, look): the band's floor and ceiling, the median, the bounds
                (vals[:, 0], dict(line={"color": band, "width": 0}, hoverinfo="skip")),
                (
                    vals[:, 2],
                    dict(
                        line={"color": band, "width": 0},
                        fill="tonexty",
                        name="smallest to largest unit",
                    ),
                ),
                (vals[:, 1], dict(line={"color": mid, "width": 3}, name="median unit")),
                (hi, bound),
                (lo, bound),
            )
            for k, (y, look) in enumerate(lines):
                shown = first and "name" in look and k < 4  # one legend entry per name
                group = {"legendgroup": look["name"]} if "name" in look else {}
                fig.add_trace(
                    trace(
                        "scatter",
                        x=x,
                        y=np.round(y, 4).tolist(),
                        mode="lines",
                        showlegend=shown,
                        **look,
                        **group,
                    ),
                    row,
                    i + 1,
                )
        fig.update_xaxes(title="training step", row=2, col=i + 1)
    fig.update_yaxes(title="r = σ_B / σ", row=1, col=1)
    fig.update_yaxes(title="d = (μ_B − μ) / σ", row=2, col=1)
    fig.update_layout(title="BRN's corrections and their bounds", legend=style.LEGEND_BELOW)
    return style.apply(fig, presenter, height=620).figure()


def table(res: RenormRuns) -> pd.DataFrame:
    """One row per regime and norm: accuracies in both modes and the gap, over seeds."""
    rows = []
    for i, (label, _, _) in enumerate(REGIMES):
        for j, norm in enumerate(NORMS):
            rows.append(
                {
                    "regime": label,
                    "normalization": norm,
                    "evaluation mode": float(res.eval_acc[i, j].mean()),
                    "training mode": float(res.train_acc[i, j].mean()),
                    "train/eval gap": float(res.gap[i, j].mean()),
                }
            )
    df = pd.DataFrame(rows)
    df.attrs["format"] = "percent"
    return df


SECTION = Section("renorm", "Batch Renorm", INTRO, run, (SEEDS,), figure, table, notes, alt=alt)
