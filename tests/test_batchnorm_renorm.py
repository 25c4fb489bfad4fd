"""Batch Renormalization: the reference module against torch's BatchNorm, its formula
and autograd (r and d constants, as the paper treats them), and its clipping bounds."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch
from held_gate import run_behind_held
from signals import assert_within_budget
from torch import nn

from normviz import batchnorm as bn
from normviz import style
from normviz.batchnorm import renorm
from normviz.batchnorm.lab import LabSetup
from normviz.batchnorm.model import NET
from normviz.batchrenorm import D_MAX, R_MAX, BatchRenorm
from normviz.sections import no_progress
from normviz.training.data import batches, digits
from normviz.training.models import build
from normviz.training.train import GATE

SHAPES = {1: (6, 4), 2: (3, 4, 2, 5)}  # BatchNorm1d's (N, C) and BatchNorm2d's (N, C, H, W)


def _batches(dim: int, k: int = 5, seed: int = 0) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [
        torch.randn(SHAPES[dim], generator=g, dtype=torch.float64) * (1 + i) + i for i in range(k)
    ]


def _pair(dim: int, r_max: float, d_max: float) -> tuple[BatchRenorm, nn.Module]:
    brn = BatchRenorm(4, r_max=r_max, d_max=d_max, momentum=0.2).double()
    bn = (nn.BatchNorm1d if dim == 1 else nn.BatchNorm2d)(4, momentum=0.2).double()
    with torch.no_grad():
        for m in (brn, bn):
            m.weight.copy_(torch.tensor([0.5, 1.0, 1.5, 2.0]))
            m.bias.copy_(torch.tensor([-1.0, 0.0, 0.5, 1.0]))
    return brn, bn


@pytest.mark.parametrize("dim", [1, 2])
def test_without_corrections_it_is_batchnorm(dim: int) -> None:
    """r_max = 1, d_max = 0: outputs, running statistics and gradients equal torch's."""
    brn, bn = _pair(dim, 1.0, 0.0)
    for x in _batches(dim):
        a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
        ya, yb = brn(a), bn(b)
        torch.testing.assert_close(ya, yb)
        (ya * ya.detach()).sum().backward()
        (yb * yb.detach()).sum().backward()
        torch.testing.assert_close(a.grad, b.grad)
    torch.testing.assert_close(brn.running_mean, bn.running_mean)
    torch.testing.assert_close(brn.running_var, bn.running_var)
    torch.testing.assert_close(brn.weight.grad, bn.weight.grad)
    torch.testing.assert_close(brn.bias.grad, bn.bias.grad)
    brn.eval(), bn.eval()
    x = _batches(dim, 1, seed=9)[0] * 3
    torch.testing.assert_close(brn(x), bn(x))


@pytest.mark.parametrize("dim", [1, 2])
def test_training_output_is_the_formula(dim: int) -> None:
    """x̂ = (x − μ_B)/σ_B · r + d with r, d clipped, written out from the stored statistics."""
    brn, _ = _pair(dim, 1.5, 0.5)
    for x in _batches(dim):
        mu, sigma = brn.running_mean.clone(), (brn.running_var + brn.eps).sqrt()
        y = brn(x)
        dims = [0, *range(2, x.ndim)]
        shape = (1, -1) + (1,) * (x.ndim - 2)
        mu_b, sigma_b = x.mean(dims), (x.var(dims, unbiased=False) + brn.eps).sqrt()
        r = torch.clamp(sigma_b / sigma, 1 / 1.5, 1.5)
        d = torch.clamp((mu_b - mu) / sigma, -0.5, 0.5)
        xhat = (x - mu_b.reshape(shape)) / sigma_b.reshape(shape) * r.reshape(shape)
        want = (xhat + d.reshape(shape)) * brn.weight.reshape(shape) + brn.bias.reshape(shape)
        torch.testing.assert_close(y, want)
        torch.testing.assert_close(brn.last_r, r)
        torch.testing.assert_close(brn.last_d, d)


def test_unclipped_training_output_is_the_running_statistics() -> None:
    """With bounds never reached, r and d swap the batch's statistics for the running ones."""
    brn, bn = _pair(2, 1e6, 1e6)
    for x in _batches(2, 3):
        bn.eval()
        want = bn(x)  # evaluation mode: the running statistics before this batch
        bn.train(), bn(x)
        torch.testing.assert_close(brn(x), want)


