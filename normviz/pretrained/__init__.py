"""Real tensors from pretrained models shipped as packages (no network at run time).

One registry, `SOURCES`, beside the generators of `normviz.data`: each real source
has a key (the URL's `data=`), a label, the layout it forces, its knobs (which
layer; the text for MiniLM and SmolLM2, the photos for EfficientNet) and a function giving the
tensor with a short description. A `RealInput` names one real tensor (source and
knob values): small, frozen and hashable like the pages' other setups, it holds no
tensor; `build(inp)` makes it. The models import lazily, on first use.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from normviz.errors import NormConfigError
from normviz.layouts import LAYOUTS


@dataclass(frozen=True)
class RealTensor:
    """A real tensor and what to say about it."""

    array: np.ndarray  # float32, in the source's layout
    description: str  # one plain sentence (no markdown): what the tensor is
    labels: tuple[tuple[str, ...], ...] = ()  # MiniLM: the kept tokens, per sentence

    @property
    def nbytes(self) -> int:
        return int(self.array.nbytes) + sum(len(t) for row in self.labels for t in row)


@dataclass(frozen=True)
class RealInput:
    """One real tensor, by name: the source and its knob values (never the tensor).

    `photo` names an uploaded photo by its digest ("" for the sample photos); its
    pixels stay with the UI, which subclasses this to hand them over (`images`).
    """

    source: str
    layer: str = ""  # "" : the source's default layer
    text: str = ""  # MiniLM's or SmolLM2's sentences
    photo: str = ""

    @property
    def spec(self) -> RealSource:
        return SOURCES[self.source]

    @property
    def layout(self) -> str:
        return self.spec.layout

    def images(self) -> np.ndarray | None:
        """The uploaded photo's pixels, (1, H, W, 3) uint8; None: the sample photos."""
        if self.photo:
            raise NormConfigError("the uploaded photo is no longer in memory: upload it again")
        return None

    def real(self) -> RealTensor:
        return build(self, self.images())

    def tensor(self) -> torch.Tensor:
        return torch.from_numpy(self.real().array.copy())

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.real().array.shape)


@dataclass(frozen=True)
class RealSource:
    """A data source backed by a pretrained model."""

    key: str
    label: str
    description: str  # one line, for the data menu's help
    layout: str  # the layout its tensor comes in (the sidebar's layout does not apply)
    layers: Callable[[], tuple[str, ...]]  # the normalization layers one can pick
    default_layer: Callable[[], str]
    layer_label: Callable[[str], str]
    make: Callable[[RealInput, np.ndarray | None], RealTensor]
    uses_text: bool = False
    uses_photo: bool = False
    shrink: str = "make an axis smaller"  # how to get under the element cap
    # loads the model now, telling `progress(fraction, text)` (None: `make` loads it)
    load: Callable[[Callable[[float, str], None]], None] | None = None


def _lazy(module: str, name: str) -> Callable[..., Any]:
    """`normviz.pretrained.<module>.<name>`, looked up when first needed (importing MiniLM's
    module imports transformers): a constant as it is, a function called with the args."""

    def get(*args: Any) -> Any:
        value = getattr(importlib.import_module(f"normviz.pretrained.{module}"), name)
        return value(*args) if callable(value) else value

    return get


# ---- MiniLM ------------------------------------------------------------------------------


def _cut_note(T: int, cropped: bool) -> str:
    """How the sentences became one (B, T, C) tensor: cut to the shortest, or all T long."""
    if cropped:
        return (
            f", each sentence cut to its first {T} tokens (the shortest sentence's length, "
            "so no padding enters a statistic)"
        )
    return f", {T} tokens each"


def _minilm(inp: RealInput, images: np.ndarray | None) -> RealTensor:
    from normviz.pretrained import minilm

    sentences = minilm.split_text(inp.text)
    try:
        x, info = minilm.layernorm_inputs(sentences, inp.layer or minilm.DEFAULT_LAYER)
    except ValueError as e:
        raise NormConfigError(str(e)) from e
    B = len(sentences)
    where = minilm.layer_label(info.layer)
    cut = _cut_note(info.T, info.cropped)
    text = (
        f"MiniLM (all-MiniLM-L6-v2), {where}: the hidden states entering this LayerNorm "
        f"(residual + sublayer, before normalization) for {B} sentence{'s' * (B != 1)}{cut}. "
        f"Shape (B, T, C) = {x.shape}; the model normalizes each token over C with "
        f"ε = {minilm.EPS:g}."
    )
    return RealTensor(x, text, info.tokens)


# ---- EfficientNet-Lite0 ------------------------------------------------------------------


def _efficientnet(inp: RealInput, images: np.ndarray | None) -> RealTensor:
    from normviz.pretrained import efficientnet, photos

    batch = photos.sample_photos()
    if images is not None:
        batch = np.concatenate([batch, images])
    layer = inp.layer or efficientnet.DEFAULT_LAYER
    x = efficientnet.bn_inputs(batch, layer)
    which = ", ".join(photos.SAMPLE_PHOTOS) + (" and your photo" if images is not None else "")
    text = (
        f"EfficientNet-Lite0 (ImageNet weights), {efficientnet.layer_label(layer)} "
        f"(module {layer}): the activations "
        f"entering this layer for {len(batch)} photos ({which}, each resized to 224 × 224). "
        f"Shape (N, C, H, W) = {x.shape}; the network normalizes each channel with its "
        f"stored running statistics, ε = {efficientnet.BN_EPS:g}."
    )
    return RealTensor(np.ascontiguousarray(x, dtype=np.float32), text)


