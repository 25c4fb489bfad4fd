"""Pre-norm vs post-norm: deep residual stacks at initialization and in a short training run.

A stack of L residual blocks, each `x + F(Norm(x))` (pre-norm), `Norm(x + F(x))`
(post-norm) or `x + F(x)` (no normalization). At initialization we measure, over
a few seeds, the activation scale after every block and the gradient reaching
every block's input, once through the whole network and once through the
identity (skip) paths alone; then a short full-batch Adam run shows which
placements diverge as depth or learning rate grows. Pure torch, seeded, CPU.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from normviz.methods import METHODS

PLACEMENTS: tuple[str, ...] = ("pre", "post", "none")
PLACEMENT_LABELS: dict[str, str] = {
    "pre": "pre-norm",
    "post": "post-norm",
    "none": "no normalization",
}
NORMS: tuple[str, ...] = ("layer", "rms")  # METHODS keys that sit in a residual stream
BLOCKS: dict[str, str] = {
    "mlp": "MLP block: Linear → ReLU → Linear",
    "mixer": "attention-free transformer block: token-mixing MLP, then feature MLP",
}
PRE_FORMULA = r"x_{l+1} = x_l + F_l\big(\mathrm{Norm}(x_l)\big)"
POST_FORMULA = r"x_{l+1} = \mathrm{Norm}\big(x_l + F_l(x_l)\big)"
NONE_FORMULA = r"x_{l+1} = x_l + F_l(x_l)"
FORMULAS: dict[str, str] = {"pre": PRE_FORMULA, "post": POST_FORMULA, "none": NONE_FORMULA}

MAX_DEPTH = 96
MAX_WIDTH = 256
MAX_SEEDS = 8
MAX_STEPS = 500
OUT_DIM = 4  # the regression target's size
DIVERGE_FACTOR = 100.0  # a loss this many times the initial one counts as diverged
STALL_FRACTION = 0.5  # a run that does not at least halve its loss counts as stalled


class ResidualConfigError(ValueError):
    """An experiment setting out of range; the message names the value and the range."""


@dataclass(frozen=True)
class StackConfig:
    """One residual stack: its shape, its norm and the data it sees."""

    depth: int = 24  # L residual blocks
    width: int = 64  # d features in the residual stream
    norm: str = "layer"  # "layer" or "rms" (a METHODS key)
    block: str = "mlp"  # "mlp" or "mixer" (key of BLOCKS)
    tokens: int = 8  # T tokens per sample (the mixer mixes along them)
    samples: int = 64  # samples in the (full) batch

    def check(self) -> None:
        """Raise ResidualConfigError when a value is out of range."""
        _check_int("depth", self.depth, 1, MAX_DEPTH)
        _check_int("width", self.width, 2, MAX_WIDTH)
        _check_int("tokens", self.tokens, 2, 64)
        _check_int("samples", self.samples, 2, 512)
        if self.norm not in NORMS:
            raise ResidualConfigError(
                f"norm must be one of {', '.join(NORMS)} (LayerNorm or RMSNorm), got {self.norm!r}"
            )
        if self.block not in BLOCKS:
            raise ResidualConfigError(
                f"block must be one of {', '.join(BLOCKS)}, got {self.block!r}"
            )

    @property
    def norm_label(self) -> str:
        return METHODS[self.norm].label


def _check_int(name: str, value: object, lo: int, hi: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or not lo <= value <= hi:
        raise ResidualConfigError(f"{name} must be a whole number from {lo} to {hi}, got {value!r}")


# ---- the model --------------------------------------------------------------------


def _norm_module(norm: str, d: int) -> nn.Module:
    # the torch layers themselves, so the page demonstrates what a model would use
    return nn.LayerNorm(d) if norm == "layer" else nn.RMSNorm(d, eps=1e-5)


class FeatureMLP(nn.Module):
    """F(x) = W₂ · ReLU(W₁ x + b₁) + b₂ along the feature axis, hidden width 4d."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)
        _he_init(self.fc1, self.fc2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.relu(self.fc1(x)))


