"""A real network's running statistics: EfficientNet-Lite0 (ImageNet) on real photos.

Two steps, cached apart: `SECTION` compares one BatchNorm layer's stored running
statistics with the statistics of the current images, and runs the network with its
BatchNorm layers in training mode on batches of 1, 2 and 8 images; `SHIFTED` moves the
images (brightness, contrast, blur, noise), so the stored statistics go stale, and
re-estimates them on the shifted images. The images: one photo of each of eight scenes
(`photos.SCENES`). The shared pretrained model is never changed: training mode and
re-estimation run on copies. Every sentence is computed from the numbers it describes.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch

from normviz import style
from normviz.batchnorm.lab import LabSetup, one_thread
from normviz.batchnorm.plot import rounded
from normviz.errors import NormConfigError
from normviz.figures.spec import Spec, trace
from normviz.knobs import Knob, Value
from normviz.pretrained import efficientnet as ef
from normviz.pretrained import photos
from normviz.sections import Progress, Section
from normviz.sources import cite

BATCHES: tuple[int, ...] = (1, 2, 8)  # training-mode batch sizes
N_IMAGES = len(photos.SCENE_PHOTOS)  # 8
LAYER = Knob(
    "bn_layer", ef.BN_LAYERS.index(ef.DEFAULT_LAYER) + 1, lo=1, hi=len(ef.BN_LAYERS),
    choices=tuple(range(1, len(ef.BN_LAYERS) + 1)), label="BatchNorm layer (1 = first)",
)  # fmt: skip
SHIFT = Knob("bn_shift", "brightness", choices=photos.SHIFTS, label="Shift of the images")
STRENGTH = Knob("bn_strength", 1.0, lo=0.0, hi=1.0, label="Shift strength")
PRIOR = Knob("bn_prior", 16, lo=0, hi=256, label="Prior N (stored statistics' weight)")

INTRO = (
    "EfficientNet-Lite0, trained on ImageNet, has 49 BatchNorm layers; each stores the "
    "running mean and variance it collected during training. Here they meet eight real "
    f"photos of eight scenes ({', '.join(photos.SCENES.values())}; scikit-learn's and "
    "scikit-image's sample photos). The left panels put a "
    "layer's stored statistics beside those of the eight photos, one dot per channel; the "
    "table runs the whole network with its BatchNorm layers in *training* mode (batch "
    "statistics) on batches of 1, 2 and 8 images, against evaluation mode."
)
SHIFTED_INTRO = (
    "Now the images move away from what the network was trained on. In evaluation mode "
    "BatchNorm still subtracts the stored means: they go stale. Re-estimating the "
    f"statistics on the shifted images ({cite('schneider2020')}) resets every layer's "
    "running statistics and averages them over the shifted batch (torch's `momentum=None`, "
    f"a cumulative average, as the precise statistics of {cite('wu2021')}); the prior N "
    "mixes the stored statistics back in with weight N/(N + n), n = 8 images. The model is "
    "a copy: the shared one never changes."
)


def layer_choice(index: int) -> str:
    """A `bn_layer` choice as its widget shows it: "48 · block 16 of 16, projection BN …"."""
    return f"{index} · {ef.layer_label(ef.BN_LAYERS[int(index) - 1])}"


@functools.cache
def images() -> np.ndarray:
    """The eight photos, one per scene of `photos.SCENES`, in that order."""
    out = photos.scene_photos()
    out.setflags(write=False)
    return out


@functools.cache
@one_thread()
def _clean() -> tuple[np.ndarray, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """Evaluation mode on the eight clean images: logits and every layer's input stats."""
    logits, stats = ef.forward_with_stats(ef.model(), ef.preprocess(images()))
    return logits.numpy(), stats


@functools.cache
@one_thread()
def _modes() -> tuple[np.ndarray, ...]:
    """Logits with BatchNorm in training mode, the eight images in batches of 1, 2, 8."""
    x = ef.preprocess(images())
    out = []
    for b in BATCHES:
        net = ef.bn_training_copy()
        with torch.no_grad():
            out.append(torch.cat([net(x[i : i + b]) for i in range(0, N_IMAGES, b)]).numpy())
    return tuple(out)


@dataclass(frozen=True)
class RealNet:
    """One layer's stored vs current statistics, and the network in both modes."""

    layer: str
    index: int  # 1-based, in forward order
    shape: tuple[int, int, int, int]  # the layer's input for the eight images
    stored_mean: np.ndarray  # (C,)
    stored_var: np.ndarray
    image_mean: np.ndarray  # (C,) over the eight images and every position
    image_var: np.ndarray  # biased
    eval_top1: np.ndarray  # (8,) ImageNet class indices
    train_top1: np.ndarray  # (3, 8), per batch size in BATCHES
    drift: np.ndarray  # (3,) ‖train logits − eval logits‖ / ‖eval logits‖
    min_values: np.ndarray  # (3,) fewest values per channel any BN layer averages over