# ---- SmolLM2-135M ------------------------------------------------------------------------


def _smollm2(inp: RealInput, images: np.ndarray | None) -> RealTensor:
    from normviz.pretrained import minilm, smollm2

    sentences = minilm.split_text(inp.text)  # the same limits as MiniLM's sentences
    layer = inp.layer or smollm2.DEFAULT_LAYER
    try:
        x, info = smollm2.hidden_states(sentences, layer)
    except ValueError as e:
        raise NormConfigError(str(e)) from e
    B, flat = len(sentences), [t for row in info.tokens for t in row]
    bias = "" if f"{layer}.bias" in smollm2.tensor_types() else ", no bias added"
    cut = _cut_note(info.T, info.cropped)
    text = (
        f"SmolLM2-135M-Instruct, {smollm2.layer_label(layer)} (module {layer}): the residual "
        f"stream entering this RMSNorm (before normalization) for {B} "
        f"sentence{'s' * (B != 1)}{cut}. Shape (B, T, C) = {x.shape}; the model divides each "
        f"token by its root mean square over C, ε = {smollm2.config().eps:.0e}, then scales "
        f"each feature by its weight (no mean is subtracted{bias})."
        + (" In the tokens, Ġ marks a leading space." if any("Ġ" in t for t in flat) else "")
    )
    return RealTensor(x, text, info.tokens)


SOURCES: dict[str, RealSource] = {
    s.key: s
    for s in (
        RealSource(
            "minilm",
            "MiniLM (real text)",
            "a pretrained transformer's hidden states entering one of its LayerNorms, "
            "for sentences you type",
            "BTC",
            _lazy("minilm", "LN_LAYERS"),
            _lazy("minilm", "DEFAULT_LAYER"),
            _lazy("minilm", "layer_label"),
            _minilm,
            uses_text=True,
            shrink="use fewer or shorter sentences",
        ),
        RealSource(
            "efficientnet",
            "EfficientNet-Lite0 (real photos)",
            "a pretrained CNN's activations entering one of its BatchNorm layers, for "
            "scikit-learn's two sample photos (a small batch keeps every page fast; the "
            "BatchNorm lab's real network runs eight scenes) and a photo you upload",
            "NCHW",
            _lazy("efficientnet", "BN_LAYERS"),
            _lazy("efficientnet", "DEFAULT_LAYER"),
            _lazy("efficientnet", "layer_label"),
            _efficientnet,
            uses_photo=True,
            shrink="pick a later layer (smaller H and W)",
        ),
        RealSource(
            "smollm2",
            "SmolLM2 (real text, RMSNorm)",
            "a pretrained pre-norm language model's residual stream entering one of its 61 "
            "RMSNorms, for sentences you type",
            "BTC",
            _lazy("smollm2", "NORMS"),
            _lazy("smollm2", "DEFAULT_LAYER"),
            _lazy("smollm2", "layer_label"),
            _smollm2,
            uses_text=True,
            shrink="use fewer or shorter sentences",
            load=_lazy("smollm2", "load"),
        ),
    )
}


def build(inp: RealInput, images: np.ndarray | None = None) -> RealTensor:
    """The real tensor `inp` names (`images`: an uploaded photo, for a photo source).

    Raises:
        NormConfigError: an unknown source or layer, no sentence to run, a broken photo.
    """
    if inp.source not in SOURCES:
        raise NormConfigError(f"unknown real data source {inp.source!r}")
    src = SOURCES[inp.source]
    if inp.layer and inp.layer not in src.layers():
        raise NormConfigError(f"{src.label} has no normalization layer {inp.layer!r}")
    out = src.make(inp, images)
    assert out.array.ndim == len(LAYOUTS[src.layout].axes) and out.array.dtype == np.float32
    return out


def is_real(data: str) -> bool:
    """Is `data` (the URL's `data=`) a real source rather than a generator?"""
    return data in SOURCES


# ---- what real activations look like: feature dimensions by size ----------------------


@dataclass(frozen=True)
class Outliers:
    """Per-feature RMS of a (…, C)-shaped tensor's channels, and the few that stand out."""

    rms: np.ndarray  # (C,) root mean square of each channel, over every other axis
    median: float  # the median channel's RMS
    top: tuple[int, ...]  # the channels at >= RATIO × the median, largest first (at most 5)
    share: float  # the fraction of the tensor's total square those channels hold

    RATIO = 6.0  # a channel this many times the median's RMS counts as an outlier


def outliers(x: torch.Tensor | np.ndarray, layout: str) -> Outliers:
    """Which channels of `x` are far larger than the rest, computed from the values."""
    a = np.asarray(x, dtype=np.float64)
    c = LAYOUTS[layout].channel_axis
    a = np.moveaxis(a, c, -1).reshape(-1, a.shape[c])
    sq = (a**2).mean(axis=0)
    rms = np.sqrt(sq)
    median = float(np.median(rms))
    order = np.argsort(-rms)
    top = tuple(int(i) for i in order[:5] if median > 0 and rms[i] >= Outliers.RATIO * median)
    total = float(sq.sum())
    share = float(sq[list(top)].sum() / total) if top and total > 0 else 0.0
    return Outliers(rms, median, top, share if math.isfinite(share) else 0.0)


__all__ = [
    "SOURCES",
    "Outliers",
    "RealInput",
    "RealSource",
    "RealTensor",
    "build",
    "is_real",
    "outliers",
]
