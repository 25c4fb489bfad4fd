"""The lab's networks, built from torch.nn layers placed where the normviz contract says.

Two small networks read the digits: an MLP over the 64 pixels (activations
(B, C): normviz's BTC layout with T = 1) and a CNN over the (1, 8, 8) image
(activations (N, C, H, W)). After every hidden linear or conv layer sits one
normalization layer, then a ReLU; a linear head gives the 10 class scores. These
torch.nn models are the reference: the batched trainer (`wide.py`) starts from
their weights and must reproduce their training to float tolerance. The DyT experiment's
pre-norm residual MLP (kind "resmlp") has its reference and wide form in `resmlp.py`.
"""

from __future__ import annotations

import inspect
import itertools
from dataclasses import dataclass

import torch
from torch import nn

from normviz.core import Contract, contract
from normviz.errors import NormConfigError
from normviz.methods import METHODS, listed
from normviz.training.data import CLASSES
from normviz.weightstd import WSConv2d

EPS = 1e-5  # every layer's ε (normviz's default; nn.RMSNorm's own default differs)
NORMS: tuple[str, ...] = ("none", *listed("training"))  # the registry's "training" list
MLP_NORMS: tuple[str, ...] = ("none", *listed("training-mlp"))  # InstanceNorm: T = 1
# the pre-norm residual MLP's (resmlp.py): LayerNorm, RMSNorm, DyT
RES_NORMS: tuple[str, ...] = ("none", *listed("training-residual"))
NORM_LABELS: dict[str, str] = {
    "none": "no norm",
    **{k: METHODS[k].label for k in (*NORMS[1:], *RES_NORMS[1:])},
}


@dataclass(frozen=True)
class Net:
    """A network's shape (plain values: results are cached on it)."""

    kind: str = "mlp"  # "mlp" over (B, 64), "cnn" over (N, 1, 8, 8), "resmlp" (resmlp.py)
    width: int = 64  # MLP hidden units; CNN channels of the first conv (then 2×)
    depth: int = 2  # hidden layers, each followed by a norm and a ReLU
    groups: int = 4  # GroupNorm's G

    def layers(self) -> tuple[Layer, ...]:
        """The hidden layers in order."""
        if self.kind == "resmlp":  # the embedding, then each block's first linear map
            return tuple(
                Layer("linear", c, self.width, ()) for c in [64] + [self.width] * self.depth
            )
        if self.kind == "mlp":
            dims = [64] + [self.width] * self.depth
            return tuple(Layer("linear", a, b, ()) for a, b in itertools.pairwise(dims))
        out, size, c_in = [], 8, 1
        for i in range(self.depth):
            c_out, stride = self.width * min(2, 1 + i), 1 if i == 0 else 2
            size = (size - 1) // stride + 1
            out.append(Layer("conv", c_in, c_out, (size, size), stride))
            c_in = c_out
        return tuple(out)

    @property
    def features(self) -> int:
        """Inputs of the head: the last hidden layer's activation, flattened."""
        last = self.layers()[-1]
        return last.c_out * (last.spatial[0] * last.spatial[1] if last.spatial else 1)

    @property
    def layout(self) -> str:
        return "NCHW" if self.kind == "cnn" else "BTC"

    def norms(self) -> tuple[str, ...]:
        """The normalizations this network can use."""
        return {"mlp": MLP_NORMS, "resmlp": RES_NORMS}.get(self.kind, NORMS)

    def check(self, norm: str) -> None:
        if norm not in self.norms():
            raise NormConfigError(
                f"{NORM_LABELS.get(norm, norm)} does not fit the {self.kind.upper()}: "
                f"use one of {', '.join(self.norms())}"
            )
        widths = {layer.c_out for layer in self.layers()}
        if norm == "group" and any(c % self.groups for c in widths):
            raise NormConfigError(f"G = {self.groups} does not divide the widths {sorted(widths)}")