@pytest.mark.parametrize("dim", [1, 2])
def test_gradients_treat_r_and_d_as_constants(dim: int) -> None:
    """Autograd through the module equals torch's BatchNorm (no affine) times constant r,
    plus constant d, then γ, β; and differs from letting the gradient flow through r, d."""
    brn, _ = _pair(dim, 2.0, 1.0)
    xs = _batches(dim)
    for x in xs[:2]:  # move the running statistics away from (0, 1)
        brn(x)
    x = xs[2]
    mu, sigma = brn.running_mean.clone(), (brn.running_var + brn.eps).sqrt()
    a = x.clone().requires_grad_()
    y = brn(a)
    r, d = brn.last_r.clone(), brn.last_d.clone()
    assert ((r > 1 / 2.0) & (r < 2.0)).any()  # some r unclipped: its gradient would count
    w = torch.linspace(-1, 1, y.numel(), dtype=y.dtype).reshape(y.shape)
    (y * w).sum().backward()
    shape = (1, -1) + (1,) * (x.ndim - 2)
    b = x.clone().requires_grad_()
    gamma = brn.weight.detach().clone().requires_grad_()
    beta = brn.bias.detach().clone().requires_grad_()
    core = torch.nn.functional.batch_norm(b, None, None, training=True, eps=brn.eps)
    want = (core * r.reshape(shape) + d.reshape(shape)) * gamma.reshape(shape)
    (want + beta.reshape(shape)).mul(w).sum().backward()
    torch.testing.assert_close(a.grad, b.grad)
    torch.testing.assert_close(brn.weight.grad, gamma.grad)
    torch.testing.assert_close(brn.bias.grad, beta.grad)
    # the same expression with r, d as functions of the batch gives another gradient
    c = x.clone().requires_grad_()
    dims = [0, *range(2, x.ndim)]
    sb = (c.var(dims, unbiased=False) + brn.eps).sqrt()
    r_live = torch.clamp(sb / sigma, 1 / 2.0, 2.0)
    d_live = torch.clamp((c.mean(dims) - mu) / sigma, -1.0, 1.0)
    core = torch.nn.functional.batch_norm(c, None, None, training=True, eps=brn.eps)
    live = (core * r_live.reshape(shape) + d_live.reshape(shape)) * gamma.detach().reshape(shape)
    (live * w).sum().backward()
    assert not torch.allclose(a.grad, c.grad)


def test_clipping_bounds_are_hit() -> None:
    """Batches far from the running statistics: r and d sit on their bounds, both sides."""
    brn = BatchRenorm(4).double()  # the paper's bounds
    assert (brn.r_max, brn.d_max) == (R_MAX, D_MAX) == (3.0, 5.0)
    g = torch.Generator().manual_seed(1)
    z = torch.randn(64, 4, generator=g, dtype=torch.float64)
    z = (z - z.mean(0)) / z.std(0, unbiased=False)  # each channel: mean 0, spread 1
    # channel spreads 10, 0.01, 2, 1 and means 50, −50, 1, 0 against running (0, 1)
    x = z * torch.tensor([10.0, 0.01, 2.0, 1.0]) + torch.tensor([50.0, -50.0, 1.0, 0.0])
    brn(x)
    torch.testing.assert_close(brn.last_r[:2], torch.tensor([3.0, 1 / 3.0], dtype=x.dtype))
    torch.testing.assert_close(brn.last_d[:2], torch.tensor([5.0, -5.0], dtype=x.dtype))
    sigma_b = (torch.tensor([4.0, 1.0], dtype=x.dtype) + brn.eps).sqrt()
    torch.testing.assert_close(brn.last_r[2:], sigma_b / (1 + brn.eps) ** 0.5)  # inside
    torch.testing.assert_close(
        brn.last_d[2:],
        torch.tensor([1.0, 0.0], dtype=x.dtype) / (1 + brn.eps) ** 0.5,
        atol=1e-6,
        rtol=0,
    )


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="r_max"):
        BatchRenorm(3, r_max=0.5)
    with pytest.raises(ValueError, match="C = 3"):
        BatchRenorm(3)(torch.zeros(2, 4))


# ---- the BatchNorm-lab section -------------------------------------------------------------


@functools.cache
def _runs(seed: int):
    """The section at its defaults (3 seeds from `seed`), at a third of the samples."""
    setup = LabSetup(seed=seed, model_scale=0.35)
    return renorm.run(setup, renorm.SECTION.defaults(), no_progress)


def test_the_schedule_ramps_to_the_papers_bounds() -> None:
    assert renorm.bounds(0, 1000) == (1.0, 0.0)
    assert renorm.bounds(50, 1000) == (1.0, 0.0)  # the warm-up: BatchNorm
    r, d = renorm.bounds(200, 1000)  # halfway up the r ramp, past three quarters of d's
    assert r == pytest.approx(2.0) and d == pytest.approx(3.75)
    assert renorm.bounds(999, 1000) == (R_MAX, D_MAX)


