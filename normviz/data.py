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


def _channel_view(shape: tuple[int, ...], c_axis: int) -> tuple[int, ...]:
    """A broadcast shape with C at the channel axis and 1 elsewhere."""
    return tuple(s if i == c_axis else 1 for i, s in enumerate(shape))


def _sample_view(shape: tuple[int, ...]) -> tuple[int, ...]:
    return (shape[0],) + (1,) * (len(shape) - 1)


def _normal(rng: np.random.Generator, shape: tuple[int, ...], c: int) -> np.ndarray:
    return rng.standard_normal(shape)


def _channels(rng: np.random.Generator, shape: tuple[int, ...], c: int) -> np.ndarray:
    # every channel gets its own offset and spread, so pooling across channels shows
    C = shape[c]
    offset = rng.uniform(-3.0, 3.0, C).reshape(_channel_view(shape, c))
    scale = np.exp(rng.uniform(np.log(0.3), np.log(3.0), C)).reshape(_channel_view(shape, c))
    return offset + scale * rng.standard_normal(shape)


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


__all__ = ["DEFAULT_GENERATOR", "GENERATORS", "Generator", "generate"]
