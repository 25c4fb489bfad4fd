"""The pre-norm residual MLP of the DyT experiment: the torch.nn reference and its wide form.

x (B, 64) → Linear(64, d) → `depth` blocks h ← h + W₂·ReLU(W₁·Norm(h) + b₁) + b₂ (every
W d × d) → Norm → Linear(d, 10). Norm is the registry's module for the method (LayerNorm,
RMSNorm, normviz.dyt.DyT) or none; each of the depth + 1 norms has its own γ (and β, and
DyT's one scalar α). `ResMLP` is the reference, built from the registry's factories;
`WideRes` holds a grid of them as one batched model (weights with a leading model axis,
one baddbmm per linear layer, as `wide.Wide` does for the plain MLP), and
`tests/test_training_dyt.py` checks that training it equals training each ResMLP alone.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from normviz.errors import NormConfigError
from normviz.methods import METHODS
from normviz.training.data import CLASSES
from normviz.training.models import EPS, Net
from normviz.training.wide import Variant


class Block(nn.Module):
    """One pre-norm residual block: h + fc2(ReLU(fc1(norm(h))))."""

    def __init__(self, norm: nn.Module, d: int) -> None:
        super().__init__()
        self.norm, self.fc1, self.fc2 = norm, nn.Linear(d, d), nn.Linear(d, d)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h + self.fc2(F.relu(self.fc1(self.norm(h))))


class ResMLP(nn.Module):
    """The reference network: embed, `depth` pre-norm blocks, a last norm, the head."""

    def __init__(self, net: Net, norm: str) -> None:
        super().__init__()
        d = net.width
        self.embed = nn.Linear(64, d)
        self.blocks = nn.ModuleList(Block(norm_module(norm, d), d) for _ in range(net.depth))
        self.norm = norm_module(norm, d)
        self.head = nn.Linear(d, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)  # (B, d)
        for block in self.blocks:
            h = block(h)
        return self.head(self.norm(h))

    def norms(self) -> list[nn.Module]:
        """The depth + 1 norm layers, in order (the last one before the head)."""
        return [*(b.norm for b in self.blocks), self.norm]


def norm_module(norm: str, d: int) -> nn.Module:
    """The registry's module for `norm` on (B, d) activations (BTC with T = 1)."""
    return nn.Identity() if norm == "none" else METHODS[norm].build("BTC", (1, 1, d), eps=EPS)


def build(
    net: Net, norm: str, seed: int, momentum: float | None = 0.1, ghost: int = 0, ws: bool = False
) -> ResMLP:
    """The reference for one run; torch's init drawn from `seed` (models.build's signature;
    no convs, so no Weight Standardization)."""
    net.check(norm)
    if ws:
        raise NormConfigError("Weight Standardization needs convolutions; this is an MLP")
    torch.manual_seed(seed)  # the same seed gives the same linear weights for every norm
    return ResMLP(net, norm)


class _Slice:
    """The models [start, stop) that share one norm: each norm layer's parameters, stacked.

    LayerNorm, RMSNorm and DyT run as one functional call on the slice; any other norm
    of the registry's list runs its own module over the models with torch.func.vmap.
    """

    def __init__(self, norm: str, start: int, stop: int, models: list[ResMLP]) -> None:
        self.norm, self.start, self.stop = norm, start, stop
        layers = list(zip(*(m.norms() for m in models), strict=True))  # per layer: m modules
        self.template = [mods[0] for mods in layers]  # the structure for the generic path
        if any(True for t in self.template for _ in t.buffers()):
            raise NormConfigError(f"{norm!r} keeps buffers: the residual MLP has no slot for them")
        self.params = [  # per layer: name -> (m, *shape), e.g. "weight" (m, d), "alpha" (m, 1)
            {
                name: torch.stack([dict(m.named_parameters())[name].detach().clone() for m in mods])
                for name, _ in mods[0].named_parameters()
            }
            for mods in layers
        ]

    def tensors(self) -> list[torch.Tensor]:
        return [p for layer in self.params for p in layer.values()]

    def apply(self, i: int, h: torch.Tensor) -> torch.Tensor:
        """Norm layer i of these models on h: (m, B, d)."""
        p = self.params[i]
        if self.norm == "none":
            return h
        if self.norm == "layer":
            y = F.layer_norm(h, h.shape[-1:], eps=EPS)
        elif self.norm == "rms":
            y = F.rms_norm(h, h.shape[-1:], eps=EPS)
        elif self.norm == "dyt":  # tanh(α·h), one α per model and layer
            y = torch.tanh(p["alpha"].unsqueeze(-1) * h)
        else:
            return generic(self.template[i], p, h)
        y = y * p["weight"].unsqueeze(1)
        return y + p["bias"].unsqueeze(1) if "bias" in p else y