def run(setup: LabSetup, knobs: Mapping[str, Value], progress: Progress) -> RealNet:
    index = int(knobs["bn_layer"])  # type: ignore[call-overload]
    if not 1 <= index <= len(ef.BN_LAYERS):
        raise NormConfigError(f"choose a BatchNorm layer from 1 to {len(ef.BN_LAYERS)}")
    layer = ef.BN_LAYERS[index - 1]
    progress(0.0, "EfficientNet-Lite0 on eight images, evaluation and training mode…")
    logits, stats = _clean()
    modes = _modes()
    drift = [np.linalg.norm(m - logits) / np.linalg.norm(logits) for m in modes]
    hw = min(h * w for _, _, h, w in (ef.input_shape(1, n) for n in ef.BN_LAYERS))
    return RealNet(
        layer, index, ef.input_shape(N_IMAGES, layer), *ef.stored_stats(layer), *stats[layer],
        logits.argmax(-1), np.stack([m.argmax(-1) for m in modes]), np.asarray(drift),
        np.asarray([b * hw for b in BATCHES]),
    )  # fmt: skip


def agreement(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.mean(np.asarray(a) == np.asarray(b)))


def figure(res: RealNet, presenter: bool = False) -> go.Figure:
    """Per channel: the images' mean against the stored mean; the same for variances."""
    fig = Spec.grid(
        1, 2, ("mean per channel", "variance per channel (log)"), horizontal_spacing=0.14,
    )  # fmt: skip
    for col, x, y in ((1, res.stored_mean, res.image_mean), (2, res.stored_var, res.image_var)):
        lo, hi = float(min(x.min(), y.min())), float(max(x.max(), y.max()))
        fig.add_trace(
            trace(
                "scatter", x=rounded(x, 4), y=rounded(y, 4), mode="markers", name="one channel",
                marker={"color": style.PALETTE[0], "size": 7, "opacity": 0.6},
                showlegend=col == 1,
            ), 1, col,
        )  # fmt: skip
        fig.add_trace(
            trace(
                "scatter", x=[lo, hi], y=[lo, hi], mode="lines", name="images = stored",
                line={"color": style.SELECTED, "dash": "dash", "width": 2}, showlegend=col == 1,
            ), 1, col,
        )  # fmt: skip
        fig.update_xaxes(title="stored running statistic", row=1, col=col)
        fig.update_yaxes(title="statistic of the eight images", row=1, col=col)
    var_axis = style.log_axis(res.stored_var, res.image_var)
    fig.update_xaxes(var_axis, row=1, col=2)
    fig.update_yaxes(var_axis, row=1, col=2)
    fig.update_layout(
        title=f"Layer {res.index} ({res.layer}): {ef.layer_label(res.layer)}",
        legend=style.LEGEND_BELOW,
    )
    return style.apply(fig, presenter, height=440).figure()


def table(res: RealNet) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "BatchNorm mode": [f"training, batches of {b}" for b in BATCHES],
            "top-1 agrees with evaluation mode": [
                f"{round(agreement(t, res.eval_top1) * N_IMAGES)} of {N_IMAGES}"
                for t in res.train_top1
            ],
            "logit change (relative)": np.round(res.drift, 3),
            "fewest values per channel": res.min_values,
        }
    )


def notes(res: RealNet) -> Sequence[str]:
    ratio = (ef.denominator(res.image_var) / ef.denominator(res.stored_var)) ** 2  # (σ² + ε) ratios
    z = np.abs(res.image_mean - res.stored_mean) / ef.denominator(res.stored_var)
    r = float(np.corrcoef(res.stored_mean, res.image_mean)[0, 1])
    out = [
        f"Layer {res.index} ({ef.layer_label(res.layer)}): the eight photos' "
        f"variance (+ ε) is {np.median(ratio):#.2g}× the stored one in the median channel "
        f"(from {ratio.min():#.2g}× to {ratio.max():#.2g}×); their means lie within one stored "
        f"σ = √(variance + ε) of the stored means in {np.mean(z < 1):.0%} of the channels, "
        f"and correlate with them at r = {r:.2f}. Eight photos are not ImageNet: the "
        "stored statistics average over the whole training set.",
    ]
    agree = [round(agreement(t, res.eval_top1) * N_IMAGES) for t in res.train_top1]
    pairs = zip(agree, BATCHES, strict=True)
    out.append(
        "With BatchNorm in training mode every layer normalizes with the statistics of the "
        "batch instead: the top-1 class agrees with evaluation mode for "
        + ", ".join(f"{a} of {N_IMAGES} images at batch {b}" for a, b in pairs)
        + f" (logits move by {res.drift.min():.0%}–{res.drift.max():.0%} of their size)."
        + _batch_lesson(agree)
    )
    out.append(
        "A batch of one image still runs in training mode: the smallest feature map any "
        f"BatchNorm sees has {res.min_values[0]} positions, so each averages over at least "
        f"{res.min_values[0]} values per channel. torch refuses training mode only with "
        "one value per channel (a batch of "
        'one with a 1 × 1 map, as after global pooling); then it raises "Expected more '
        'than 1 value per channel when training".'
    )
    return out


