"""Many networks trained as one: a "wide" model whose layers hold every model's weights.

A grid of M runs (normalizations × learning rates × seeds) is trained as one
batched computation instead of M small ones. Every weight tensor gets a leading
model axis: linear layers become one batched matmul (einsum over (B, M, C)),
convs one grouped conv (groups = M). Runs that share a normalization sit side by
side, and each slice of models gets its normalization applied at once, by the
functional form of the same torch.nn layer on a wide tensor: BatchNorm2d over
(N, m·C, H, W) is m independent BatchNorms (one statistic per channel), GroupNorm
with m·G groups is m GroupNorms, InstanceNorm is per channel anyway; LayerNorm and
RMSNorm normalize each model's (C, H, W) block. Models never mix: a run that
diverges stays NaN in its own slice. `tests/test_training_engine.py` checks that
this equals training each torch.nn model alone. A run with Weight Standardization
(`Variant.ws`) convolves with its filters standardized (`normviz.weightstd`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from normviz.training.models import EPS, Net
from normviz.weightstd import standardize


@dataclass(frozen=True)
class Variant:
    """One run of a grid."""

    norm: str  # a key of models.NORMS
    lr: float
    seed: int  # the initial weights and the order of the batches
    ghost: int = 0  # BatchNorm's statistics batch; 0: the whole batch
    ws: bool = False  # the convs standardize their weights (Weight Standardization, CNN)


@dataclass
class _Slice:
    """The models [start, stop) that share one normalization (and ghost size)."""

    norm: str
    ghost: int
    start: int
    stop: int
    weight: list[torch.Tensor | None]  # per hidden layer: γ stacked (m, *shape)
    bias: list[torch.Tensor | None]
    mean: list[torch.Tensor | None]  # BatchNorm running statistics, (m·C,)
    var: list[torch.Tensor | None]
    tracked: list[int]  # per layer: BatchNorm updates so far (momentum None: 1/tracked)


def _stack(models: list[nn.Module], attr: str) -> torch.Tensor | None:
    vals = [getattr(m, attr, None) for m in models]
    if vals[0] is None:
        return None
    return torch.stack([v.detach().clone() for v in vals])


def _bn(module: nn.Module) -> nn.Module:
    return getattr(module, "bn", module)  # GhostBatchNorm wraps its BatchNorm


class Wide:
    """The stacked weights of `models` (each built by models.build for its variant).

    Variants must be sorted so that equal (norm, ghost) pairs are contiguous.
    """

    def __init__(
        self, net: Net, variants: list[Variant], models: list[nn.Sequential], momentum=0.1
    ) -> None:
        self.net, self.variants, self.momentum = net, variants, momentum
        self.layers = net.layers()
        self.M = len(variants)
        # models whose convs standardize their weights (Weight Standardization), (M,) bool
        self.ws = torch.tensor([v.ws for v in variants], dtype=torch.bool)
        d = len(self.layers)
        self.w = [torch.stack([m[3 * i].weight.detach() for m in models]) for i in range(d)]
        self.b = [torch.stack([m[3 * i].bias.detach() for m in models]) for i in range(d)]
        self.head_w = torch.stack([m[3 * d + 1].weight.detach() for m in models])
        self.head_b = torch.stack([m[3 * d + 1].bias.detach() for m in models])
        self.slices: list[_Slice] = []
        start = 0
        while start < self.M:
            v = variants[start]
            stop = start
            while stop < self.M and (variants[stop].norm, variants[stop].ghost) == (
                v.norm,
                v.ghost,
            ):
                stop += 1
            part = models[start:stop]
            norms = [[_bn(m[3 * i + 1]) for m in part] for i in range(d)]
            self.slices.append(
                _Slice(
                    v.norm,
                    v.ghost,
                    start,
                    stop,
                    [_stack(n, "weight") for n in norms],
                    [_stack(n, "bias") for n in norms],
                    [_flat(_stack(n, "running_mean")) for n in norms],
                    [_flat(_stack(n, "running_var")) for n in norms],
                    [0] * d,
                )
            )
            start = stop
        for p, _, _ in self.parameters():
            p.requires_grad_(True)

    def parameters(self) -> list[tuple[torch.Tensor, int, int]]:
        """Every weight tensor with the models [start, stop) its leading axis covers."""
        out = [(p, 0, self.M) for p in (*self.w, *self.b, self.head_w, self.head_b)]
        for s in self.slices:
            out += [(p, s.start, s.stop) for p in (*s.weight, *s.bias) if p is not None]
        return out

    def tensors(self) -> list[torch.Tensor]:
        """Every tensor that decides the outputs (weights, running statistics), in a fixed order."""
        out = [p for p, _, _ in self.parameters()]
        for s in self.slices:
            out += [t for t in (*s.mean, *s.var) if t is not None]
        return out

    def snapshot(self) -> tuple[np.ndarray, ...]:
        """Copies of `tensors()` as numpy arrays: picklable, and hashable by value."""
        return tuple(t.detach().numpy().copy() for t in self.tensors())

    def load(self, arrays: tuple[np.ndarray, ...]) -> None:
        """Set `tensors()` from a `snapshot()` of a model of the same grid."""
        with torch.no_grad():
            for t, a in zip(self.tensors(), arrays, strict=True):
                t.copy_(torch.from_numpy(a))

    def reset_stats(self) -> None:
        """Running statistics back to mean 0, variance 1 (before precise estimation)."""
        for s in self.slices:
            s.tracked = [0] * len(s.tracked)
            for t in s.mean:
                if t is not None:
                    t.zero_()
            for t in s.var:
                if t is not None:
                    t.fill_(1.0)

    def forward(self, x: torch.Tensor, training: bool, update: bool = True) -> torch.Tensor:
        """Class scores (B, M, 10) for inputs x: (B, M, 64) or (B, M, 1, 8, 8).

        training: BatchNorm uses batch statistics (else its running ones); update:
        those batch statistics also move the running ones (False for probes).
        """
        if self.net.kind == "mlp":  # models first, (M, B, C): slices and matmuls need no copy
            h = x.transpose(0, 1).contiguous()
            for i in range(len(self.layers)):
                h = torch.baddbmm(self.b[i].unsqueeze(1), h, self.w[i].transpose(1, 2))
                h = F.relu(self._norm(i, h, training, update))
            out = torch.baddbmm(self.head_b.unsqueeze(1), h, self.head_w.transpose(1, 2))
            return out.transpose(0, 1)
        h, M = x, self.M  # (B, M, C, H, W): the grouped conv's channels are (M, C)
        for i, layer in enumerate(self.layers):
            B = h.shape[0]
            w = self._conv_weight(i).reshape(M * layer.c_out, layer.c_in, 3, 3)
            flat = h.reshape(B, M * layer.c_in, *h.shape[-2:])
            h = F.conv2d(flat, w, self.b[i].reshape(-1), layer.stride, 1, groups=M)
            h = h.view(B, M, layer.c_out, *layer.spatial)
            h = F.relu(self._norm(i, h, training, update))
        h = h.reshape(h.shape[0], M, -1)
        return torch.einsum("bmi,moi->bmo", h, self.head_w) + self.head_b

    def _conv_weight(self, i: int) -> torch.Tensor:
        """Layer i's conv weights (M, C_out, C_in, 3, 3), standardized for the WS models."""
        w = self.w[i]
        if not self.ws.any():
            return w
        ws = standardize(w.flatten(0, 1)).view_as(w)  # per (model, output channel)
        return ws if self.ws.all() else torch.where(self.ws.view(-1, 1, 1, 1, 1), ws, w)

    def _norm(self, i: int, h: torch.Tensor, training: bool, update: bool) -> torch.Tensor:
        apply = self._mlp if self.net.kind == "mlp" else self._cnn
        if len(self.slices) == 1:
            return apply(self.slices[0], i, h, training, update)
        if self.net.kind == "mlp":
            parts = [apply(s, i, h[s.start : s.stop], training, update) for s in self.slices]
            return torch.cat(parts, dim=0)
        parts = [apply(s, i, h[:, s.start : s.stop], training, update) for s in self.slices]
        return torch.cat(parts, dim=1)

    def _mlp(self, s: _Slice, i: int, h: torch.Tensor, training: bool, update: bool):
        """Slice `s`'s normalization on its models' activations h: (m, B, C)."""
        if s.norm == "none":
            return h
        m, B, C = h.shape
        w, b = s.weight[i], s.bias[i]
        if s.norm == "batch":  # per (model, unit) over the batch: BatchNorm1d on (B, m·C)
            flat = h.transpose(0, 1).reshape(B, m * C)
            y = self._batch_norm(s, i, flat, w.reshape(-1), b.reshape(-1), training, update)
            return y.view(B, m, C).transpose(0, 1)
        if s.norm == "layer":
            y = F.layer_norm(h, (C,), eps=EPS)
        elif s.norm == "rms":
            y = F.rms_norm(h, (C,), eps=EPS)
        else:  # group: per sample, G groups of C/G units
            y = F.group_norm(h.reshape(m * B, C), self.net.groups, eps=EPS).view(m, B, C)
        y = y * w.unsqueeze(1)
        return y if b is None else y + b.unsqueeze(1)

    def _cnn(self, s: _Slice, i: int, h: torch.Tensor, training: bool, update: bool):
        """Slice `s`'s normalization on its models' activations h: (B, m, C, H, W)."""
        if s.norm == "none":
            return h
        B, m, C, *sp = h.shape
        w, b = s.weight[i], s.bias[i]
        if s.norm in ("layer", "rms"):
            dims = (C, *sp)
            y = (
                F.layer_norm(h, dims, eps=EPS)
                if s.norm == "layer"
                else F.rms_norm(h, dims, eps=EPS)
            )
            return y * w if b is None else y * w + b
        flat = h.reshape(B, m * C, *sp)
        w, b = w.reshape(-1), b.reshape(-1)
        if s.norm == "group":
            y = F.group_norm(flat, m * self.net.groups, w, b, EPS)
        elif s.norm == "instance":
            y = F.instance_norm(flat, weight=w, bias=b, eps=EPS)
        else:
            y = self._batch_norm(s, i, flat, w, b, training, update)
        return y.view(h.shape)

    def _batch_norm(self, s: _Slice, i: int, x, w, b, training: bool, update: bool):
        if not training:
            return F.batch_norm(x, s.mean[i], s.var[i], w, b, False, 0.0, EPS)
        chunks = x.split(s.ghost) if 0 < s.ghost < len(x) else (x,)
        out = []
        for c in chunks:
            if not update:
                out.append(F.batch_norm(c, None, None, w, b, True, 0.0, EPS))
                continue
            s.tracked[i] += 1
            factor = 1.0 / s.tracked[i] if self.momentum is None else self.momentum
            out.append(F.batch_norm(c, s.mean[i], s.var[i], w, b, True, factor, EPS))
        return out[0] if len(out) == 1 else torch.cat(out)


def _flat(t: torch.Tensor | None) -> torch.Tensor | None:
    return None if t is None else t.reshape(-1).contiguous()
