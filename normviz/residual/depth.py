"""At initialization: activation scale and gradients against depth, for the three placements.

Before any training, one batch goes through a stack of L blocks and back, for each
placement and a few seeds. We record the RMS of the residual stream after every
block and the gradient reaching every block's input, once through the whole
network and once through the identity (skip) paths alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
import torch

from normviz import style
from normviz.figures.spec import Spec
from normviz.knobs import Knob, Value
from normviz.residual.curves import finish_panels, median_traces
from normviz.residual.model import (
    PLACEMENT_LABELS,
    PLACEMENTS,
    ResidualConfigError,
    Setup,
    StackConfig,
    build_stack,
    make_task,
    stack_config,
    stack_knobs,
    task_loss,
)
from normviz.sections import Progress, Section

LABEL = "At initialization: scale and gradients, block by block"
INTRO = (
    "Before any training, push one batch through a stack of L blocks and back. "
    "The left panel is the size of the residual stream after each block, the middle "
    "one the gradient that reaches each block's input. The right panel keeps only the "
    "skip paths (the branches' outputs count as constants): it shows what the identity "
    "path alone delivers. All of this is about gradients on their way to the *input*; why "
    "post-norm needs learning-rate warm-up is a different story, told by the gradients "
    "near the *output* (next section)."
)
INIT_NOTE = (
    "Branch weights use He initialization so that each F roughly keeps the scale of its "
    "input; the same seed gives the three placements the same weights and data. "
    "Post-norm has no final norm, pre-norm has one, no normalization has none."
)
MAX_SEEDS = 8
# Depth and seeds are capped below what the model allows: they keep the worst first
# run of the page to seconds on two cores.
KNOBS: tuple[Knob, ...] = (
    *stack_knobs(""),
    Knob("depth", 24, lo=1, hi=64, label="Depth L (blocks)"),
    Knob("n_seeds", 3, lo=1, hi=4, label="Seeds"),
)

# two short lines each: a third of a phone-wide chart holds about 20 characters a line
PANELS: tuple[tuple[str, str], ...] = (
    ("act_rms", "Activation RMS of the stream"),
    ("grad_norm", "Gradient norm at the block's input"),
    ("skip_grad_norm", "Gradient through the skip paths alone"),
)


@dataclass(frozen=True)
class InitProfile:
    """Per-block statistics at initialization; arrays are (placement, seed, position).

    Position 0 is the network's input and position l the stream after block l, so
    each array has depth + 1 columns.
    """

    config: StackConfig
    placements: tuple[str, ...]
    seeds: tuple[int, ...]
    act_rms: np.ndarray  # RMS of the residual stream
    grad_norm: np.ndarray  # ‖∂loss/∂x_l‖, through every path
    skip_grad_norm: np.ndarray  # ‖∂loss/∂x_l‖ when gradients may use the skip paths only

    @property
    def depth(self) -> int:
        return self.config.depth

    def ratio(self, placement: str, what: str = "grad_norm") -> float:
        """Median over seeds of (value at block 0) / (value after the last block)."""
        arr = getattr(self, what)[self.placements.index(placement)]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return float(np.median(arr[:, 0] / arr[:, -1]))

    def overflow_block(self, placement: str) -> int | None:
        """The first position where some seed's activations overflowed float32, else None."""
        arr = self.act_rms[self.placements.index(placement)]
        bad = np.flatnonzero(~np.isfinite(arr).all(axis=0))
        return int(bad[0]) if bad.size else None

    def notes(self) -> tuple[str, ...]:
        """What the three panels show, one sentence per placement, with this run's numbers."""
        out = []
        L = self.depth
        for p in self.placements:
            i = self.placements.index(p)
            act = float(np.median(self.act_rms[i][:, -1]))
            skip = self.ratio(p, "skip_grad_norm")
            full = self.ratio(p, "grad_norm")
            name = PLACEMENT_LABELS[p].capitalize()
            if p == "pre":
                out.append(
                    f"{name}: the stream's RMS grows to {act:.3g} after {L} blocks, since every "
                    f"block adds to it; the skip paths alone deliver the output's gradient to "
                    f"block 0 unchanged (ratio {skip:.3g}), and the full gradient there is "
                    f"{full:.3g}× the one at the top."
                )
            elif p == "post":
                out.append(
                    f"{name}: the stream is renormalized to RMS 1 after every block, and each "
                    f"norm also rescales the gradient passing back through it: along the skip "
                    f"paths alone only {skip:.2g} of the output's gradient reaches block 0. "
                    "Block 0's own parameters still get a gradient: it travels down the skip "
                    "connections (through their norms) and through every later block's branch, "
                    f"and in full it is {full:.3g}× the one at the top."
                )
            else:
                over = self.overflow_block(p)
                grow = (
                    f"overflows float32 at block {over}"
                    if over is not None
                    else f"grows to {act:.3g} after {L} blocks"
                )
                out.append(
                    f"{name}: the skip paths pass gradients straight through, but nothing "
                    f"controls the scale: the activation RMS {grow}, and the gradient at block 0 "
                    f"is {full:.3g}× the one at the top."
                )
        return tuple(out)


