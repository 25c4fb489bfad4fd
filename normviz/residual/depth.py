"""At initialization: activation scale and gradients against depth, for every placement.

Before any training, one batch goes through a stack of L blocks and back, for each
placement and a few seeds. We record the RMS of the residual stream after every
block and the gradient reaching every block's input, once through the whole
network and once through the identity (skip) paths alone.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
import torch

from normviz import style
from normviz.figures.spec import Spec
from normviz.gate import Gate
from normviz.knobs import Knob, Value
from normviz.residual.curves import finish_panels, median_traces
from normviz.residual.model import (
    BLOCK_NOUNS,
    DEEPNORM_VARIANT,
    PLACEMENT_LABELS,
    PLACEMENT_TABLE,
    PLACEMENTS,
    ResidualConfigError,
    Setup,
    StackConfig,
    build_stack,
    deepnorm_alpha,
    deepnorm_beta,
    deepnorm_layers,
    make_task,
    stack_config,
    stack_knobs,
    task_loss,
)
from normviz.sections import Progress, Section
from normviz.text import direction

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
    "input; the same seed gives every placement the same weights (DeepNorm's scaled by β) "
    "and data. A final norm before the readout: "
    + ", ".join(
        f"{spec.label} {'yes' if spec.final_norm else 'no'}" for spec in PLACEMENT_TABLE.values()
    )
    + "."
)
MAX_SEEDS = 8
# Depth and seeds are capped below what the model allows. Even so the sweep at the knobs'
# maxima (64 mixer blocks, width 128, 4 seeds, every placement) cost 62 s of CPU (247 s of
# wall time on this 2-core VM while it was shared; `python -m benchmarks.training` prints
# it), so GATE lets one sweep compute at a time per process: a class moving the sliders at
# once queues (told so) instead of sharing the cores and all waiting the sum. A sweep the
# page has cached never reaches the gate, so a rerun stays instant.
GATE = Gate("initialization sweeps", slots=1, one="initialization sweep")
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

    def growth(self, placement: str) -> np.ndarray:
        """Per seed: the stream's RMS after the last block / after the first (1 at L = 1)."""
        arr = self.act_rms[self.placements.index(placement)]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return arr[:, -1] / arr[:, 1]

    def spread(self, placement: str) -> np.ndarray:
        """Per seed: the gradient at the input (block 0) / the one after the last block."""
        arr = self.grad_norm[self.placements.index(placement)]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return arr[:, 0] / arr[:, -1]

    def exponent(self, placement: str) -> float:
        """Median over seeds of k in RMS ∝ l^k, fitted over blocks 1..L (NaN if L < 3)."""
        arr = self.act_rms[self.placements.index(placement)][:, 1:]
        if arr.shape[1] < 3 or not np.isfinite(arr).all() or (arr <= 0).any():
            return math.nan
        logl = np.log(np.arange(1, arr.shape[1] + 1))
        return float(np.median([np.polyfit(logl, np.log(row), 1)[0] for row in arr]))

    def verdict(self, placement: str) -> Verdict:
        """Bounded or growing stream, even or uneven gradient: per seed, then agreed or not."""
        over = self.overflow_block(placement)
        scale = ["grows" if not g <= BOUNDED else "bounded" for g in self.growth(placement)]
        grad = [_spread_word(r) for r in self.spread(placement)]
        return Verdict(placement, self.seeds, tuple(scale), tuple(grad), over)

    def notes(self) -> tuple[str, ...]:
        """One sentence per placement with this run's numbers and how far the seeds agree,
        then which placements keep the stream bounded."""
        out = [self._note(p) for p in self.placements]
        verdicts = [self.verdict(p) for p in self.placements]
        groups = {
            "bounded in every seed": [v for v in verdicts if v.scale_word == "bounded"],
            "growing in every seed": [v for v in verdicts if v.scale_word == "grows"],
            "mixed across seeds": [v for v in verdicts if v.scale_word is None],
        }
        parts = [
            f"{name}: {', '.join(PLACEMENT_LABELS[v.placement] for v in vs)}"
            for name, vs in groups.items()
            if vs
        ]
        n = len(self.seeds)
        out.append(
            f"**Verdict** on the stream's scale after {self.depth} blocks ({n} seed(s); "
            f"bounded = at most {BOUNDED:g}× its RMS after block 1): " + "; ".join(parts) + "."
        )
        return tuple(out)

    def _note(self, p: str) -> str:
        i = self.placements.index(p)
        L, n = self.depth, len(self.seeds)
        v = self.verdict(p)
        act = float(np.median(self.act_rms[i][:, -1]))
        growth = float(np.median(self.growth(p)))
        spread = float(np.median(self.spread(p)))
        name = PLACEMENT_LABELS[p]
        name = name[0].upper() + name[1:]
        if v.overflow is not None:
            scale = f"the stream's RMS overflows float32 at block {v.overflow}"
        else:
            k = self.exponent(p) if PLACEMENT_TABLE[p].norm else math.nan  # none: exponential
            power = f", about ∝ l^{k:.2f}" if math.isfinite(k) and v.scale_word == "grows" else ""
            verb = "grows to" if v.scale_word == "grows" else "stays at"
            scale = (
                f"the stream's RMS {verb} {act:.3g} after {L} blocks "
                f"(×{growth:.3g} from block 1{power})"
            )
        tag = {
            "even": f" (within {SPREAD:g}× either way)",
            "larger": f" (more than {SPREAD:g}×)",
            "smaller": f" (less than 1/{SPREAD:g})",
        }.get(v.grad_word or "", "")
        grad = f"the gradient at block 0 is {spread:.3g}× the one at the top{tag}"
        agree = (
            f"in each of the {n} seeds" if v.agreed else f"mixed across the {n} seeds: {v.tally}"
        )
        why = _why(self, p)
        return f"{name}: {scale}, and {grad}, {agree}. {why}".rstrip()


