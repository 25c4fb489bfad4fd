"""The residual stack the page measures and trains, and the task it learns.

A stack of L residual blocks, each one of the update rules in PLACEMENT_TABLE
(pre-norm, post-norm, Peri-LN, DeepNorm, no normalization), built from torch's own
layers, and a fixed random teacher network whose outputs are the regression targets.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from normviz.errors import NormConfigError
from normviz.knobs import Knob, Value
from normviz.methods import METHODS, listed

NORMS: tuple[str, ...] = listed("residual")  # METHODS keys that sit in a residual stream
BLOCKS: dict[str, str] = {
    "mlp": "MLP block: Linear → ReLU → Linear",
    "mixer": "attention-free transformer block: token-mixing MLP, then feature MLP",
}
MAX_DEPTH = 96
MAX_WIDTH = 256
OUT_DIM = 4  # the regression target's size


class ResidualConfigError(NormConfigError):
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
        check_int("depth", self.depth, 1, MAX_DEPTH)
        check_int("width", self.width, 2, MAX_WIDTH)
        check_int("tokens", self.tokens, 2, 64)
        check_int("samples", self.samples, 2, 512)
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


def check_int(name: str, value: object, lo: int, hi: int) -> None:
    """Raise ResidualConfigError unless `value` is a whole number from lo to hi."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or not lo <= value <= hi:
        raise ResidualConfigError(f"{name} must be a whole number from {lo} to {hi}, got {value!r}")


# ---- the model --------------------------------------------------------------------


def _norm_module(norm: str, d: int) -> nn.Module:
    # the torch layers themselves, so the page demonstrates what a model would use
    return METHODS[norm].build("BTC", (1, 1, d), eps=1e-5)


class FeatureMLP(nn.Module):
    """F(x) = W₂ · ReLU(W₁ x + b₁) + b₂ along the feature axis, hidden width 4d."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)
        _he_init(self.fc1, self.fc2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.relu(self.fc1(x)))


class TokenMLP(FeatureMLP):
    """An MLP along the token axis (B, T, d) -> (B, T, d): tokens exchange information."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.transpose(1, 2)).transpose(1, 2)


def _he_init(fc1: nn.Linear, fc2: nn.Linear) -> None:
    """He init: a branch roughly keeps its input's variance (PyTorch's default init is smaller)."""
    nn.init.kaiming_normal_(fc1.weight, nonlinearity="relu")
    nn.init.normal_(fc2.weight, std=1 / math.sqrt(fc2.in_features))
    nn.init.zeros_(fc1.bias)
    nn.init.zeros_(fc2.bias)


# DeepNorm's constants (Wang et al. 2022, their table of α and β): an N-layer encoder-only
# model takes α = (2N)^(1/4), β = (8N)^(−1/4); a decoder-only one the same with its M
# layers; an encoder-decoder model other ones, each depending on both N and M. The stacks
# here are one stream with no cross-attention: the encoder-only constants.
DEEPNORM_VARIANT = "encoder-only"
# The paper's layer holds two residual sublayers (attention, then feed-forward), and its 2N
# counts the model's sublayers. A mixer block holds two (token MLP, feature MLP); an MLP
# block one.
SUBLAYERS: dict[str, int] = {"mlp": 1, "mixer": 2}
BLOCK_NOUNS: dict[str, str] = {"mlp": "MLP", "mixer": "mixer"}  # "24 MLP blocks"


def deepnorm_layers(depth: int, block: str) -> float:
    """DeepNorm's N for a stack of `depth` blocks: its sublayers / 2, so N = L for mixer
    blocks and N = L/2 for MLP blocks."""
    return depth * SUBLAYERS[block] / 2


def deepnorm_alpha(n_layers: float) -> float:
    """DeepNorm's up-weighting of the skip path, α = (2N)^(1/4), for an N-layer encoder-only
    stack (Wang et al. 2022)."""
    return (2 * n_layers) ** 0.25


def deepnorm_beta(n_layers: float) -> float:
    """DeepNorm's gain on the branches' initial weights, β = (8N)^(−1/4), N-layer encoder-only."""
    return (8 * n_layers) ** -0.25


def _kept(f: torch.Tensor, skip_only: bool) -> torch.Tensor:
    # skip_only: the branch's output counts as a constant, so gradients take the skip path
    return f.detach() if skip_only else f


def _pre(sub: Sublayer, x: torch.Tensor, skip_only: bool) -> torch.Tensor:
    return x + _kept(sub.branch(sub.norm(x)), skip_only)  # x + F(Norm(x))


def _post(sub: Sublayer, x: torch.Tensor, skip_only: bool) -> torch.Tensor:
    return sub.norm(x + _kept(sub.branch(x), skip_only))  # Norm(x + F(x))


def _peri(sub: Sublayer, x: torch.Tensor, skip_only: bool) -> torch.Tensor:
    return x + _kept(sub.norm_out(sub.branch(sub.norm(x))), skip_only)  # x + Norm(F(Norm(x)))


def _deepnorm(sub: Sublayer, x: torch.Tensor, skip_only: bool) -> torch.Tensor:
    return sub.norm(sub.alpha * x + _kept(sub.branch(x), skip_only))  # Norm(αx + F(x))


def _plain(sub: Sublayer, x: torch.Tensor, skip_only: bool) -> torch.Tensor:
    return x + _kept(sub.branch(x), skip_only)  # x + F(x)


