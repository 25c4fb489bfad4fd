"""What the sections about an elementwise method (DyT) run on: a method and an input, no contract.

A method of kind "elementwise" pools nothing, so there is no `Contract` to resolve; its
sections take an `ElementwiseSetup` (hashable, like every setup: it names its input,
never holds a tensor) and run the registry's reference module on the input.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from normviz.errors import NormConfigError
from normviz.methods import METHODS

DEMO_MAX = 2**18  # values an elementwise section runs on: the input's leading samples


class Named(Protocol):
    """An input named by plain values (normviz.distributions.Generated, a RealInput...)."""

    def tensor(self) -> torch.Tensor: ...


def applies(method: str) -> bool:
    """True for a method with no statistics (the pages show its own sections)."""
    return method in METHODS and METHODS[method].kind == "elementwise"


@dataclass(frozen=True)
class ElementwiseSetup:
    """An elementwise method, the input it sees, and the shared G and ε for comparisons."""

    method: str
    layout: str
    source: Named  # hashable; `.tensor()` gives the input
    groups: int = 2  # GroupNorm's G when the sections compare with it
    eps: float = 1e-5

    def __post_init__(self) -> None:
        if not applies(self.method):
            raise NormConfigError(f"{self.method!r} is not an elementwise method")

    def tensor(self) -> torch.Tensor:
        """The input's leading samples, at most DEMO_MAX values (float32)."""
        x = self.source.tensor().float()
        per = max(1, x[0].numel())
        return x[: max(1, DEMO_MAX // per)].contiguous()


def fresh_output(method: str, x: torch.Tensor, layout: str) -> torch.Tensor:
    """x through a freshly built module of `method` (its initial α, γ = 1, β = 0)."""
    with torch.no_grad():
        return METHODS[method].apply(x, layout)
