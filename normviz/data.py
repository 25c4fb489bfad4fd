"""Seeded input generators: the same name, shape and seed give the same tensor."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from normviz.layouts import LAYOUTS


@dataclass(frozen=True)
class Generator:
    """A named input generator with a one-line description for the app."""

    key: str
    label: str
    description: str
    fn: Callable[[np.random.Generator, tuple[int, ...], int], np.ndarray]  # (rng, shape, c_axis)
    layouts: tuple[str, ...] = ("BTC", "NCHW")
    at_channels: Callable[[int], str] | None = None  # the description at C channels, if it varies

    def describe(self, C: int) -> str:
        """The description for an input with C channels (what the generator makes there)."""
        return self.at_channels(C) if self.at_channels else self.description


def _channel_view(shape: tuple[int, ...], c_axis: int) -> tuple[int, ...]:
    """A broadcast shape with C at the channel axis and 1 elsewhere."""
    return tuple(s if i == c_axis else 1 for i, s in enumerate(shape))


def _sample_view(shape: tuple[int, ...]) -> tuple[int, ...]:
    return (shape[0],) + (1,) * (len(shape) - 1)


def _noise(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """N(0, 1) drawn in float32, the dtype every generator returns (twice as fast)."""
    return rng.standard_normal(shape, dtype=np.float32)


def _per_channel(values: np.ndarray, shape: tuple[int, ...], c: int) -> np.ndarray:
    """One float32 value per channel, shaped to broadcast along the channel axis."""
    return values.astype(np.float32).reshape(_channel_view(shape, c))


def _normal(rng: np.random.Generator, shape: tuple[int, ...], c: int) -> np.ndarray:
    """Every value from N(0, 1): mean ≈ 0 and variance ≈ 1 overall."""
    return _noise(rng, shape)


def _channels(rng: np.random.Generator, shape: tuple[int, ...], c: int) -> np.ndarray:
    """Channel c has mean in [−3, 3] and spread in [0.3, 3]; every channel differs."""
    # every channel gets its own offset and spread, so pooling across channels shows
    C = shape[c]
    offset = _per_channel(rng.uniform(-3.0, 3.0, C), shape, c)
    scale = _per_channel(np.exp(rng.uniform(np.log(0.3), np.log(3.0), C)), shape, c)
    return offset + scale * _noise(rng, shape)


def _heavy(rng: np.random.Generator, shape: tuple[int, ...], c: int) -> np.ndarray:
    """Student-t, 3 degrees of freedom: about 2.8% of values lie beyond ±4 (normal: 0.006%)."""
    # t = z / sqrt(χ²_ν / ν), drawn in float32 (numpy's standard_t is 4× slower)
    z = _noise(rng, shape)
    chi2 = rng.standard_gamma(HEAVY_DF / 2, shape, dtype=np.float32) * 2
    return z / np.sqrt(chi2 / HEAVY_DF)


OUTLIER_EVERY = 16  # one outlier channel per this many channels, at least one
OUTLIER_CENTRE = (20.0, 60.0)  # |mean| of an outlier channel, drawn uniformly
OUTLIER_SPREAD = 5.0  # standard deviation of an outlier channel (the others: 1)


def n_outlier_channels(C: int) -> int:
    """How many outlier channels the "outliers" generator makes: 1 per 16, at least 1."""
    return max(1, C // OUTLIER_EVERY)


def _outlier_words(n: str) -> str:
    lo, hi = OUTLIER_CENTRE
    return (
        f"N(0, 1) except {n}, whose values have mean ±{lo:g}…{hi:g} and spread "
        f"{OUTLIER_SPREAD:g}, as in transformer activations"
    )


def outliers_at(C: int) -> str:
    """The "outliers" generator at C channels, in words computed from what it draws."""
    n = n_outlier_channels(C)
    return _outlier_words(f"{n} of the {C} channels" if n > 1 else f"one of the {C} channels")


def _outliers(rng: np.random.Generator, shape: tuple[int, ...], c: int) -> np.ndarray:
    """N(0, 1), except n_outlier_channels(C) channels at ±20…60 with spread 5."""
    # Trained transformers show a few feature dimensions with huge, persistent values;
    # they dominate every statistic that pools over features (LayerNorm, RMSNorm).
    C = shape[c]
    x = _noise(rng, shape)
    idx = rng.choice(C, n_outlier_channels(C), replace=False)
    big = np.zeros(C)
    big[idx] = rng.choice([-1.0, 1.0], idx.size) * rng.uniform(*OUTLIER_CENTRE, idx.size)
    spread = np.where(big != 0, OUTLIER_SPREAD, 1.0)
    return _per_channel(big, shape, c) + _per_channel(spread, shape, c) * x


def sample_scales(n: int) -> np.ndarray:
    """The per-sample factors of the "sample_scale" generator: ×0.1 … ×10, log-spaced."""
    return np.geomspace(0.1, 10.0, n) if n > 1 else np.ones(1)


def _sample_scale(rng: np.random.Generator, shape: tuple[int, ...], c: int) -> np.ndarray:
    """Sample b is sample_scales(B)[b] times one shared pattern (per-channel offsets/scales)."""
    # the same pattern at different volumes: a per-sample method must give equal outputs
    pattern = _channels(rng, (1, *shape[1:]), c)
    return sample_scales(shape[0]).astype(np.float32).reshape(_sample_view(shape)) * pattern


def smooth_length(n: int) -> float:
    """Gaussian smoothing length (in positions) of the "smooth" generator along an axis of n."""
    return max(1.0, n / 6)


def _smooth(rng: np.random.Generator, shape: tuple[int, ...], c: int) -> np.ndarray:
    """Smooth along the positional axes (H, W or T): neighbours correlate > 0.8 from ~16 on."""
    # white noise low-pass filtered (Gaussian, in Fourier space) along every axis that is
    # neither sample nor channel, like a CNN's feature maps: nearby pixels look alike
    x = _noise(rng, shape)
    axes = [ax for ax in range(1, len(shape)) if ax != c and shape[ax] > 1]
    if axes:
        spec = torch.fft.rfftn(torch.from_numpy(x), dim=axes)
        for i, ax in enumerate(axes):
            n = shape[ax]
            f = np.fft.rfftfreq(n) if i == len(axes) - 1 else np.fft.fftfreq(n)
            gain = np.exp(-0.5 * (2 * np.pi * f * smooth_length(n)) ** 2).astype(np.float32)
            spec = spec * torch.from_numpy(gain).reshape(_axis_view(len(shape), ax))
        x = torch.fft.irfftn(spec, s=[shape[a] for a in axes], dim=axes).numpy()
    x /= max(float(x.std()), 1e-12)
    C = shape[c]
    offset = _per_channel(rng.uniform(-1.0, 1.0, C), shape, c)
    scale = _per_channel(np.exp(rng.uniform(np.log(0.5), np.log(2.0), C)), shape, c)
    return offset + scale * x


def _axis_view(rank: int, ax: int) -> tuple[int, ...]:
    return tuple(-1 if i == ax else 1 for i in range(rank))


def _constant(rng: np.random.Generator, shape: tuple[int, ...], c: int) -> np.ndarray:
    """Channel 0 is always 0 and, with ≥ 2 samples, the last sample is all 0.

    So every method has at least one group of identical values (variance exactly 0):
    BatchNorm and InstanceNorm in channel 0, the others in the blank sample.
    """
    x = _channels(rng, shape, c)
    dead = [slice(None)] * len(shape)
    dead[c] = slice(0, 1)
    x[tuple(dead)] = 0.0  # a dead channel, like a ReLU unit that never fires
    if shape[0] > 1:
        x[-1] = 0.0  # a blank image, or a sequence that is all padding
    return x


HEAVY_DF = 3  # Student-t degrees of freedom: finite variance, very heavy tails

GENERATORS: dict[str, Generator] = {
    g.key: g
    for g in (
        Generator(
            "channels",
            "Per-channel offsets and scales",
            "each channel has its own mean (−3…3) and spread (0.3…3), so the axes you pool matter",
            _channels,
        ),
        Generator("normal", "Standard normal", "every value drawn from N(0, 1)", _normal),
        Generator(
            "heavy",
            "Heavy-tailed (Student-t)",
            "Student-t with 3 degrees of freedom: mostly modest values, now and then a huge one",
            _heavy,
        ),
        Generator(
            "outliers",
            "Outlier channels",
            _outlier_words(f"one channel in {OUTLIER_EVERY} (at least one)"),
            _outliers,
            at_channels=outliers_at,
        ),
        Generator(
            "sample_scale",
            "A different scale per sample",
            "one pattern repeated at a different volume per sample, from ×0.1 to ×10",
            _sample_scale,
        ),
        Generator(
            "smooth",
            "Smooth image-like maps",
            "values vary slowly along H and W (or along T), like a CNN's feature maps",
            _smooth,
        ),
        Generator(
            "constant",
            "Constant groups (why ε)",
            "channel 0 is always 0 and the last sample is blank: groups with zero variance",
            _constant,
        ),
    )
}

DEFAULT_GENERATOR = "channels"


def generate(name: str, layout: str, shape: tuple[int, ...], seed: int = 0) -> torch.Tensor:
    """A float32 tensor of `shape` from generator `name`, reproducible from `seed`.

    Raises:
        ValueError: unknown generator name.
    """
    if name not in GENERATORS:
        raise ValueError(f"unknown data generator {name!r}: choose one of {', '.join(GENERATORS)}")
    lay = LAYOUTS[layout]
    rng = np.random.default_rng(seed)
    arr = GENERATORS[name].fn(rng, tuple(shape), lay.channel_axis)
    return torch.from_numpy(np.ascontiguousarray(arr, dtype=np.float32))


__all__ = [
    "DEFAULT_GENERATOR",
    "GENERATORS",
    "HEAVY_DF",
    "Generator",
    "generate",
    "n_outlier_channels",
    "outliers_at",
    "sample_scales",
    "smooth_length",
]