def generic(template: nn.Module, params: dict[str, torch.Tensor], h: torch.Tensor) -> torch.Tensor:
    """`template`'s forward with each model's parameters on its own (B, d) slice of h (m, B, d)."""
    one = lambda q, x: torch.func.functional_call(template, q, (x,))  # noqa: E731
    return torch.func.vmap(one)(params, h)


class WideRes:
    """The stacked weights of `models` (ResMLPs, variants sorted: equal norms contiguous).

    The interface of `wide.Wide` that `train.py` uses: parameters(), tensors(), forward().
    """

    def __init__(
        self, net: Net, variants: list[Variant], models: list[ResMLP], momentum=None
    ) -> None:
        self.net, self.variants, self.M = net, variants, len(variants)
        stack = lambda get: torch.stack([get(m).detach() for m in models])  # noqa: E731
        self.embed_w, self.embed_b = stack(lambda m: m.embed.weight), stack(lambda m: m.embed.bias)
        self.w1 = [stack(lambda m, i=i: m.blocks[i].fc1.weight) for i in range(net.depth)]
        self.b1 = [stack(lambda m, i=i: m.blocks[i].fc1.bias) for i in range(net.depth)]
        self.w2 = [stack(lambda m, i=i: m.blocks[i].fc2.weight) for i in range(net.depth)]
        self.b2 = [stack(lambda m, i=i: m.blocks[i].fc2.bias) for i in range(net.depth)]
        self.head_w, self.head_b = stack(lambda m: m.head.weight), stack(lambda m: m.head.bias)
        self.slices: list[_Slice] = []
        start = 0
        while start < self.M:
            stop = start
            while stop < self.M and variants[stop].norm == variants[start].norm:
                stop += 1
            self.slices.append(_Slice(variants[start].norm, start, stop, models[start:stop]))
            start = stop
        for p, _, _ in self.parameters():
            p.requires_grad_(True)

    def parameters(self) -> list[tuple[torch.Tensor, int, int]]:
        """Every weight tensor with the models [start, stop) its leading axis covers."""
        shared = (self.embed_w, self.embed_b, *self.w1, *self.b1, *self.w2, *self.b2)
        out = [(p, 0, self.M) for p in (*shared, self.head_w, self.head_b)]
        return out + [(p, s.start, s.stop) for s in self.slices for p in s.tensors()]

    def tensors(self) -> list[torch.Tensor]:
        """Every tensor that decides the outputs (no running statistics here)."""
        return [p for p, _, _ in self.parameters()]

    def snapshot(self) -> tuple[np.ndarray, ...]:
        return tuple(t.detach().numpy().copy() for t in self.tensors())

    def alphas(self) -> np.ndarray:
        """(M, depth + 1) DyT's learned α per model and norm layer (NaN for the other norms)."""
        out = np.full((self.M, self.net.depth + 1), np.nan)
        for s in self.slices:
            if s.norm == "dyt":
                out[s.start : s.stop] = (
                    torch.cat([p["alpha"] for p in s.params], 1).detach().numpy()
                )
        return out

    def forward(self, x: torch.Tensor, training: bool = True, update: bool = True) -> torch.Tensor:
        """Class scores (B, M, 10) for x: (B, M, 64); no norm here differs in training."""
        h = torch.baddbmm(self.embed_b.unsqueeze(1), x.transpose(0, 1), self.embed_w.mT)
        for i in range(self.net.depth):  # h: (M, B, d)
            f = torch.baddbmm(self.b1[i].unsqueeze(1), self._norm(i, h), self.w1[i].mT)
            h = h + torch.baddbmm(self.b2[i].unsqueeze(1), F.relu(f), self.w2[i].mT)
        out = torch.baddbmm(self.head_b.unsqueeze(1), self._norm(self.net.depth, h), self.head_w.mT)
        return out.transpose(0, 1)

    def _norm(self, i: int, h: torch.Tensor) -> torch.Tensor:
        if len(self.slices) == 1:
            return self.slices[0].apply(i, h)
        return torch.cat([s.apply(i, h[s.start : s.stop]) for s in self.slices], dim=0)
