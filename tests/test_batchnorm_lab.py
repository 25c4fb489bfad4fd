"""BatchNorm lab sections: every statistic and output against nn.BatchNorm fed the same batches."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
import torch
from signals import assert_within_budget
from torch import nn
from torch.nn import functional as F

from normviz import LAYOUTS, NormConfigError, RunningStats
from normviz.batchnorm import (
    accumulation,
    batch_size,
    bessel,
    checkpoint,
    freeze,
    lab,
    order,
    running,
    shift,
    stream,
    sync,
)
from normviz.data import generate
from normviz.errors import Refusal

SMALL = {
    "BTC": lab.LabSetup(layout="BTC", sample_shape=(5, 6), batch_size=4, steps=30),
    "NCHW": lab.LabSetup(layout="NCHW", sample_shape=(3, 2, 3), batch_size=3, steps=30),
}
CONVENTIONS = [
    ("pytorch", 0.1),
    ("pytorch", 0.3),
    ("keras", 0.9),
    ("keras", 0.99),
    ("cumulative", 0.1),
]


def _torch_bn(setup: lab.LabSetup, momentum: float | None) -> nn.Module:
    """The torch module a user would write for this layout."""
    cls = nn.BatchNorm1d if setup.layout == "BTC" else nn.BatchNorm2d
    return cls(setup.C, eps=setup.eps, momentum=momentum)


def _cf(x: torch.Tensor, layout: str) -> torch.Tensor:
    """Channels first, as torch's BatchNorm wants them (written out here, not via the lab)."""
    return x.transpose(1, 2) if layout == "BTC" else x


def _channel_dims(layout: str) -> tuple[int, ...]:
    """Dims of a channel-first tensor that a channel's statistics pool over."""
    return (0, 2) if layout == "BTC" else (0, 2, 3)


def _batches(setup: lab.LabSetup) -> list[torch.Tensor]:
    ds = stream.make_dataset(setup)
    idx = stream.batch_indices(lab.TRAIN_SAMPLES, setup.batch_size, setup.steps, setup.seed)
    return [ds.train[i] for i in idx]


# ---- settings and helpers --------------------------------------------------------------


def test_conventions_and_memory() -> None:
    assert lab.convert_momentum(0.1, "pytorch", "keras") == pytest.approx(0.9)
    assert lab.convert_momentum(0.99, "keras", "pytorch") == pytest.approx(0.01)
    assert lab.convert_momentum(0.1, "pytorch", "cumulative") == 0.1
    assert lab.memory_steps(0.1, "pytorch") == pytest.approx(10)
    assert lab.memory_steps(0.99, "keras") == pytest.approx(100)
    assert lab.memory_steps(0.5, "cumulative") is None
    assert lab.memory_steps(0.0, "pytorch") == float("inf")
    assert lab.twin_convention("pytorch") == "keras"
    assert lab.twin_convention("cumulative") is None
    assert stream.torch_momentum(0.9, "keras") == pytest.approx(0.1)
    assert stream.torch_momentum(0.9, "cumulative") is None
    rs = lab.new_running(3, 0.5, "cumulative")
    assert rs.momentum is None and rs.convention == "pytorch"


