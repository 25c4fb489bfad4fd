"""What the Distributions page runs on: a named input and the resolved contract.

A `Setup` is small, frozen and hashable (the UI caches every section's result on
it): it names where the input comes from (generated: data, layout, shape, seed;
uploaded: the file's SHA-256 digest and the tensor's key) and holds the shared
settings resolved to a `Contract`, plus ε. It never holds a tensor: `input_tensor`
produces the tensor for a setup.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TypeVar

import numpy as np
import torch

from normviz.core import Contract, contract, normalize
from normviz.data import generate
from normviz.errors import NormConfigError
from normviz.gate import Gate
from normviz.knobs import Value
from normviz.layouts import LAYOUTS
from normviz.methods import METHODS
from normviz.pretrained import RealInput
from normviz.sections import Progress

# The sections after "All five methods" each demonstrate one property (γ/β, ε,
# RMSNorm's direction, per-sample scale); on a larger input they use its first samples
# (then first positions) up to this many values, which keeps the first run quick.
DEMO_MAX = 2**20
# A section whose input has more values than this waits for one of GATE's slots: a
# burst of a class at the element cap then holds about GATE.slots sections' tensors at
# once (a section at the cap peaks at 30 to 140 MB), not one per student.
GATED_ABOVE = 2**18
GATE = Gate("cap-sized computations", slots=2)

R = TypeVar("R")


@dataclass(frozen=True)
class Generated:
    """A seeded input from one of normviz.data's generators."""

    data: str
    layout: str
    shape: tuple[int, ...]
    seed: int

    def tensor(self) -> torch.Tensor:
        return generate(self.data, self.layout, self.shape, self.seed)


@dataclass(frozen=True)
class Uploaded:
    """A tensor from an uploaded file, named by the file's SHA-256 digest and its key.

    The bytes stay with the app: the UI subclasses this to read the parsed array from
    its cache keyed on the digest.
    """

    digest: str
    key: str
    layout: str
    shape: tuple[int, ...]

    def tensor(self) -> torch.Tensor:
        raise NormConfigError("the uploaded file is no longer in memory: upload it again")


Source = Generated | Uploaded | RealInput  # a real source: normviz.pretrained


@dataclass(frozen=True)
class Setup:
    """The page's input and its shared settings, resolved.

    `contract` is at the shape the sections run on: the whole input, or (see
    `leading`) its first samples; `source.shape` is the whole input's.
    """

    source: Source
    contract: Contract  # the page's method at this setup's shape
    eps: float
    groups: int  # the shared G: GroupNorm's views when the page's method is another one
    seed: int  # the generators' seed for the sections that make their own data

    @property
    def layout(self) -> str:
        return self.contract.layout

    @property
    def shape(self) -> tuple[int, ...]:
        return self.contract.shape

    @property
    def method(self) -> str:
        return self.contract.method

    @property
    def n_elements(self) -> int:
        return math.prod(self.shape)

    @property
    def partial(self) -> bool:
        """True when the sections run on the input's leading part, not all of it."""
        return self.shape != tuple(self.source.shape)

    def method_contract(self, method: str) -> Contract:
        """Another method's contract at this shape (GroupNorm with the shared G).

        Raises:
            NormConfigError: the shared G does not divide C (naming the divisors).
        """
        if method == self.method:
            return self.contract
        return contract(method, self.layout, self.shape, groups=_groups_for(method, self.groups))


def _groups_for(method: str, groups: int) -> int | None:
    return groups if METHODS[method].grouped else None


def gated(
    run: Callable[[Setup, Mapping[str, Value], Progress], R],
) -> Callable[[Setup, Mapping[str, Value], Progress], R]:
    """A section's run that waits its turn in GATE when its input is large."""

    @functools.wraps(run)
    def wrapper(setup: Setup, knobs: Mapping[str, Value], progress: Progress) -> R:
        if math.prod(setup.source.shape) <= GATED_ABOVE:
            return run(setup, knobs, progress)
        with GATE.enter(progress):
            return run(setup, knobs, progress)

    return wrapper


def input_tensor(setup: Setup) -> torch.Tensor:
    """The input of `setup`: its source's tensor, cut to the setup's shape."""
    x = setup.source.tensor()
    if tuple(x.shape) == setup.shape:
        return x
    return x[tuple(slice(0, n) for n in setup.shape)].contiguous()


def generated_like(setup: Setup, data: str) -> torch.Tensor:
    """Generator `data` at the setup's layout, shape and seed (a section's own data)."""
    return generate(data, setup.layout, setup.shape, setup.seed)


def leading_shape(shape: tuple[int, ...], layout: str, limit: int) -> tuple[int, ...]:
    """The shape of the first samples, then first positions (T or H), of a tensor of
    `shape`, so that at most `limit` values remain; every channel is kept.

    `shape` itself when it is within `limit`. Any such slice shows a method's
    properties as well as the whole tensor, at a bounded cost.
    """
    sizes = list(shape)
    lay = LAYOUTS[layout]
    for ax in (0, 2 if lay.channel_first else 1):  # samples, then T or H
        rest = math.prod(sizes) // sizes[ax]
        sizes[ax] = max(1, min(sizes[ax], limit // rest))
    return tuple(sizes)


def leading(setup: Setup, limit: int = DEMO_MAX) -> Setup:
    """`setup` on its input's first values (at most `limit`), every channel kept."""
    shape = leading_shape(setup.shape, setup.layout, limit)
    if shape == setup.shape:
        return setup
    return replace(setup, contract=replace(setup.contract, shape=shape))


def part_note(whole: Setup, part: Setup) -> str | None:
    """What the page says when the demonstration sections use part of the input."""
    if part.shape == whole.shape:
        return None
    lay = LAYOUTS[whole.layout]
    return (
        f"**From here on, part of the input.** Each section below demonstrates one "
        f"property, which any slice of the tensor shows as well as the whole. To keep the "
        f"page quick at {whole.n_elements:,} values they use the first "
        f"{part.n_elements:,}: {lay.shape_text(part.shape)}, every channel kept. The "
        "histograms and tables above count every value."
    )


def norm(
    x: torch.Tensor | np.ndarray,
    con: Contract,
    eps: float,
    weight: object = None,
    bias: object = None,
) -> torch.Tensor:
    """`normalize` with a resolved contract (its method, groups and axes), output only."""
    custom = con.method == "custom"
    return normalize(
        x,
        con.method,
        con.layout,
        groups=con.groups if con.method_obj.grouped else None,
        axes=con.reduced if custom else None,
        centred=con.centred,
        eps=eps,
        weight=weight,  # type: ignore[arg-type]
        bias=bias,  # type: ignore[arg-type]
    ).output


def example_setup() -> Setup:
    """A small, fast setup (the interface tests run every section on it)."""
    source = Generated("channels", "BTC", (4, 6, 8), 0)
    return Setup(source, contract("batch", "BTC", source.shape), 1e-5, 2, 0)
