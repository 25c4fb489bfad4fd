"""Gradients flow through μ and σ² (issue 24): BatchNorm's Jacobian, checked against torch."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from normviz.batchnorm import SECTIONS, coupling, lab, stream
from normviz.sections import no_progress

SETUPS = {
    "BTC": lab.LabSetup(layout="BTC", sample_shape=(5, 6), batch_size=4, steps=30),
    "NCHW": lab.LabSetup(layout="NCHW", sample_shape=(3, 2, 3), batch_size=3, steps=30),
}


def _fd_jacobian(x: torch.Tensor, training: bool, mean: float, var: float, eps: float):
    """∂y_i/∂x_j of F.batch_norm by central differences (float64), the oracle."""
    rm, rv = torch.tensor([mean], dtype=x.dtype), torch.tensor([var], dtype=x.dtype)

    def f(v: torch.Tensor) -> torch.Tensor:
        return F.batch_norm(v.view(-1, 1), rm.clone(), rv.clone(), None, None, training, 0.0, eps)

    h = 1e-6
    cols = []
    for j in range(len(x)):
        e = torch.zeros_like(x)
        e[j] = h
        cols.append(((f(x + e) - f(x - e)) / (2 * h)).view(-1))
    return torch.stack(cols, 1)


@pytest.mark.parametrize("layout", list(SETUPS))
@pytest.mark.parametrize("n", [4, 8])
def test_jacobian_matches_torch(layout: str, n: int) -> None:
    setup = SETUPS[layout]
    res = coupling.SECTION.run(setup, {"cp_n": n}, no_progress)
    ds = stream.make_dataset(setup)
    c = 2 if layout == "BTC" else 1
    x = ds.train[:n].select(c, 0).reshape(n, -1)[:, 0].double()
    assert np.array_equal(res.x, x.numpy())
    m, v = float(ds.mean[0]), float(ds.var[0])
    train = _fd_jacobian(x, True, m, v, setup.eps).numpy()
    ev = _fd_jacobian(x, False, m, v, setup.eps).numpy()
    np.testing.assert_allclose(res.train, train, atol=1e-6)
    np.testing.assert_allclose(res.eval, ev, atol=1e-6)
    # the closed form: (δ_ij − 1/n − x̂_i x̂_j / n) / √(σ² + ε)
    s = torch.sqrt(x.var(unbiased=False) + setup.eps)
    xh = ((x - x.mean()) / s).numpy()
    closed = (np.eye(n) - 1 / n - np.outer(xh, xh) / n) / float(s)
    np.testing.assert_allclose(res.train, closed, atol=1e-10)
    # off the diagonal: non-zero in training, exactly zero in evaluation and with constant stats
    assert res.off_diagonal(res.train) > 1e-3
    assert res.off_diagonal(res.eval) == 0 and res.off_diagonal(res.preproc) == 0
    assert res.eval[0, 0] == pytest.approx(1 / np.sqrt(v + setup.eps), rel=1e-6)
    assert res.preproc[0, 0] == pytest.approx(1 / float(s), rel=1e-9)
    # moving the last sample changes sample 0's own slope: the closed form at the moved batch
    moved = x.clone()
    moved[-1] += coupling.SHIFT * x.std(unbiased=False)
    moved_j = _fd_jacobian(moved, True, m, v, setup.eps)
    assert res.moved_diag == pytest.approx(float(moved_j[0, 0]), abs=1e-6)
    assert abs(res.moved_diag - res.train[0, 0]) > 1e-3
    # the gradient of L = Σ w_i y_i through BatchNorm sums to 0; with constant stats it does not
    w = torch.linspace(0.0, 1.0, n, dtype=torch.float64)
    xg = x.clone().requires_grad_()
    y = F.batch_norm(xg.view(-1, 1), None, None, None, None, True, 0.0, setup.eps).view(-1)
    (g,) = torch.autograd.grad((w * y).sum(), xg)
    assert res.grad_sum[0] == pytest.approx(float(g.sum()), abs=1e-12)
    assert abs(res.grad_sum[0]) < 1e-12 and abs(res.grad_sum[1]) > 0.1


def test_notes_follow_the_numbers() -> None:
    res = coupling.SECTION.run(SETUPS["BTC"], {"cp_n": 8}, no_progress)
    text = "\n".join(coupling.notes(res))
    assert f"**{res.off_diagonal(res.train):.3g}**" in text
    assert "56 of the 56 off-diagonal entries are non-zero" in text
    assert f"{res.train[0, 0]:.4g} → {res.moved_diag:.4g}" in text
    assert "changes:" in text and "depends on its batch-mates" in text
    assert f"slope 1/√(running var + ε) = {res.eval[0, 0]:.4g}" in text
    df = coupling.table(res)
    assert df["largest |∂y_i/∂x_j|, i ≠ j"].tolist()[1:] == [0.0, 0.0]


def test_identical_values_are_still_coupled_through_the_mean() -> None:
    # with every x equal, x̂ = 0: the Jacobian is (I − 1/n)/√ε, still coupled through μ
    x = torch.full((4,), 2.0, dtype=torch.float64)
    bn = torch.nn.BatchNorm1d(1, dtype=torch.float64).train()
    j = coupling.jacobian(bn, x).numpy()
    np.testing.assert_allclose(j, (np.eye(4) - 0.25) / np.sqrt(1e-5), rtol=1e-6)


def test_registered_in_the_lab() -> None:
    assert coupling.SECTION in SECTIONS
    fig = coupling.figure(coupling.SECTION.run(SETUPS["BTC"], {"cp_n": 16}, no_progress))
    assert [t.type for t in fig.data] == ["heatmap", "heatmap"]
    assert len(fig.to_json()) < 100_000