def test_check_explains_what_to_change(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(Refusal, match="more than 1 value per channel"):  # torch's: a lesson
        lab.check(lab.LabSetup(sample_shape=(1, 4), batch_size=1))
    with pytest.raises(NormConfigError, match="unknown convention"):
        lab.check(lab.LabSetup(convention="tf"))
    with pytest.raises(NormConfigError, match="momentum must be between 0 and 1"):
        lab.check(lab.LabSetup(momentum=1.5))
    monkeypatch.setenv("NORMVIZ_MAX_ELEMENTS", "10000")
    with pytest.raises(NormConfigError, match=r"over the app's cap of 10,000: make T or C smaller"):
        lab.check(lab.LabSetup())
    monkeypatch.delenv("NORMVIZ_MAX_ELEMENTS")
    with pytest.raises(NormConfigError, match="lower the steps or the batch size"):
        lab.check(lab.LabSetup(sample_shape=(50, 16), batch_size=256, steps=2000))
    lab.check(lab.LabSetup(sample_shape=(2, 4), batch_size=1))  # 1·2 values: fine


def test_batch_indices_are_shuffled_epochs() -> None:
    idx = stream.batch_indices(10, 3, 7, seed=1)
    assert idx.shape == (7, 3)
    for epoch in (idx[:3], idx[3:6]):  # 3 full batches per epoch, no repeats inside one
        assert len(set(epoch.reshape(-1).tolist())) == 9
    assert torch.equal(idx, stream.batch_indices(10, 3, 7, seed=1))
    with pytest.raises(NormConfigError, match="more than the 10 samples"):
        stream.batch_indices(10, 11, 1, 0)


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_dataset_truth_is_the_whole_training_set(layout: str) -> None:
    setup = SMALL[layout]
    ds = stream.make_dataset(setup)
    x = _cf(ds.train, layout).double()
    assert torch.allclose(ds.mean.double(), x.mean(_channel_dims(layout)), atol=1e-5)
    assert torch.allclose(
        ds.var.double(), x.var(_channel_dims(layout), correction=0), rtol=1e-4, atol=1e-6
    )


# ---- many batches at once equal one nn.BatchNorm call per batch --------------------------


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_normalize_batches_equals_torch_per_batch(layout: str) -> None:
    setup = SMALL[layout]
    batches = torch.stack(_batches(setup)[:7])
    run = stream.normalize_batches(batches, layout, setup.eps)
    assert run.n == setup.n
    for s in range(len(batches)):
        bn = _torch_bn(setup, 0.1).train()
        y = bn(_cf(batches[s], layout))
        torch.testing.assert_close(_cf(run.output[s], layout), y, atol=2e-5, rtol=1e-5)
        var, mean = torch.var_mean(_cf(batches[s], layout), _channel_dims(layout), correction=0)
        torch.testing.assert_close(run.mean[s], mean, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(run.var[s], var, atol=1e-5, rtol=1e-4)


# ---- 1. running statistics ------------------------------------------------------------------


def _keras_reference(batches: list[torch.Tensor], layout: str, m: float) -> tuple:
    """Keras 3's update written out: new = m·old + (1 − m)·batch, biased batch variance."""
    C = batches[0].shape[LAYOUTS[layout].channel_axis]
    mean, var = torch.zeros(C), torch.ones(C)
    means, vars_ = [], []
    for x in batches:
        v, mu = torch.var_mean(_cf(x, layout), _channel_dims(layout), correction=0)
        mean = m * mean + (1 - m) * mu
        var = m * var + (1 - m) * v
        means.append(mean)
        vars_.append(var)
    return torch.stack(means), torch.stack(vars_)


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize(("convention", "momentum"), CONVENTIONS)
def test_running_trace_equals_torch(layout: str, convention: str, momentum: float) -> None:
    setup = SMALL[layout].with_(convention=convention, momentum=momentum)
    tr = running.running_trace(setup)
    batches = _batches(setup)
    # the running mean of every convention is nn.BatchNorm's at the equivalent momentum
    bn = _torch_bn(setup, stream.torch_momentum(momentum, convention)).train()
    torch_mean, torch_var = [], []
    for x in batches:
        bn(_cf(x, layout))
        torch_mean.append(bn.running_mean.clone())
        torch_var.append(bn.running_var.clone())
    np.testing.assert_allclose(tr.running_mean, torch.stack(torch_mean).numpy(), atol=2e-5)
    if convention == "keras":
        k_mean, k_var = _keras_reference(batches, layout, momentum)
        np.testing.assert_allclose(tr.running_mean, k_mean.numpy(), atol=2e-5)
        np.testing.assert_allclose(tr.running_var, k_var.numpy(), rtol=1e-4, atol=2e-5)
        # its PyTorch twin is nn.BatchNorm itself, and both trace the same mean
        assert tr.twin == "pytorch"
        np.testing.assert_allclose(
            tr.twin_var, torch.stack(torch_var).numpy(), rtol=1e-4, atol=2e-5
        )
        np.testing.assert_allclose(tr.twin_mean, tr.running_mean, atol=1e-5)
    else:
        np.testing.assert_allclose(
            tr.running_var, torch.stack(torch_var).numpy(), rtol=1e-4, atol=2e-5
        )
        assert tr.final.num_batches_tracked == int(bn.num_batches_tracked)
    if convention == "pytorch":
        k_mean, k_var = _keras_reference(batches, layout, 1 - momentum)
        np.testing.assert_allclose(tr.twin_mean, k_mean.numpy(), atol=2e-5)
        np.testing.assert_allclose(tr.twin_var, k_var.numpy(), rtol=1e-4, atol=2e-5)
    if convention == "cumulative":
        assert tr.twin is None and tr.twin_var is None
        # the cumulative average is the plain mean of the batch means
        np.testing.assert_allclose(tr.running_mean[-1], tr.batch_mean.mean(0), atol=2e-5)
    # batch statistics: what normalized each batch (biased variance)
    for s in (0, len(batches) - 1):
        v, mu = torch.var_mean(_cf(batches[s], layout), _channel_dims(layout), correction=0)
        np.testing.assert_allclose(tr.batch_mean[s], mu.numpy(), atol=1e-5)
        np.testing.assert_allclose(tr.batch_var[s], v.numpy(), rtol=1e-4, atol=1e-6)
    assert tr.n == setup.n
    assert tr.bessel == pytest.approx(setup.n / (setup.n - 1))


def test_running_converges_to_the_training_set() -> None:
    setup = lab.LabSetup(batch_size=64, steps=300, momentum=0.05)
    tr = running.running_trace(setup)
    sd = np.sqrt(tr.true_var)
    assert np.all(np.abs(tr.running_mean[-1] - tr.true_mean) < 0.2 * sd)
    assert np.all(np.abs(tr.running_var[-1] / tr.true_var - 1) < 0.25)


# ---- 2. biased vs unbiased ---------------------------------------------------------------------


def test_bessel_matches_torch_variances() -> None:
    ns = (2, 3, 8)
    res = bessel.bessel(seed=3, ns=ns)
    for i, n in enumerate(ns):
        x = generate("normal", "BTC", (n, 1, bessel.BESSEL_REPEATS), 3 + n)[:, 0, :]  # (n, R)
        assert res.biased[i] == pytest.approx(
            x.double().var(0, correction=0).mean().item(), rel=1e-5
        )
        assert res.unbiased[i] == pytest.approx(
            x.double().var(0, correction=1).mean().item(), rel=1e-5
        )
        assert res.biased[i] / res.unbiased[i] == pytest.approx((n - 1) / n, rel=1e-5)
    np.testing.assert_allclose(res.factor, np.asarray(ns) / (np.asarray(ns) - 1))
    # averaged over 8192 batches the bias shows: biased ≈ (n − 1)/n of the true σ² = 1
    assert res.biased[0] < 0.6 and res.unbiased[0] > 0.9


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_one_value_refused_in_training_fine_in_eval(layout: str) -> None:
    setup = SMALL[layout]
    tr = running.running_trace(setup)
    one = bessel.one_value(setup, tr.final)
    assert "more than 1 value per channel" in one.refusal
    shape = (1, 1, setup.C) if layout == "BTC" else (1, setup.C, 1, 1)
    x = torch.from_numpy(one.x).float().reshape(shape)
    bn = _torch_bn(setup, 0.1)
    with pytest.raises(ValueError, match="Expected more than 1 value per channel"):
        bn.train()(_cf(x, layout))
    bn.running_mean.copy_(tr.final.mean)
    bn.running_var.copy_(tr.final.var)
    y = bn.eval()(_cf(x, layout))
    np.testing.assert_allclose(one.eval_output, y.reshape(-1).detach().numpy(), atol=1e-5)


# ---- 3. train/eval gap vs batch size --------------------------------------------------------


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_gap_sweep_equals_torch(layout: str) -> None:
    setup = SMALL[layout].with_(steps=12)
    sizes = (2, 8)
    sweep = batch_size.gap_sweep(setup, sizes)
    ds = stream.make_dataset(setup)
    for i, b in enumerate(sizes):
        bn = _torch_bn(setup, 0.1).train()
        for rows in stream.batch_indices(lab.TRAIN_SAMPLES, b, setup.steps, setup.seed):
            bn(_cf(ds.train[rows], layout))
        held = ds.held_out[: (lab.HELD_OUT // b) * b]
        y_train = torch.cat(
            [
                F.batch_norm(_cf(held[j : j + b], layout), None, None, training=True, eps=setup.eps)
                for j in range(0, len(held), b)
            ]
        )
        with torch.no_grad():
            y_eval = bn.eval()(_cf(held, layout))
        assert sweep.gap[i] == pytest.approx((y_train - y_eval).abs().mean().item(), rel=1e-4)
        v, mu = torch.var_mean(y_eval.double(), _channel_dims(layout), correction=0)
        assert sweep.eval_var[i] == pytest.approx(v.mean().item(), rel=1e-4)
        assert sweep.eval_mean[i] == pytest.approx(mu.abs().mean().item(), rel=1e-3, abs=1e-6)
    assert sweep.gap[0] > sweep.gap[1]  # smaller batches: larger gap (same data, same steps)


def test_gap_sweep_marks_refused_sizes() -> None:
    setup = lab.LabSetup(sample_shape=(1, 4), batch_size=2, steps=5)
    sweep = batch_size.gap_sweep(setup, (1, 2, 4))
    assert sweep.refused == (1,)
    assert np.isnan(sweep.gap[0]) and np.isfinite(sweep.gap[1:]).all()


# ---- 4. distribution shift ------------------------------------------------------------------


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_shift_sweep_equals_torch(layout: str) -> None:
    setup = SMALL[layout]
    tr = running.running_trace(setup)
    res = shift.shift_sweep(setup, tr.final, shift=1.5, scale=2.0, groups=3)
    ds = stream.make_dataset(setup)
    C = setup.C
    view = (1, 1, C) if layout == "BTC" else (1, C, 1, 1)
    mu, sd = ds.mean.reshape(view), ds.var.sqrt().reshape(view)
    x = mu + 2.0 * (ds.held_out - mu) + 1.5 * sd
    bn = _torch_bn(setup, 0.1)
    bn.running_mean.copy_(tr.final.mean)
    bn.running_var.copy_(tr.final.var)
    ln = nn.LayerNorm(C if layout == "BTC" else tuple(setup.sample_shape), eps=setup.eps)
    gn = nn.GroupNorm(res.groups, C, eps=setup.eps)
    with torch.no_grad():
        outs = {"batch": bn.eval()(_cf(x, layout)), "layer": ln(x), "group": gn(_cf(x, layout))}
    assert res.groups == 3 and res.methods == ("batch", "layer", "group")
    for i, m in enumerate(res.methods):
        y = outs[m].double()
        assert res.current_mean[i] == pytest.approx(y.mean().item(), abs=1e-5)
        assert res.current_var[i] == pytest.approx(y.var(correction=0).item(), rel=1e-4)
    # BatchNorm drifts to ≈ (shift, scale²); per-sample methods stay at (0, 1)
    assert res.current_mean[0] > 1.0 and res.current_var[0] > 3.0
    np.testing.assert_allclose(res.current_mean[1:], 0.0, atol=1e-5)
    np.testing.assert_allclose(res.current_var[1:], 1.0, atol=1e-3)


def test_a_group_count_that_does_not_divide_c_is_refused() -> None:
    """The sidebar's G is used as it is: a G that does not divide C is refused, not replaced."""
    setup = SMALL["BTC"].with_(groups=4)  # C = 6
    with pytest.raises(NormConfigError, match=r"C=6, groups=4. Try groups in 1, 2, 3, 6"):
        shift.shift_sweep(setup, running.running_trace(setup).final, 0.5, 1.0)
    with pytest.raises(NormConfigError, match="Try groups in 1, 2, 3, 6"):
        shift.SECTION.run(setup, shift.SECTION.defaults(), lambda f, t: None)
    res = shift.shift_sweep(setup.with_(groups=3), running.running_trace(setup).final, 0.5, 1.0)
    assert res.groups == 3


# ---- 5. non-i.i.d. batches ---------------------------------------------------------------


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_order_demo_equals_torch(layout: str) -> None:
    setup = SMALL[layout].with_(steps=40)
    res = order.order_demo(setup)
    ds = order.clustered_dataset(setup)
    for i, idx in enumerate(order.order_indices(setup)):
        bn = _torch_bn(setup, 0.1).train()
        for rows in idx:
            bn(_cf(ds.train[rows], layout))
        np.testing.assert_allclose(res.running_mean[i, -1], bn.running_mean.numpy(), atol=2e-5)
        np.testing.assert_allclose(res.final_var[i], bn.running_var.numpy(), rtol=1e-4, atol=2e-5)
        last = [ds.train[rows] for rows in idx[-order.CLUSTERS :]]
        with torch.no_grad():
            gaps = [
                (
                    F.batch_norm(_cf(x, layout), None, None, training=True, eps=setup.eps)
                    - bn.eval()(_cf(x, layout))
                )
                .abs()
                .mean()
                for x in last
            ]
        assert res.gap[i] == pytest.approx(torch.stack(gaps).mean().item(), rel=1e-4)
    one_cluster = order.order_indices(setup)[0] % order.CLUSTERS
    assert (one_cluster == one_cluster[:, :1]).all()  # every batch from a single cluster
    # single-cluster batches: noisier batch means, too small a running variance, larger gap
    assert res.batch_noise[0] > res.batch_noise[1]
    assert res.var_ratio[0] < res.var_ratio[1]
    assert res.gap[0] > res.gap[1]


# ---- 6. gradient accumulation --------------------------------------------------------------


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_accumulation_equals_torch(layout: str) -> None:
    setup = SMALL[layout].with_(steps=10)
    k = 3
    res = accumulation.accumulation(setup, k)
    ds = stream.make_dataset(setup)
    big_idx = stream.batch_indices(lab.TRAIN_SAMPLES, k * setup.batch_size, setup.steps, setup.seed)
    micro_bn, big_bn = _torch_bn(setup, 0.1).train(), _torch_bn(setup, 0.1).train()
    for rows in big_idx:
        x = ds.train[rows]
        big_bn(_cf(x, layout))
        for part in x.split(setup.batch_size):
            micro_out = micro_bn(_cf(part, layout))
    assert res.batches_tracked == (
        int(micro_bn.num_batches_tracked),
        int(big_bn.num_batches_tracked),
    )
    assert res.batches_tracked == (k * setup.steps, setup.steps)
    for i, bn in enumerate((micro_bn, big_bn)):
        np.testing.assert_allclose(res.final_mean[i], bn.running_mean.numpy(), atol=2e-5)
        np.testing.assert_allclose(res.final_var[i], bn.running_var.numpy(), rtol=1e-4, atol=2e-5)
    last = ds.train[big_idx[-1]]
    y_micro = torch.cat(
        [
            F.batch_norm(_cf(p, layout), None, None, training=True, eps=setup.eps)
            for p in last.split(setup.batch_size)
        ]
    )
    y_big = F.batch_norm(_cf(last, layout), None, None, training=True, eps=setup.eps)
    assert res.gap == pytest.approx((y_micro - y_big).abs().mean().item(), rel=1e-4)
    assert micro_out.shape[0] == setup.batch_size  # BatchNorm only ever saw b samples
    # deviations in σ: the micro-batch means scatter more than the k·b mean
    sd = ds.var.sqrt()
    _, mu = torch.var_mean(_cf(last[: setup.batch_size], layout), _channel_dims(layout))
    np.testing.assert_allclose(res.micro_dev[0], ((mu - ds.mean) / sd).numpy(), atol=1e-4)


# ---- 7. synchronized BatchNorm -----------------------------------------------------------


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("K", [1, 2, 4])
def test_sync_forward_equals_one_big_batch(layout: str, K: int) -> None:
    setup = SMALL[layout]
    xs = [b for b in _batches(setup)[:K]]
    rs = RunningStats(setup.C, 0.1)
    step = sync.sync_forward(xs, layout, setup.eps, rs)
    bn = _torch_bn(setup, 0.1).train()
    y = bn(_cf(torch.cat(xs), layout))
    torch.testing.assert_close(
        torch.cat([_cf(o, layout) for o in step.outputs]), y, atol=3e-5, rtol=1e-5
    )
    torch.testing.assert_close(rs.mean, bn.running_mean, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(rs.var, bn.running_var, atol=1e-6, rtol=1e-5)
    assert step.count == K * setup.n
    assert step.sums.shape == (3, K, setup.C)


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_sync_demo_equals_torch(layout: str) -> None:
    setup = SMALL[layout].with_(steps=8)
    K = 3
    res = sync.sync_demo(setup, K)
    ds = stream.make_dataset(setup)
    idx = stream.batch_indices(lab.TRAIN_SAMPLES, K * setup.batch_size, setup.steps, setup.seed)
    local_bn, sync_bn = _torch_bn(setup, 0.1).train(), _torch_bn(setup, 0.1).train()
    for rows in idx:
        x = ds.train[rows]
        local_bn(_cf(x[: setup.batch_size], layout))  # device 0 alone
        sync_bn(_cf(x, layout))  # synchronized = one batch of K·b
    for i, bn in enumerate((local_bn, sync_bn)):
        np.testing.assert_allclose(res.final_mean[i], bn.running_mean.numpy(), atol=2e-5)
        np.testing.assert_allclose(res.final_var[i], bn.running_var.numpy(), rtol=1e-4, atol=2e-5)
    assert res.one_batch_diff < 1e-4
    assert res.gap > 0.01
    assert res.local_dev.shape == (K, setup.C) and res.sums.shape == (K, 3, setup.C)


# ---- 8 and 9: real modules ----------------------------------------------------------------


def test_freeze_demo_matches_a_real_module_step() -> None:
    setup = SMALL["NCHW"]
    res = freeze.freeze_demo(setup)
    expected = {
        # (training, requires_grad): weight, bias, running_mean, running_var, num_batches_tracked
        (True, True): (True, True, True, True, True),
        (True, False): (False, False, True, True, True),
        (False, True): (True, True, False, False, False),
        (False, False): (False, False, False, False, False),
    }
    assert res.names == ("weight", "bias", "running_mean", "running_var", "num_batches_tracked")
    assert {(r.training, r.requires_grad): r.changed for r in res.rows} == expected
    # the same step written out with torch here gives the same γ after "train, requires_grad"
    x = stream.make_dataset(setup).train[: setup.batch_size].requires_grad_(True)
    bn = nn.BatchNorm2d(setup.C)
    opt = torch.optim.SGD(bn.parameters(), lr=res.lr)
    (bn(x) - 1.0).square().mean().backward()
    before = bn.weight.detach().clone()
    opt.step()
    assert not torch.equal(before, bn.weight.detach())


def test_freeze_eval_mode_keeps_buffers_even_for_keras_momentum() -> None:
    res = freeze.freeze_demo(SMALL["BTC"].with_(convention="keras", momentum=0.99))
    evals = [r for r in res.rows if not r.training]
    assert all(not any(r.changed[2:]) for r in evals)


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_checkpoint_demo(layout: str) -> None:
    setup = SMALL[layout].with_(steps=40)
    res = checkpoint.checkpoint_demo(setup)
    entries = {e.key: e for e in res.entries}
    assert list(entries) == ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]
    assert entries["weight"].kind == "parameter" and entries["running_var"].kind == "buffer"
    assert entries["num_batches_tracked"].values[0] == res.steps == 40
    # torch reports the two statistics as missing: the trimmed dict has no _metadata, so
    # torch fills num_batches_tracked in (its path for checkpoints older than the counter)
    assert res.missing == ("running_mean", "running_var")
    # a checkpoint without the counter: loads without _metadata, a missing key with it
    plain, meta = res.no_counter
    assert (plain.metadata, plain.loaded, plain.counter) == (False, True, 0)
    assert (meta.metadata, meta.loaded, meta.counter) == (True, False, None)
    assert 'Missing key(s) in state_dict: "num_batches_tracked"' in meta.message
    text = "\n".join(checkpoint.notes(res))
    assert "num_batches_tracked = 0" in text and meta.message in text
    # the buffers in the checkpoint are what the lab's RunningStats give for the same batches
    tr = running.running_trace(setup.with_(steps=res.steps))
    np.testing.assert_allclose(entries["running_mean"].values, tr.running_mean[-1], atol=2e-5)
    np.testing.assert_allclose(
        entries["running_var"].values, tr.running_var[-1], rtol=1e-4, atol=2e-5
    )
    # with buffers: same outputs as the trained layer; without: 0/1 statistics
    np.testing.assert_allclose(res.out_mean[0], res.out_mean[1], atol=1e-6)
    ds = stream.make_dataset(setup)
    w = torch.from_numpy(entries["weight"].values).float()
    b = torch.from_numpy(entries["bias"].values).float()
    y = F.batch_norm(
        _cf(ds.held_out, layout),
        torch.zeros(setup.C),
        torch.ones(setup.C),
        w,
        b,
        False,
        0.0,
        setup.eps,
    )
    np.testing.assert_allclose(
        res.out_mean[2], y.double().mean(_channel_dims(layout)).numpy(), atol=1e-4
    )
    # γ learned ≈ 2, β ≈ 1: the trained outputs sit near 1 with spread near 2
    assert np.all(np.abs(res.out_mean[0] - 1) < 0.5)


def test_torch_module_comes_from_the_registry() -> None:
    assert isinstance(stream.torch_batchnorm("BTC", 4), nn.BatchNorm1d)
    assert isinstance(stream.torch_batchnorm("NCHW", 4), nn.BatchNorm2d)
    x = torch.randn(2, 3, 4)
    assert torch.equal(stream.from_torch_layout(stream.to_torch_layout(x, "BTC"), "BTC"), x)
    assert stream.to_torch_layout(x, "BTC").shape == (2, 4, 3)


# ---- figures ---------------------------------------------------------------------------------


def test_figures_at_the_largest_settings() -> None:
    """Every lab figure stays under 1 MB at the largest steps, batch sweep and channel count."""
    big = lab.LabSetup(sample_shape=(1, 900), batch_size=8, steps=2000)  # C = 900, cap-sized
    tr = running.running_trace(big)
    fig = running.figure(replace(tr, channel=899))
    assert_within_budget(fig)
    names = [t.name for t in fig.data]
    assert "running statistic" in names and "training set (truth)" in names
    assert any("keras" in (n or "") for n in names)
    assert order.figure(order.order_demo(big.with_(steps=2000))).to_json()
    acc = accumulation.accumulation(big.with_(steps=20), 16)
    assert_within_budget(accumulation.figure(acc))
    syn = sync.sync_demo(big.with_(steps=20), 16)
    assert_within_budget(sync.figure(syn))
    ck = checkpoint.checkpoint_demo(big.with_(steps=5))
    assert_within_budget(checkpoint.figure(ck))


def test_figures_have_their_traces_and_titles() -> None:
    setup = SMALL["BTC"]
    tr = running.running_trace(setup)
    fig = running.figure(tr, presenter=True)
    assert fig.layout.font.size > 16  # presenter mode enlarges the text
    assert len(fig.data) == 8  # 2 panels × (batch, running, twin, truth)
    cum_trace = running.running_trace(setup.with_(convention="cumulative"))
    cum = running.figure(cum_trace)
    assert len(cum.data) == 6
    bes = bessel.figure(replace(bessel.bessel(ns=(2, 4)), current_n=20))
    assert [t.name for t in bes.data][1].startswith("biased")
    sweep = batch_size.gap_sweep(setup.with_(steps=5), (2, 4))
    gap = batch_size.figure(replace(sweep, current_b=4))
    assert gap.layout.xaxis.type == "log"
    sh = shift.figure(shift.shift_sweep(setup, tr.final, 0.5, 1.0))
    assert {t.legendgroup for t in sh.data} == {"batch", "layer", "group"}
    fr = freeze.figure(freeze.freeze_demo(setup))
    assert fr.data[0].text[3] == ["unchanged"] * 5
    for f in (bes, gap, sh, fr):
        assert f.layout.title.text
        assert_within_budget(f)
    payload = json.loads(fig.to_json())
    assert "x" not in payload["data"][0]  # steps are sent as x0/dx, not as an array


# ---- stepping through the running statistics; the batch size on a log scale ----------------


@pytest.mark.parametrize(("convention", "momentum"), CONVENTIONS)
def test_a_step_shows_its_batch_and_the_update_written_out(convention: str, momentum: float):
    setup = replace(SMALL["BTC"], convention=convention, momentum=momentum)
    tr = replace(running.running_trace(setup), step=7, channel=2)
    assert tr.at == 7
    fig = running.figure(tr)
    assert fig.layout.title.text == "Running statistics after batch 7 of 30"
    dots = fig.data[0]  # batch means of channel 2, up to batch 7 only
    assert len(dots.y) == 7 and dots.y[-1] == pytest.approx(tr.batch_mean[6, 2], abs=1e-5)
    ringed = next(t for t in fig.data if t.name == "batch 7: its own and the running value")
    assert list(ringed.y) == pytest.approx([tr.batch_mean[6, 2], tr.running_mean[6, 2]], abs=1e-5)
    assert list(fig.layout.xaxis.range) == [0.5, 30.5]  # stepping never rescales the axis
    table = running.table(tr)
    assert table.loc[0, "batch 7"] == tr.batch_mean[6, 2]
    assert table.loc[1, "running (after batch 7)"] == tr.running_var[6, 2]
    # the sentence fills the update rule with the numbers, and they add up
    w = 1 / 7 if convention == "cumulative" else lab.batch_weight(momentum, convention)
    prev, mean = tr.running_mean[5, 2], tr.batch_mean[6, 2]
    assert (1 - w) * prev + w * mean == pytest.approx(tr.running_mean[6, 2], abs=1e-5)
    text = running.notes(tr)[1]
    assert f"(1 − w)·{prev:.4g} + w·{mean:.4g} = {tr.running_mean[6, 2]:.4g}" in text
    assert ("× n/(n−1)" in text) == (convention != "keras")


def test_the_first_step_starts_from_the_initial_buffers_and_0_shows_all() -> None:
    tr = running.running_trace(SMALL["BTC"])
    first = replace(tr, step=1)
    assert (
        "(1 − w)·0 + w·" in running.notes(first)[1] and "(1 − w)·1 + w·" in running.notes(first)[1]
    )
    everything = replace(tr, step=0)
    assert everything.at == 30 and len(running.notes(everything)) == len(running.notes(tr))
    assert running.figure(everything).layout.title.text == "Running statistics follow the batches"
    assert replace(tr, step=999).at == 30  # past the end: the last batch


def test_batch_sizes_snap_to_the_nearest_power_of_two() -> None:
    assert lab.BATCH_SIZES == (1, 2, 4, 8, 16, 32, 64, 128, 256)
    snapped = {b: lab.snap_batch(b) for b in (1, 3, 5, 6, 9, 12, 100, 181, 182, 256, 0, 999)}
    assert snapped == {
        1: 1,
        3: 4,
        5: 4,
        6: 8,
        9: 8,
        12: 16,
        100: 128,
        181: 128,
        182: 256,
        256: 256,
        0: 1,
        999: 256,
    }
    assert all(lab.snap_batch(b) == b for b in lab.BATCH_SIZES)
    assert "batch size 9" in lab.snap_note(9, 8) and "uses 8" in lab.snap_note(9, 8)