BOUNDED = 1.5  # a stream at most this many times its RMS after block 1 counts as bounded
SPREAD = 2.0  # a gradient ratio within this factor either way counts as "about even"


def _spread_word(r: float) -> str:
    return {-1: "smaller", 0: "even", 1: "larger"}[direction(float(r), SPREAD)]


@dataclass(frozen=True)
class Verdict:
    """One placement's words, one per seed: "bounded"/"grows", "even"/"larger"/"smaller"."""

    placement: str
    seeds: tuple[int, ...]
    scale: tuple[str, ...]
    grad: tuple[str, ...]
    overflow: int | None  # first block where some seed overflowed float32

    @property
    def scale_word(self) -> str | None:
        return self.scale[0] if len(set(self.scale)) == 1 else None

    @property
    def grad_word(self) -> str | None:
        return self.grad[0] if len(set(self.grad)) == 1 else None

    @property
    def agreed(self) -> bool:
        return self.scale_word is not None and self.grad_word is not None

    @property
    def tally(self) -> str:
        pairs = zip(self.seeds, self.scale, self.grad, strict=True)
        return "; ".join(f"seed {j}: {s} stream, {g} gradient" for j, s, g in pairs)


def _why(prof: InitProfile, p: str) -> str:
    """Why the placement does that, with the numbers that show it."""
    spec = PLACEMENT_TABLE[p]
    skip = prof.ratio(p, "skip_grad_norm")
    if spec.deepnorm:
        n = deepnorm_layers(prof.depth, prof.config.block)
        a, b = deepnorm_alpha(n), deepnorm_beta(n)
        return (
            f"The skip path carries α·x with α = (2N)^(1/4) = {a:.3g} and the branches start "
            f"β = (8N)^(−1/4) = {b:.3g} times smaller ({DEEPNORM_VARIANT} constants, N = {n:g} "
            f"for {prof.depth} {BLOCK_NOUNS[prof.config.block]} blocks), so each sum is mostly "
            "the skip path and the norm after it "
            f"rescales the gradient less: along the skip paths alone {skip:.2g} of the "
            "output's gradient reaches block 0."
        )
    if spec.norm_out:
        return (
            "Every branch's output is normalized before it is added, so each block adds a "
            "correction of RMS about 1 and the skip path stays a plain sum: the skip paths "
            f"alone deliver the output's gradient to block 0 (ratio {skip:.3g})."
        )
    if not spec.norm:
        return "Nothing controls the scale; the skip paths pass gradients straight through."
    if spec.final_norm:
        return (
            "Every block adds to the stream and nothing renormalizes it until the final norm; "
            f"the skip paths alone deliver the output's gradient to block 0 (ratio {skip:.3g})."
        )
    return (
        "Every block renormalizes the stream, and each norm also rescales the gradient "
        f"passing back through it: along the skip paths alone only {skip:.2g} of the output's "
        "gradient reaches block 0 (the rest of it travels through the later blocks' branches)."
    )


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
    """The profile of the stacks the knobs describe, seeds 0 .. n_seeds − 1 (one sweep at a
    time in this process: the others wait in GATE, told so)."""
    cfg = stack_config(setup, knobs)
    seeds = tuple(range(int(knobs["n_seeds"])))  # type: ignore[call-overload]
    with GATE.enter(progress):
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