@dataclass(frozen=True)
class Layer:
    """One hidden layer: a linear map (MLP) or a 3×3 conv with padding 1 (CNN)."""

    kind: str  # "linear" | "conv"
    c_in: int
    c_out: int
    spatial: tuple[int, ...]  # (H, W) of the output; () for linear
    stride: int = 1


class GhostBatchNorm(nn.Module):
    """BatchNorm whose training statistics come from chunks ("ghost batches") of the batch.

    Each chunk goes through the one nn.BatchNorm in turn (its running statistics are
    updated once per chunk); evaluation is plain BatchNorm.
    """

    def __init__(self, bn: nn.Module, ghost: int) -> None:
        super().__init__()
        self.bn, self.ghost = bn, ghost

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.ghost <= 0 or self.ghost >= len(x):
            return self.bn(x)
        return torch.cat([self.bn(c) for c in x.split(self.ghost)])


def norm_layer(norm: str, net: Net, layer: Layer, momentum: float | None = 0.1, ghost: int = 0):
    """The torch.nn module for `norm` after `layer` (nn.Identity for "none")."""
    if norm == "none":
        return nn.Identity()
    if norm not in NORMS:
        raise NormConfigError(f"unknown normalization {norm!r}: use one of {', '.join(NORMS)}")
    m = METHODS[norm]
    # the MLP's (B, C) activation is BTC with T = 1 to the registry; the CNN's is NCHW
    layout = "NCHW" if layer.spatial else "BTC"
    shape = (1, layer.c_out, *layer.spatial) if layer.spatial else (1, 1, layer.c_out)
    # every norm here learns γ and β (InstanceNorm too: affine=True), and BatchNorm's
    # running statistics take the lab's momentum
    flags = inspect.signature(m.torch[layout].cls).parameters
    kw = {"affine": True} if "affine" in flags else {}
    kw |= {"momentum": momentum} if "momentum" in flags else {}
    mod = m.build(layout, shape, net.groups if m.grouped else None, EPS, **kw)
    return GhostBatchNorm(mod, ghost) if ghost and m.batch_dependent else mod


def build(
    net: Net, norm: str, seed: int, momentum: float | None = 0.1, ghost: int = 0, ws: bool = False
) -> nn.Sequential:
    """[layer, norm, ReLU] × depth, flatten, linear head; torch's init drawn from `seed`.

    ws: the convs standardize their weights (`normviz.weightstd.WSConv2d`, CNN only).
    """
    net.check(norm)
    if ws and net.kind != "cnn":
        raise NormConfigError("Weight Standardization standardizes conv filters: use the CNN")
    conv = WSConv2d if ws else nn.Conv2d  # the same parameters, drawn the same way
    torch.manual_seed(seed)  # the same seed gives the same weights for every norm
    mods: list[nn.Module] = []
    for layer in net.layers():
        if layer.kind == "linear":
            mods.append(nn.Linear(layer.c_in, layer.c_out))
        else:
            mods.append(conv(layer.c_in, layer.c_out, 3, layer.stride, padding=1))
        mods += [norm_layer(norm, net, layer, momentum, ghost), nn.ReLU()]
    mods += [nn.Flatten(), nn.Linear(net.features, CLASSES)]
    return nn.Sequential(*mods)


def layer_contract(norm: str, net: Net, batch: int = 4) -> Contract:
    """normviz's contract for `norm` on the first hidden activation (MLP: BTC with T = 1)."""
    layer = net.layers()[0]
    shape = (batch, layer.c_out, *layer.spatial) if net.kind == "cnn" else (batch, 1, layer.c_out)
    return contract(norm, net.layout, shape, groups=net.groups if norm == "group" else None)


def pooled(norm: str, net: Net) -> str:
    """The axes one statistic pools over, from normviz's contract (e.g. "N, H, W")."""
    if norm == "none" or METHODS[norm].kind == "elementwise":
        return "nothing"
    axes = layer_contract(norm, net).axes
    return ", ".join(a for a in axes if not (net.kind != "cnn" and a == "T"))