def test_renormed_is_the_same_network_with_brn() -> None:
    """At r_max 1, d_max 0 the swapped network is the BatchNorm one, output for output."""
    bn = build(NET, "batch", 0)
    brn = renorm.renormed(bn)
    assert sum(isinstance(m, BatchRenorm) for m in brn) == 2
    assert not any(isinstance(m, nn.BatchNorm1d) for m in brn)
    shared = {id(p) for p in bn.parameters()} & {id(p) for p in brn.parameters()}
    assert not shared  # training one never moves the other
    x = torch.randn(8, 64, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(brn(x), bn(x))
    brn.eval(), bn.eval()
    torch.testing.assert_close(brn(x), bn(x))


def test_sorted_batches_hold_one_class() -> None:
    y = digits().y_train
    rows = renorm.sorted_batches(0, y, 16, 2 * len(y))
    assert rows.shape == (2 * len(y) // 16, 16)
    one = [(y[b] == y[b][0]).all() for b in rows]
    assert np.mean(one) > 0.9  # only a batch at a class boundary mixes two
    iid = batches(0, len(y), 16, len(y))
    assert np.mean([(y[b] == y[b][0]).all() for b in iid]) < 0.05


@pytest.mark.parametrize("seed", [0, 3, 6])
def test_the_verdict_is_computed_from_the_runs(seed: int) -> None:
    """For three seeds: each regime's verdict says what its numbers show, seed by seed."""
    res = _runs(seed)
    assert res.eval_acc.shape == res.train_acc.shape == (2, 2, 3)
    notes = list(renorm.notes(res))
    for i in range(len(renorm.REGIMES)):
        (said,) = [n for n in notes if n.startswith(f"{renorm.WHERE[i]},")]
        checks = (res.eval_acc[i, 1] > res.eval_acc[i, 0], res.gap[i, 1] < res.gap[i, 0])
        for ok, (yes, _) in zip(checks, renorm.CLAIMS, strict=True):
            if ok.all():
                assert f"{yes} for each of the 3 seeds" in said
            elif not ok.any():
                assert f"{yes} for none of the 3 seeds" in said
            else:
                assert f"{yes} for {int(ok.sum())} of the 3 seeds only: mixed" in said
        chance = max(res.eval_acc[i, 0].mean(), res.train_acc[i, 0].mean()) < 0.15
        assert ("near chance (10 %) in both modes" in said) == chance
        assert f"{100 * res.eval_acc[i, 1].mean():.1f} %" in said
    # the paper's claim at batch 2: BRN's running statistics serve evaluation better
    assert (res.eval_acc[0, 1] > res.eval_acc[0, 0]).all()


def test_r_and_d_stay_within_their_bounds() -> None:
    res = _runs(0)
    for i in range(len(renorm.REGIMES)):
        rb, db = np.array([renorm.bounds(int(s), res.steps[i]) for s in res.trace_steps[i]]).T
        r, d = res.r[i], res.d[i]
        assert (r[:, 0] >= 1 / rb - 1e-6).all() and (r[:, 2] <= rb + 1e-6).all()
        assert (np.abs(d[:, [0, 2]]) <= db[:, None] + 1e-6).all()
        assert (r[:, 0] <= r[:, 1]).all() and (r[:, 1] <= r[:, 2]).all()
        assert (r[rb == 1] == 1).all() and (d[db == 0] == 0).all()  # warm-up: BatchNorm
        r_hit, d_hit = renorm.on_bound(res, i)
        assert 0 <= r_hit <= 1 and 0 <= d_hit <= 1
    # sorted batches: one class per batch moves μ_B far from μ, so d reaches its bound
    assert renorm.on_bound(res, 1)[1] > 0


def test_figure_table_and_text_alternative() -> None:
    res = _runs(0)
    fig = renorm.figure(res)
    assert_within_budget(fig, what="renorm")
    assert fig.layout.legend.orientation == style.LEGEND_BELOW["orientation"]
    assert len([a for a in fig.layout.annotations if a.text.startswith(("r, ", "d, "))]) == 4
    df = renorm.table(res)
    assert list(df["normalization"]) == ["BatchNorm", "BRN"] * 2
    np.testing.assert_allclose(df["train/eval gap"], res.gap.mean(-1).reshape(-1))
    alt = renorm.SECTION.alt_text(res, fig)
    assert len(alt) == 2 and f"{res.steps[0]:,} training steps" in alt[0]


def test_the_section_is_in_the_lab() -> None:
    assert renorm.SECTION in bn.SECTIONS and "renorm" in (bn.SIM.choices or ())
    assert "bn_seeds" in [k.name for k in renorm.SECTION.knobs]


def test_a_first_run_queues_behind_a_training_lab_run() -> None:
    """The section trains through the training lab's gate: while another run holds it,
    this one says it is queued, then runs."""
    res, said = run_behind_held(
        GATE, lambda progress: renorm.run(LabSetup(model_scale=0.05), {"bn_seeds": 1}, progress)
    )
    assert any(s.startswith("Queued: 1 training-lab run") for s in said)
    assert res.eval_acc.shape == (2, 2, 1)


def test_a_claim_is_counted_seed_by_seed() -> None:
    yes, no = renorm.CLAIMS[1]
    assert renorm._count(np.array([True, True, True]), yes, no) == f"{yes} for each of the 3 seeds"
    assert renorm._count(np.array([False, False]), yes, no) == f"{yes} for none of the 2 seeds"
    assert renorm._count(np.array([True, False, True]), yes, no).endswith(
        "2 of the 3 seeds only: mixed"
    )
    assert renorm._count(np.array([False]), yes, no) == f"{no} for this seed"
