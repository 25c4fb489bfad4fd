"""Weight Standardization's reference (normviz.weightstd) against the paper's formula in
float64, and its gradient against a hand-written one, autograd and finite differences."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from normviz.weightstd import EPS, WSConv2d, standardize


def formula(w: np.ndarray, eps: float = EPS) -> np.ndarray:
    """Ŵ_i = (W_i − μ_i) / sqrt(σ²_i + ε) over each output channel's fan-in, in float64."""
    out = np.empty_like(w, dtype=np.float64)
    for i in range(w.shape[0]):
        row = w[i].astype(np.float64)
        mu = row.sum() / row.size
        var = ((row - mu) ** 2).sum() / row.size  # biased: 1/I
        out[i] = (row - mu) / np.sqrt(var + eps)
    return out


def hand_gradient(w: np.ndarray, g: np.ndarray, eps: float = EPS) -> np.ndarray:
    """dL/dW from dL/dŴ = g, written out: u = W − μ, s = sqrt(mean(u²) + ε), Ŵ = u / s;
    dL/du = g / s − u · Σ(g·u) / (I s³), then dL/dW = dL/du − mean(dL/du)."""
    out = np.empty_like(w, dtype=np.float64)
    for i in range(w.shape[0]):
        u = w[i] - w[i].mean()
        n = u.size
        s = np.sqrt((u**2).mean() + eps)
        du = g[i] / s - u * (g[i] * u).sum() / (n * s**3)
        out[i] = du - du.mean()
    return out


@pytest.mark.parametrize("shape", [(4, 1, 3, 3), (8, 4, 3, 3), (3, 2, 5, 1)])
def test_standardize_is_the_formula(shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(0)
    w = rng.normal(0.3, 2.0, shape)
    got = standardize(torch.tensor(w)).numpy()
    np.testing.assert_allclose(got, formula(w), rtol=1e-12, atol=1e-12)
    flat = got.reshape(shape[0], -1)
    np.testing.assert_allclose(flat.mean(1), 0.0, atol=1e-12)  # each filter: mean 0
    var = flat.var(1)
    np.testing.assert_allclose(var, formula(w).reshape(shape[0], -1).var(1), rtol=1e-12)
    assert (var < 1).all() and (var > 1 - 1e-4).all()  # variance 1 up to ε's share
    got32 = standardize(torch.tensor(w, dtype=torch.float32)).numpy()
    np.testing.assert_allclose(got32, formula(w), rtol=1e-5, atol=1e-5)


def test_the_gradient_flows_through_mean_and_variance() -> None:
    rng = np.random.default_rng(1)
    w_np, g_np = rng.normal(size=(6, 3, 3, 3)), rng.normal(size=(6, 3, 3, 3))
    w = torch.tensor(w_np, requires_grad=True)
    (grad,) = torch.autograd.grad(standardize(w), w, torch.tensor(g_np))
    np.testing.assert_allclose(grad.numpy(), hand_gradient(w_np, g_np), rtol=1e-10, atol=1e-12)
    # the standardization removes each filter's mean and scale: the gradient has none of them
    flat = grad.numpy().reshape(6, -1)
    np.testing.assert_allclose(flat.mean(1), 0.0, atol=1e-12)
    # a gradient treating μ and σ as constants (plain g / s) is not it
    s = np.sqrt(w_np.reshape(6, -1).var(1) + EPS).reshape(6, 1, 1, 1)
    assert not np.allclose(grad.numpy(), g_np / s, atol=1e-3)


def test_gradcheck_against_finite_differences() -> None:
    torch.manual_seed(0)
    w = torch.randn(3, 2, 3, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(standardize, (w,), eps=1e-6, atol=1e-7)
    conv = WSConv2d(2, 3, 3, padding=1).double()
    x = torch.randn(2, 2, 5, 5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(conv, (x,), eps=1e-6, atol=1e-7)
    # and with torch.func: the Jacobian of Ŵ with respect to W, column by column
    jac = torch.func.jacrev(standardize)(w.detach()).reshape(w.numel(), w.numel())
    for k in (0, 7, 30):
        e = torch.zeros(w.numel(), dtype=torch.float64)
        e[k] = 1e-6
        step = (standardize(w.detach() + e.view_as(w)) - standardize(w.detach() - e.view_as(w))) / (
            2e-6
        )
        torch.testing.assert_close(jac[:, k], step.reshape(-1), rtol=1e-6, atol=1e-8)


def test_wsconv2d_is_conv2d_with_the_standardized_filters() -> None:
    torch.manual_seed(3)
    conv = WSConv2d(4, 8, 3, stride=2, padding=1)
    x = torch.randn(2, 4, 8, 8, dtype=torch.float64)
    w = torch.tensor(formula(conv.weight.detach().numpy().astype(np.float64)))
    want = F.conv2d(x, w, conv.bias.detach().double(), 2, 1)
    torch.testing.assert_close(conv.double()(x), want, rtol=1e-10, atol=1e-10)
    # the same parameters, drawn the same way, as nn.Conv2d: the lab's seeds give equal inits
    torch.manual_seed(5)
    a = WSConv2d(1, 4, 3, padding=1)
    torch.manual_seed(5)
    b = nn.Conv2d(1, 4, 3, padding=1)
    assert [n for n, _ in a.named_parameters()] == [n for n, _ in b.named_parameters()]
    torch.testing.assert_close(a.weight, b.weight)
    assert "ws_eps=1e-05" in repr(a)