def stack_statistics(
    cfg: StackConfig, placement: str, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(act_rms, grad_norm, skip_grad_norm), each of length depth + 1, for one model."""
    model = build_stack(cfg, placement, seed)
    x, y = make_task(cfg, seed)
    rows = []
    for skip_only in (False, True):
        inputs: list[torch.Tensor] = []
        xin = x.clone().requires_grad_(True)
        out = model(xin, skip_only=skip_only, block_inputs=inputs)
        grads = torch.autograd.grad(task_loss(out, y), inputs, allow_unused=True)
        rows.append([0.0 if g is None else float(g.norm()) for g in grads])
        if not skip_only:
            rms = [float(h.detach().pow(2).mean().sqrt()) for h in inputs]
    return np.array(rms), np.array(rows[0]), np.array(rows[1])


def init_profile(
    cfg: StackConfig,
    seeds: tuple[int, ...] = (0, 1, 2),
    placements: tuple[str, ...] = PLACEMENTS,
    progress: Callable[[float], None] | None = None,
) -> InitProfile:
    """Activation RMS and gradient norms after every block, for each placement and seed."""
    cfg.check()
    if not 1 <= len(seeds) <= MAX_SEEDS:
        raise ResidualConfigError(f"use 1 to {MAX_SEEDS} seeds, got {len(seeds)}")
    shape = (len(placements), len(seeds), cfg.depth + 1)
    act, grad, skip = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    total = len(placements) * len(seeds)
    for i, p in enumerate(placements):
        for j, s in enumerate(seeds):
            act[i, j], grad[i, j], skip[i, j] = stack_statistics(cfg, p, s)
            if progress is not None:
                progress((i * len(seeds) + j + 1) / total)
    return InitProfile(cfg, tuple(placements), tuple(seeds), act, grad, skip)


def run(setup: Setup, knobs: Mapping[str, Value], progress: Progress) -> InitProfile:
    """The profile of the stacks the knobs describe, seeds 0 .. n_seeds − 1."""
    cfg = stack_config(setup, knobs)
    seeds = tuple(range(int(knobs["n_seeds"])))  # type: ignore[call-overload]
    return init_profile(
        cfg, seeds, progress=lambda f: progress(f, "Measuring the untrained stacks…")
    )


def make_depth_figure(profile: InitProfile, presenter: bool = False) -> go.Figure:
    """Three panels against block index, one under another: activation RMS, gradient
    norm, skip-path gradient.

    A line is the median over seeds, the band the range across seeds; y is logarithmic.
    Values that overflowed float32 (inf) leave a gap.
    """
    # one panel per row, sharing the depth axis: side by side, three panels and their
    # titles did not fit a phone's column (issue 27), and one under another reads at
    # every width
    n = len(PANELS)
    fig = Spec.grid(
        n, 1, tuple(title for _, title in PANELS), shared_xaxes=True, vertical_spacing=0.12
    )
    L = profile.depth
    xs = list(range(L + 1))
    for row, (attr, _) in enumerate(PANELS, start=1):
        data = getattr(profile, attr)
        for i, p in enumerate(profile.placements):
            for trace in median_traces(xs, data[i], p, "block", legend=row == 1):
                fig.add_trace(trace, row=row, col=1)
        # three labels at most: a panel is 190 px tall, five ran into each other
        fig.update_yaxes(style.log_axis(data, most=3), row=row, col=1)
    # one x title, under the bottom panel
    fig.update_xaxes({"title": {"text": "block l (0 = input)"}}, row=n, col=1)
    cfg = profile.config
    title = (
        f"{cfg.depth} blocks, width {cfg.width}, {cfg.norm_label}:<br>"
        f"median of {len(profile.seeds)} seed(s), band = range"
    )
    return finish_panels(fig, title, presenter, height=190 * n + 140)


def notes(profile: InitProfile) -> tuple[str, ...]:
    """One bullet per placement, with this run's numbers, then how the stacks were built."""
    return (*(f"- {n}" for n in profile.notes()), INIT_NOTE)


SECTION = Section("init", LABEL, INTRO, run, KNOBS, make_depth_figure, notes=notes)
