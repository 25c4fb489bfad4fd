"""A short training run: full-batch Adam on every placement, from the same start.

The stacks learn to imitate a fixed random network; a run whose loss turns
non-finite or grows a hundredfold is stopped and counted as diverged, one that
does not halve its loss as stalled. The page runs it only when asked (a button).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
import torch

from normviz import style
from normviz.figures.spec import Spec, trace
from normviz.gate import Gate
from normviz.knobs import Knob, Value
from normviz.residual import model
from normviz.residual.curves import PLACEMENT_COLOURS, hover, line, rounded
from normviz.residual.model import PLACEMENT_LABELS, PLACEMENTS, Setup, StackConfig
from normviz.sections import Progress, Section
from normviz.text import direction

N_STACKS = {3: "three", 4: "four", 5: "five", 6: "six"}.get(len(PLACEMENTS), str(len(PLACEMENTS)))
INTRO = (
    "The stacks learn to imitate a fixed random network (mean squared error, full-batch "
    "Adam, no warm-up), one stack per placement. Try a deeper stack or a larger learning "
    "rate and read which ones still learn: the verdict under the chart is computed from "
    "the run."
)
BUTTON = f"Train the {N_STACKS} stacks"
WAITING = f"Press **Train** to run the {N_STACKS} stacks."
CLOSE = 1.25  # final losses within this factor of each other count as "about the same"
STALE = "Showing the last run; press **Train** again for the settings above."
MAX_STEPS = 500
DIVERGE_FACTOR = 100.0  # a loss this many times the initial one counts as diverged
STALL_FRACTION = 0.5  # a run that does not at least halve its loss counts as stalled
# Width, depth and steps are capped below what the model allows: the largest run
# (width 64, 16 mixer blocks, 100 steps, five stacks) cost 16 s on this 2-core VM
# while it was shared (3 to 4.6 s a normalized stack, no normalization diverges at
# once; `python -m benchmarks.training` prints it), and GATE lets one
# run at a time per process, so a class clicking Train at once queues (with a message)
# instead of sharing the cores and all waiting the sum.
TRAIN_WIDTHS: tuple[int, ...] = tuple(w for w in model.WIDTHS if w <= 64)
KNOBS: tuple[Knob, ...] = (
    *model.stack_knobs("tr_", TRAIN_WIDTHS),
    Knob("tr_depth", 12, lo=1, hi=16, label="Depth L (blocks)"),
    Knob("lr", 1e-2, choices=(1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1), label="Learning rate"),
    Knob("tr_steps", 80, lo=10, hi=100, label="Adam steps", step=10),
)
GATE = Gate("training runs", slots=1, one="training run")


@dataclass(frozen=True)
class TrainRun:
    """Loss per step for each placement; NaN after a run diverged (and was stopped)."""

    config: StackConfig
    lr: float
    steps: int
    placements: tuple[str, ...]
    losses: np.ndarray  # (placement, steps + 1): loss before step k (k = 0..steps)
    diverged_at: tuple[int | None, ...]  # first step whose loss was non-finite or exploded

    def final(self, placement: str) -> float:
        """The last finite loss of a placement (NaN if none)."""
        row = self.losses[self.placements.index(placement)]
        finite = row[np.isfinite(row)]
        return float(finite[-1]) if finite.size else math.nan

    def diverged(self, placement: str) -> bool:
        return self.diverged_at[self.placements.index(placement)] is not None

    def trained(self, placement: str) -> bool:
        """Did not diverge and at least halved its loss."""
        start = float(self.losses[self.placements.index(placement), 0])
        return not self.diverged(placement) and self.final(placement) < STALL_FRACTION * start

    def outcome(self, placement: str) -> str:
        """One phrase: diverged, stalled (less than halved) or trained, with the numbers."""
        i = self.placements.index(placement)
        start, end = float(self.losses[i, 0]), self.final(placement)
        at = self.diverged_at[i]
        if at is not None:
            return f"diverged at step {at} (loss started at {start:.3g})"
        if not end < STALL_FRACTION * start:
            return f"stalled: loss {start:.3g} → {end:.3g} in {self.steps} steps"
        return f"trained: loss {start:.3g} → {end:.3g} in {self.steps} steps"


def _check_lr(lr: float) -> float:
    try:
        lr = float(lr)
    except (TypeError, ValueError) as e:
        raise model.ResidualConfigError(f"learning rate must be a number, got {lr!r}") from e
    if not 0 < lr <= 1:
        raise model.ResidualConfigError(f"learning rate must be in (0, 1], got {lr}")
    return lr


def train_stack(
    cfg: StackConfig, placement: str, lr: float, steps: int, seed: int = 0
) -> tuple[np.ndarray, int | None]:
    """Full-batch Adam on the teacher task; (losses before each step + final, diverged step)."""
    lr = _check_lr(lr)
    model.check_int("steps", steps, 1, MAX_STEPS)
    net = model.build_stack(cfg, placement, seed)
    x, y = model.make_task(cfg, seed)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    losses = np.full(steps + 1, np.nan)
    first = math.nan
    for k in range(steps + 1):
        loss = model.task_loss(net(x), y)
        value = float(loss.detach())
        if k == 0:
            first = value
        if not math.isfinite(value) or value > DIVERGE_FACTOR * first:
            return losses, k
        losses[k] = value
        if k == steps:
            break
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return losses, None


def train_all(
    cfg: StackConfig,
    lr: float,
    steps: int,
    seed: int = 0,
    placements: tuple[str, ...] = PLACEMENTS,
    progress: Callable[[float], None] | None = None,
) -> TrainRun:
    """train_stack for every placement, from the same initial branch weights and data."""
    cfg.check()
    lr = _check_lr(lr)
    rows, div = [], []
    for i, p in enumerate(placements):
        losses, at = train_stack(cfg, p, lr, steps, seed)
        rows.append(losses)
        div.append(at)
        if progress is not None:
            progress((i + 1) / len(placements))
    return TrainRun(cfg, float(lr), int(steps), tuple(placements), np.stack(rows), tuple(div))


def run(setup: Setup, knobs: Mapping[str, Value], progress: Progress) -> TrainRun:
    """Every placement trained with the knobs' stack, learning rate and steps (one
    run at a time in this process: the others wait in GATE, told so)."""
    with GATE.enter(progress):
        return train_all(
            model.stack_config(setup, knobs, "tr_"),
            float(knobs["lr"]),  # type: ignore[arg-type]
            int(knobs["tr_steps"]),  # type: ignore[call-overload]
            progress=lambda f: progress(f, f"Training: {', '.join(PLACEMENT_LABELS.values())}…"),
        )


def make_loss_figure(run: TrainRun, presenter: bool = False) -> go.Figure:
    """Training loss per step for each placement (log y); a cross marks where a run diverged."""
    fig = Spec()
    for i, p in enumerate(run.placements):
        losses = run.losses[i]
        colour = PLACEMENT_COLOURS[p]
        fig.add_trace(
            trace(
                "scatter",
                y=rounded(losses),
                x0=0,
                dx=1,
                mode="lines",
                line=line(p),
                name=PLACEMENT_LABELS[p],
                legendgroup=p,
                hovertemplate=hover(p, "step"),
            )
        )
        at = run.diverged_at[i]
        if at is not None:
            last = losses[:at][np.isfinite(losses[:at])]
            y = float(last[-1]) if last.size else 1.0
            fig.add_trace(
                trace(
                    "scatter",
                    x=[at],
                    y=rounded([y]),
                    mode="markers+text",
                    marker={"symbol": "x", "size": 16, "color": colour},
                    text=[f"diverged at step {at}"],
                    textposition="middle right",
                    name=f"{PLACEMENT_LABELS[p]} diverged",
                    legendgroup=p,
                    showlegend=False,
                )
            )
    fig.update_yaxes(style.log_axis(run.losses) | {"title": {"text": "training loss (MSE)"}})
    fig.update_xaxes({"title": {"text": "Adam step"}})
    cfg = run.config
    fig.update_layout(
        title={"text": f"Training {cfg.depth} blocks at learning rate {run.lr:g}"},
        legend=style.LEGEND_BELOW,
    )
    return style.apply(fig, presenter, height=420).figure()


def _compare(run: TrainRun, a: str, b: str) -> str:
    """How a's final loss compares with b's, in words from the two numbers."""
    fa, fb = run.final(a), run.final(b)
    word = {-1: "lower than", 0: "about the same as", 1: "higher than"}[
        direction(fa / fb, CLOSE) if fb > 0 else 1
    ]
    return f"{PLACEMENT_LABELS[a]}'s final loss {fa:.3g} is {word} {PLACEMENT_LABELS[b]}'s {fb:.3g}"


def verdicts(run: TrainRun) -> tuple[str, ...]:
    """What this run says about the two newer placements, each against the one it modifies."""
    out = []
    ps = set(run.placements)
    L = run.config.depth
    if {"post", "deepnorm"} <= ps:
        deep, post = run.trained("deepnorm"), run.trained("post")
        if deep and not post:
            head = f"DeepNorm's up-weighted skip path kept post-norm trainable at L = {L}"
        elif deep and post:
            head = f"Post-norm trained here too (L = {L}), with or without DeepNorm"
        elif post:
            head = f"DeepNorm did not train here (L = {L}) although post-norm did"
        else:
            head = f"DeepNorm did not rescue post-norm here (L = {L}): neither trained"
        out.append(
            f"**Verdict, DeepNorm vs post-norm**: {head}; {_compare(run, 'deepnorm', 'post')}."
        )
    if {"pre", "peri"} <= ps:
        peri, pre = run.trained("peri"), run.trained("pre")
        state = {
            (True, True): "both trained",
            (True, False): "only Peri-LN trained",
            (False, True): "only pre-norm trained",
            (False, False): "neither trained",
        }[(peri, pre)]
        out.append(f"**Verdict, Peri-LN vs pre-norm**: {state}; {_compare(run, 'peri', 'pre')}.")
    return tuple(out)


def notes(result: TrainRun) -> tuple[str, ...]:
    """How each placement's run ended, with its numbers, then the verdicts."""
    ends = tuple(f"- **{PLACEMENT_LABELS[p]}**: {result.outcome(p)}" for p in result.placements)
    return (*ends, *verdicts(result))


SECTION = Section(
    "training", "A short training run", INTRO, run, KNOBS, make_loss_figure, notes=notes
)