class TokenMLP(nn.Module):
    """An MLP along the token axis (B, T, d) -> (B, T, d): tokens exchange information."""

    def __init__(self, t: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(t, 4 * t)
        self.fc2 = nn.Linear(4 * t, t)
        _he_init(self.fc1, self.fc2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.relu(self.fc1(x.transpose(1, 2)))).transpose(1, 2)


def _he_init(fc1: nn.Linear, fc2: nn.Linear) -> None:
    """He init: a branch roughly keeps its input's variance (PyTorch's default init is smaller)."""
    nn.init.kaiming_normal_(fc1.weight, nonlinearity="relu")
    nn.init.normal_(fc2.weight, std=1 / math.sqrt(fc2.in_features))
    nn.init.zeros_(fc1.bias)
    nn.init.zeros_(fc2.bias)


class Sublayer(nn.Module):
    """One residual connection around `branch`, with the norm placed as asked."""

    def __init__(self, branch: nn.Module, norm: str, d: int, placement: str) -> None:
        super().__init__()
        self.branch = branch
        self.placement = placement
        self.norm = _norm_module(norm, d) if placement != "none" else nn.Identity()

    def forward(self, x: torch.Tensor, skip_only: bool = False) -> torch.Tensor:
        """skip_only: the branch output counts as a constant, so gradients take the skip path."""
        if self.placement == "pre":
            f = self.branch(self.norm(x))
            return x + (f.detach() if skip_only else f)
        f = self.branch(x)
        out = x + (f.detach() if skip_only else f)
        return self.norm(out) if self.placement == "post" else out


class ResidualStack(nn.Module):
    """L residual blocks, a final norm for pre-norm (as GPT-2 has), and a linear readout."""

    def __init__(self, cfg: StackConfig, placement: str) -> None:
        super().__init__()
        if placement not in PLACEMENTS:
            raise ResidualConfigError(
                f"placement must be one of {', '.join(PLACEMENTS)}, got {placement!r}"
            )
        d = cfg.width
        self.placement = placement
        self.blocks = nn.ModuleList()
        for _ in range(cfg.depth):
            subs = [Sublayer(FeatureMLP(d), cfg.norm, d, placement)]
            if cfg.block == "mixer":
                subs.insert(0, Sublayer(TokenMLP(cfg.tokens), cfg.norm, d, placement))
            self.blocks.append(nn.ModuleList(subs))
        # pre-norm leaves the stream unnormalized, so real models normalize once at the end
        self.final_norm = _norm_module(cfg.norm, d) if placement == "pre" else nn.Identity()
        self.head = nn.Linear(d, OUT_DIM)

    def forward(
        self,
        x: torch.Tensor,
        skip_only: bool = False,
        block_inputs: list[torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """x: (B, T, d) -> (B, T, OUT_DIM); appends each block's input to `block_inputs`."""
        h = x
        for block in self.blocks:
            if block_inputs is not None:
                block_inputs.append(h)
            for sub in block:
                h = sub(h, skip_only)
        if block_inputs is not None:
            block_inputs.append(h)  # the stream after the last block
        return self.head(self.final_norm(h))


def build_stack(cfg: StackConfig, placement: str, seed: int) -> ResidualStack:
    """The stack for one placement; the same seed gives the same branch weights to all three."""
    cfg.check()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return ResidualStack(cfg, placement)


# ---- data: a fixed random teacher --------------------------------------------------


def make_task(cfg: StackConfig, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs x ~ N(0, 1) of shape (B, T, d) and targets from a random two-layer teacher."""
    g = torch.Generator().manual_seed(10_000 + seed)
    x = torch.randn(cfg.samples, cfg.tokens, cfg.width, generator=g)
    a = torch.randn(cfg.width, 2 * cfg.width, generator=g) / math.sqrt(cfg.width)
    b = torch.randn(2 * cfg.width, OUT_DIM, generator=g) / math.sqrt(2 * cfg.width)
    # tokens see their neighbours' mean, so the token-mixing branch has something to learn
    ctx = x + x.mean(dim=1, keepdim=True)
    y = torch.tanh(ctx @ a) @ b
    return x, y / y.std()


def task_loss(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.mse_loss(out, y)


# ---- statistics at initialization -------------------------------------------------


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
                    f"{name}: the stream is renormalized to RMS 1 after every block, but each "
                    f"norm also rescales the gradient passing back through it: along the skip "
                    f"paths alone only {skip:.2g} of the gradient reaches block 0, so block 0 "
                    "learns only through the branches."
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


StatsFn = Callable[[StackConfig, str, int], tuple[np.ndarray, np.ndarray, np.ndarray]]
TrainFn = Callable[[StackConfig, str, float, int, int], tuple[np.ndarray, int | None]]


def init_profile(
    cfg: StackConfig,
    seeds: tuple[int, ...] = (0, 1, 2),
    placements: tuple[str, ...] = PLACEMENTS,
    progress: Callable[[float], None] | None = None,
    compute: StatsFn | None = None,
) -> InitProfile:
    """Activation RMS and gradient norms after every block, for each placement and seed.

    `compute` replaces stack_statistics (a page passes a cached wrapper of it).
    """
    compute = compute or stack_statistics
    cfg.check()
    if not 1 <= len(seeds) <= MAX_SEEDS:
        raise ResidualConfigError(f"use 1 to {MAX_SEEDS} seeds, got {len(seeds)}")
    shape = (len(placements), len(seeds), cfg.depth + 1)
    act, grad, skip = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    total = len(placements) * len(seeds)
    for i, p in enumerate(placements):
        for j, s in enumerate(seeds):
            act[i, j], grad[i, j], skip[i, j] = compute(cfg, p, s)
            if progress is not None:
                progress((i * len(seeds) + j + 1) / total)
    return InitProfile(cfg, tuple(placements), tuple(seeds), act, grad, skip)


# ---- a short training run ---------------------------------------------------------


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
        raise ResidualConfigError(f"learning rate must be a number, got {lr!r}") from e
    if not 0 < lr <= 1:
        raise ResidualConfigError(f"learning rate must be in (0, 1], got {lr}")
    return lr


def train_stack(
    cfg: StackConfig, placement: str, lr: float, steps: int, seed: int = 0
) -> tuple[np.ndarray, int | None]:
    """Full-batch Adam on the teacher task; (losses before each step + final, diverged step)."""
    lr = _check_lr(lr)
    _check_int("steps", steps, 1, MAX_STEPS)
    model = build_stack(cfg, placement, seed)
    x, y = make_task(cfg, seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses = np.full(steps + 1, np.nan)
    first = math.nan
    for k in range(steps + 1):
        loss = task_loss(model(x), y)
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
    train: TrainFn | None = None,
) -> TrainRun:
    """train_stack for every placement, from the same initial branch weights and data.

    `train` replaces train_stack (a page passes a cached wrapper of it).
    """
    cfg.check()
    lr = _check_lr(lr)
    train = train or train_stack
    rows, div = [], []
    for i, p in enumerate(placements):
        losses, at = train(cfg, p, lr, steps, seed)
        rows.append(losses)
        div.append(at)
        if progress is not None:
            progress((i + 1) / len(placements))
    return TrainRun(cfg, float(lr), int(steps), tuple(placements), np.stack(rows), tuple(div))
