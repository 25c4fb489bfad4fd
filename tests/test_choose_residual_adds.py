"""The audit's residual-add detection (normviz/choose/residual_adds.py) and the placements it
names for DeepNorm's α·x + F(x) and Peri-LN's sandwich: each recognised where it is there,
and not where a model only looks like it."""

from __future__ import annotations

import pytest
import torch
from torch import fx, nn

from normviz.choose.engine import audit
from normviz.choose.findings import BRANCH, NONE, POST, PRE, SANDWICH
from normviz.choose.residual_adds import residual_adds

D = 8


class DeepNormBlock(nn.Module):
    """LN(α·x + F(x)): DeepNorm's post-norm with an up-weighted skip path."""

    def __init__(self, alpha: float = 2.0) -> None:
        super().__init__()
        self.alpha = alpha
        self.fc = nn.Linear(D, D)
        self.norm = nn.LayerNorm(D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.alpha * x + self.fc(x))


class TwoScaledCopies(nn.Module):
    """LN(2·x + 3·x): a sum of two rescaled copies of one tensor, no branch, no residual."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(2.0 * x + 3.0 * x)


class ScaledPlusUnrelated(nn.Module):
    """LN(α·x + F(y)): the branch does not compute from x, so x is no skip path."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(D, D)
        self.norm = nn.LayerNorm(D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x[..., :D]  # a view of the first half, the branch's own input
        return self.norm(2.0 * y + self.fc(x[..., D:]))


class Sandwich(nn.Module):
    """x + Norm_out(F(Norm_in(x))): Peri-LN."""

    def __init__(self) -> None:
        super().__init__()
        self.norm_in, self.fc, self.norm_out = nn.LayerNorm(D), nn.Linear(D, D), nn.LayerNorm(D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.norm_out(self.fc(self.norm_in(x)))


class OutputNormOnly(nn.Module):
    """x + Norm(F(x)): a norm ends the branch, but the branch opens with none: no sandwich."""

    def __init__(self) -> None:
        super().__init__()
        self.fc, self.norm_out = nn.Linear(D, D), nn.LayerNorm(D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.norm_out(self.fc(x))


def _adds(model: nn.Module) -> list[tuple[str, str, str]]:
    graph = fx.symbolic_trace(model).graph
    return [(a.name, s.name, b.name) for a, s, b in residual_adds(graph)]


def _placements(model: nn.Module, width: int = D) -> dict[str, str]:
    report = audit(model, torch.randn(4, 3, width), type(model).__name__)
    assert report.traced
    return report.placements


def test_deepnorm_scaled_skip_is_a_residual_add() -> None:
    ((_, skip, branch),) = _adds(DeepNormBlock())
    assert skip == "mul" and branch == "fc"  # the skip operand is α·x, the branch F(x)
    assert _placements(DeepNormBlock()) == {"norm": POST}


@pytest.mark.parametrize("alpha", [1.0, 2.63])
def test_deepnorm_is_recognised_for_any_constant_alpha(alpha: float) -> None:
    assert len(_adds(DeepNormBlock(alpha))) == 1


@pytest.mark.parametrize("model", [TwoScaledCopies(), ScaledPlusUnrelated()])
def test_a_scaled_sum_without_a_branch_of_x_is_no_residual_add(model: nn.Module) -> None:
    assert _adds(model) == []
    width = 2 * D if isinstance(model, ScaledPlusUnrelated) else D
    assert _placements(model, width) == {"norm": NONE}  # not a post-norm: no residual at all


def test_peri_ln_output_norm_is_a_sandwich() -> None:
    assert _placements(Sandwich()) == {"norm_in": PRE, "norm_out": SANDWICH}


def test_an_output_norm_without_a_pre_norm_is_no_sandwich() -> None:
    assert len(_adds(OutputNormOnly())) == 1
    assert _placements(OutputNormOnly()) == {"norm_out": BRANCH}