@dataclass(frozen=True)
class Placement:
    """One place for the norm: its name, its block's update rule and the norms it needs."""

    label: str
    rule: Callable[[Sublayer, torch.Tensor, bool], torch.Tensor]
    norm: bool = True  # a norm in every sublayer (`Sublayer.norm`)
    norm_out: bool = False  # a second one on the branch's output (`Sublayer.norm_out`)
    final_norm: bool = False  # one more before the readout: the stream is left unnormalized
    deepnorm: bool = False  # α on the skip path, β on the branches' initial weights


PLACEMENT_TABLE: dict[str, Placement] = {
    "pre": Placement("pre-norm", _pre, final_norm=True),
    "post": Placement("post-norm", _post),
    "peri": Placement("Peri-LN", _peri, norm_out=True, final_norm=True),
    "deepnorm": Placement("DeepNorm", _deepnorm, deepnorm=True),
    "none": Placement("no normalization", _plain, norm=False),
}
PLACEMENTS: tuple[str, ...] = tuple(PLACEMENT_TABLE)
PLACEMENT_LABELS: dict[str, str] = {k: p.label for k, p in PLACEMENT_TABLE.items()}


class Sublayer(nn.Module):
    """One residual connection around `branch`, with the norm placed as asked."""

    def __init__(
        self, branch: nn.Module, norm: str, d: int, placement: str, n_layers: float = 1
    ) -> None:
        """`n_layers`: DeepNorm's N (`deepnorm_layers`), for its α and β."""
        super().__init__()
        spec = PLACEMENT_TABLE[placement]
        self.branch = branch
        self.placement = placement
        self.rule = spec.rule
        self.norm = _norm_module(norm, d) if spec.norm else nn.Identity()
        if spec.norm_out:
            self.norm_out = _norm_module(norm, d)
        self.alpha = deepnorm_alpha(n_layers) if spec.deepnorm else 1.0
        if spec.deepnorm:  # β scales both linear layers' initial weights (biases start at 0)
            with torch.no_grad():
                for fc in (branch.fc1, branch.fc2):
                    fc.weight.mul_(deepnorm_beta(n_layers))

    def forward(self, x: torch.Tensor, skip_only: bool = False) -> torch.Tensor:
        """skip_only: the branch output counts as a constant, so gradients take the skip path."""
        return self.rule(self, x, skip_only)


class ResidualStack(nn.Module):
    """L residual blocks, a final norm where the stream is left unnormalized (pre-norm and
    Peri-LN, as GPT-2 and Gemma have), and a linear readout."""

    def __init__(self, cfg: StackConfig, placement: str) -> None:
        super().__init__()
        if placement not in PLACEMENTS:
            raise ResidualConfigError(
                f"placement must be one of {', '.join(PLACEMENTS)}, got {placement!r}"
            )
        d, n = cfg.width, deepnorm_layers(cfg.depth, cfg.block)  # DeepNorm's N
        self.placement = placement
        self.blocks = nn.ModuleList()
        for _ in range(cfg.depth):
            subs = [Sublayer(FeatureMLP(d), cfg.norm, d, placement, n)]
            if cfg.block == "mixer":
                subs.insert(0, Sublayer(TokenMLP(cfg.tokens), cfg.norm, d, placement, n))
            self.blocks.append(nn.ModuleList(subs))
        final = PLACEMENT_TABLE[placement].final_norm
        self.final_norm = _norm_module(cfg.norm, d) if final else nn.Identity()
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
    """The stack for one placement; the same seed draws the same branch weights for all of
    them (DeepNorm then scales its copy by β)."""
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


# ---- the page's setup and the knobs that shape a stack -----------------------------


@dataclass(frozen=True)
class Setup:
    """What every stack on the page sees: the batch's size (the knobs set the rest)."""

    samples: int = 16  # sequences per batch: enough for stable statistics, quick on CPU
    tokens: int = 8  # tokens per sequence


WIDTHS: tuple[int, ...] = (16, 32, 64, 128)


def stack_knobs(prefix: str, widths: tuple[int, ...] = WIDTHS) -> tuple[Knob, ...]:
    """Width, norm and block of one section's stacks (URL names `{prefix}width`, ...)."""
    return (
        Knob(f"{prefix}width", 32, choices=widths, label="Width d"),
        Knob(f"{prefix}norm", NORMS[0], choices=NORMS, label="Norm"),
        Knob(f"{prefix}block", next(iter(BLOCKS)), choices=tuple(BLOCKS), label="Block F"),
    )


def stack_config(setup: Setup, knobs: Mapping[str, Value], prefix: str = "") -> StackConfig:
    """The stack a section's knobs describe, on the page's batch."""
    return StackConfig(
        depth=int(knobs[f"{prefix}depth"]),  # type: ignore[arg-type]
        width=int(knobs[f"{prefix}width"]),  # type: ignore[arg-type]
        norm=str(knobs[f"{prefix}norm"]),
        block=str(knobs[f"{prefix}block"]),
        tokens=setup.tokens,
        samples=setup.samples,
    )


def choice_label(name: str, value: Value) -> str:
    """How a knob's choice reads in its widget: the norm's name, the block's description."""
    if name.endswith("norm") and value in METHODS:
        return METHODS[str(value)].label
    if name.endswith("block") and value in BLOCKS:
        return BLOCKS[str(value)]
    return f"{value:g}" if isinstance(value, float) else str(value)