def _batch_lesson(agree: Sequence[int]) -> str:
    """What the training-mode agreements (per batch size in BATCHES) say, from the counts."""
    big = BATCHES[-1]
    if min(agree) == N_IMAGES:
        return ""
    if agree[-1] == N_IMAGES:
        who = f"Only batches of {big} keep every class: smaller batches are"
    elif agree[-1] > agree[0]:
        who = f"More agree at batch {big} than at batch {BATCHES[0]}, but {big} photos are"
    else:
        who = f"Even {big} photos are"
    return (
        f" {who} a poor stand-in for the population the network was trained on: inference "
        "uses evaluation mode, whatever the batch."
    )


def alt(res: RealNet) -> Sequence[str]:
    return (
        f"Two scatter plots for layer {res.index} ({ef.layer_label(res.layer)}), one dot per "
        "channel: the eight photos' mean against the stored running mean, and their "
        "variance against the stored running variance on log axes, with the line where "
        "they are equal.",
    )


# ---- the shift, and re-estimating the statistics -------------------------------------------


def staleness(stats: Mapping[str, tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """Per layer: the median channel's |image mean − stored mean| / √(stored σ² + ε), (49,)."""
    out = []
    for n in ef.BN_LAYERS:
        mean, var = ef.stored_stats(n)
        out.append(float(np.median(np.abs(np.asarray(stats[n][0]) - mean) / ef.denominator(var))))
    return np.asarray(out)


@dataclass(frozen=True)
class Shifted:
    """Top-1 classes of the shifted images with stored, re-estimated and mixed statistics."""

    kind: str
    strength: float
    prior: int  # N
    clean_top1: np.ndarray  # (8,) evaluation mode, clean images
    stored_top1: np.ndarray  # (8,) shifted images, stored statistics
    reest_top1: np.ndarray  # (8,) shifted images, statistics re-estimated on them (N = 0)
    prior_top1: np.ndarray  # (8,) shifted images, N/(N+n) stored + n/(N+n) re-estimated
    clean_stale: np.ndarray  # (49,) staleness of the clean images, per layer
    shifted_stale: np.ndarray  # (49,) of the shifted images

    def agree(self, top1: np.ndarray) -> int:
        """How many of the eight keep their clean top-1 class."""
        return int(np.sum(top1 == self.clean_top1))


@one_thread()
def run_shifted(setup: LabSetup, knobs: Mapping[str, Value], progress: Progress) -> Shifted:
    kind, strength = str(knobs["bn_shift"]), float(knobs["bn_strength"])  # type: ignore[arg-type]
    prior = int(knobs["bn_prior"])  # type: ignore[call-overload]
    if prior < 0:
        raise NormConfigError(f"the prior N must be ≥ 0, got {prior}")
    progress(0.0, "Shifting the images, then re-estimating the statistics on a copy…")
    x = ef.preprocess(photos.shifted(images(), kind, strength, seed=setup.seed))
    clean_logits, clean_stats = _clean()
    logits, stats = ef.forward_with_stats(ef.model(), x)
    progress(0.4, "Re-estimating every BatchNorm layer's statistics on the shifted images…")
    reest = ef.reestimate(x)
    with torch.no_grad():
        after = reest(x).argmax(-1).numpy()
        mixed = ef.blend(reest, prior, N_IMAGES)(x).argmax(-1).numpy() if prior else after
    return Shifted(
        kind, strength, prior, clean_logits.argmax(-1), logits.argmax(-1).numpy(), after, mixed,
        staleness(clean_stats), staleness(stats),
    )  # fmt: skip


def _what(res: Shifted) -> str:
    if res.kind == "none" or res.strength == 0:
        return "clean images"
    return f"{res.kind} {res.strength:g}"


BARS: tuple[tuple[str, str], ...] = (
    ("stored statistics", "stored_top1"),
    ("re-estimated (N = 0)", "reest_top1"),
    ("mixed with prior N", "prior_top1"),
)


def shifted_figure(res: Shifted, presenter: bool = False) -> go.Figure:
    """Staleness per layer (clean, shifted); top-1 agreement with each set of statistics."""
    fig = Spec.grid(
        1, 2, ("how far the images' means are from the stored ones", "top-1 class kept (of 8)"),
        column_widths=[0.62, 0.38], horizontal_spacing=0.14,
    )  # fmt: skip
    layers = list(range(1, len(ef.BN_LAYERS) + 1))
    for y, name, colour, dash in (
        (res.clean_stale, "clean images", style.PALETTE[0], "solid"),
        (res.shifted_stale, f"shifted ({_what(res)})", style.HIGHLIGHT, "dash"),
    ):
        fig.add_trace(
            trace(
                "scatter", x=layers, y=rounded(y, 4), mode="lines+markers", name=name,
                line={"color": colour, "dash": dash, "width": 3}, marker={"size": 6},
            ), 1, 1,
        )  # fmt: skip
    labels = [label.replace("prior N", f"N = {res.prior}") for label, _ in BARS]
    counts = [res.agree(getattr(res, f)) for _, f in BARS]
    fig.add_trace(
        trace(
            "bar", x=labels, y=counts, text=[f"{c} of {N_IMAGES}" for c in counts],
            textposition="outside", marker={"color": [style.PALETTE[i] for i in (0, 4, 2)]},
            showlegend=False, name="top-1 kept",
        ), 1, 2,
    )  # fmt: skip
    fig.update_xaxes(title="BatchNorm layer (forward order)", row=1, col=1)
    fig.update_yaxes(title="median |Δ mean| / stored σ", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(range=[0, N_IMAGES + 1.5], dtick=2, row=1, col=2)
    fig.update_layout(
        title=f"Shifted images ({_what(res)}) through EfficientNet-Lite0",
        legend=style.LEGEND_BELOW,
    )
    return style.apply(fig, presenter, height=460).figure()


def shifted_table(res: Shifted) -> pd.DataFrame:
    """One row per image: its clean class and its class under each set of statistics."""
    data: dict[str, list] = {"image": [f"{n}: {what}" for n, what in photos.SCENES.items()]}
    data["clean (stored statistics)"] = [ef.class_name(c) for c in res.clean_top1]
    for label, f in BARS:
        label = label.replace("prior N", f"N = {res.prior}")
        data[f"shifted, {label}"] = [ef.class_name(c) for c in getattr(res, f)]
    return pd.DataFrame(data)


def shifted_notes(res: Shifted) -> Sequence[str]:
    stored_n, reest_n, prior_n = (res.agree(getattr(res, f)) for _, f in BARS)
    out = [
        f"Shift: {photos.SHIFT_TEXT[res.kind]} (s = {res.strength:g}). In the median layer "
        f"the images' means sit {np.median(res.clean_stale):.2f} stored σ from the stored "
        f"means when clean and {np.median(res.shifted_stale):.2f} σ when shifted.",
        f"With the stored statistics, {stored_n} of {N_IMAGES} shifted images keep their "
        f"clean top-1 class; re-estimated on the shifted batch alone, {reest_n} of "
        f"{N_IMAGES}; mixed with the stored statistics at N = {res.prior}, {prior_n} of "
        f"{N_IMAGES}.",
    ]
    if reest_n < stored_n:
        out.append(
            "Re-estimating *hurt* here: eight photos are a tiny, far from representative "
            "sample, so their statistics replace ImageNet's population statistics with "
            f"those of eight photos. {cite('schneider2020')} adapt on many "
            "corrupted images at once, and for small samples mix in the stored statistics "
            "(the prior N); the statistics of a batch are only as good as the batch "
            f"({cite('wu2021')})."
        )
    elif reest_n > stored_n:
        out.append(
            "Re-estimating helped: with the stored statistics this stale, the statistics "
            "of eight shifted photos kept more clean classes."
        )
    else:
        out.append("Re-estimating on the shifted batch kept as many classes as the stored ones.")
    if res.prior and prior_n > max(stored_n, reest_n):
        out.append(f"Mixing the two at N = {res.prior} kept more classes than either alone.")
    elif res.prior and prior_n < min(stored_n, reest_n):
        out.append(f"Mixing the two at N = {res.prior} kept fewer classes than either alone.")
    return out


def shifted_alt(res: Shifted) -> Sequence[str]:
    counts = ", ".join(f"{label}: {res.agree(getattr(res, f))}" for label, f in BARS)
    return (
        "Left: a line per image set over the 49 BatchNorm layers, the median channel's "
        "distance between the images' mean and the stored mean in stored standard "
        f"deviations. Right: bars of how many of the 8 images keep their clean top-1 class "
        f"({counts}).",
    )


SECTION = Section("realnet", "Real network", INTRO, run, (LAYER,), figure, table, notes, alt=alt)
SHIFTED = Section(
    "realnet-shift", "Shifted photos, re-estimated statistics", SHIFTED_INTRO, run_shifted,
    (SHIFT, STRENGTH, PRIOR), shifted_figure, shifted_table, shifted_notes, alt=shifted_alt,
)  # fmt: skip
