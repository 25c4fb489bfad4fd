"""The BatchNorm lab's topic sections (issue 13): batch noise, evaluation mode, where BN
sits, deep networks; and the corrected sentences of the lab (train ≠ eval, SyncBN)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from normviz import METHODS
from normviz.batchnorm import evalmode, gradients, lab, noise, stream, sync, where
from normviz.methods import STANDARD_METHODS

SMALL = {
    "BTC": lab.LabSetup(layout="BTC", sample_shape=(5, 6), batch_size=4, steps=30),
    "NCHW": lab.LabSetup(layout="NCHW", sample_shape=(3, 2, 3), batch_size=3, steps=30),
}


def _cf(x: torch.Tensor, layout: str) -> torch.Tensor:
    return x.transpose(1, 2) if layout == "BTC" else x


# ---- batch noise: the same sample, different batch-mates -----------------------------


@pytest.mark.parametrize("layout", list(SMALL))
def test_batch_noise(layout: str) -> None:
    setup = SMALL[layout]
    res = noise.batch_noise(setup)
    assert res.sizes == tuple(sorted({2, 4, 8, 16, 32, 64, setup.batch_size}))
    assert res.current_b == setup.batch_size
    assert res.values.shape == (len(res.sizes), res.draws)
    # the noise shrinks with the batch: at least halved from b = 2 to b = 64
    assert res.spread[-1] < 0.5 * res.spread[0]
    assert res.values[0].std() > 0
    # evaluation mode with the training set's statistics: torch's own BatchNorm
    ds = stream.make_dataset(setup)
    y = F.batch_norm(_cf(ds.held_out[:1], layout), ds.mean, ds.var, None, None, False, 0.0, 1e-5)
    assert res.eval_value == pytest.approx(float(y.reshape(-1)[0]), abs=1e-5)
    text = "\n".join(noise.notes(res))
    assert f"{res.eval_value:.3g}" in text and "falls from" in text


# ---- evaluation mode: the formula, determinism, eval() vs no_grad() --------------------


@pytest.mark.parametrize("layout", list(SMALL))
def test_eval_mode(layout: str) -> None:
    res = evalmode.eval_demo(SMALL[layout])
    assert res.formula_diff < 1e-5
    assert np.ptp(res.eval_values) == 0 and np.ptp(res.train_values) > 1e-3
    cases = {(c.mode, c.no_grad): c for c in res.cases}
    assert len(cases) == 4
    # no_grad alone, in training mode: batch statistics, and the running statistics move
    c = cases["train", True]
    assert (c.batch_stats, c.counter_delta, c.running_moved, c.requires_grad) == (
        True,
        1,
        True,
        False,
    )
    # eval alone: running statistics, nothing moves, and autograd still records
    c = cases["eval", False]
    assert (c.batch_stats, c.counter_delta, c.running_moved, c.requires_grad) == (
        False,
        0,
        False,
        True,
    )
    assert cases["train", False].requires_grad and not cases["eval", True].requires_grad
    assert res.instance is not None
    plain, tracked = res.instance
    assert plain == 0 and tracked > 1e-3
    text = "\n".join(evalmode.notes(res))
    assert "`model.eval()` is not `torch.no_grad()`" in text and "still tracks gradients" in text
    assert "track_running_stats=True" in text and "the same every time" in text


def test_eval_mode_without_instance_norm_for_one_position() -> None:
    res = evalmode.eval_demo(lab.LabSetup(sample_shape=(1, 4), batch_size=4, steps=10))
    assert res.instance is None
    assert "one position per channel" in evalmode.notes(res)[-1]


def test_instance_norm_train_eval_against_torch() -> None:
    """What the section reports for InstanceNorm is what torch does."""
    x = torch.randn(4, 3, 7) * 2 + 1
    inst = nn.InstanceNorm1d(3)
    assert torch.equal(inst.train()(x), inst.eval()(x))
    tracked = nn.InstanceNorm1d(3, track_running_stats=True)
    tracked.train()(x)
    assert not torch.allclose(tracked.train()(x), tracked.eval()(x))


# ---- where BatchNorm sits ---------------------------------------------------------------


@pytest.mark.parametrize("layout", list(SMALL))
def test_where_bn_sits(layout: str) -> None:
    res = where.orders_demo(SMALL[layout])
    by = {o.name: o for o in res.orders}
    assert list(by) == list(where.ORDERS)
    first = by["Linear → BN → ReLU"]
    assert first.bias_effect < 1e-4 and first.bias_grad < 1e-4  # BN cancels the bias
    assert by["BN → ReLU → Linear"].bias_effect > 0.5
    assert by["Linear → ReLU → BN"].bias_effect > 0.1
    for name in ("Linear → BN → ReLU", "BN → ReLU → Linear"):  # the ReLU sees BN's output
        assert abs(by[name].relu_in_mean) < 1e-4 and by[name].relu_in_std == pytest.approx(1, 0.05)
    assert by["Linear → ReLU → BN"].out_std == pytest.approx(1, abs=0.05)
    text = "\n".join(where.notes(res))
    assert text.count("bias=False") == 1


def test_where_measure_equals_torch_written_out() -> None:
    x = where.rows_of(SMALL["BTC"])
    o = where.measure("Linear → BN → ReLU", x, seed=3)
    torch.manual_seed(3)
    lin = nn.Linear(x.shape[1], x.shape[1])
    with torch.no_grad():
        h = F.batch_norm(lin(x), None, None, training=True)
    assert o.zeroed == pytest.approx(float((h < 0).double().mean()))
    assert o.out_std == pytest.approx(float(F.relu(h).double().std(0).mean()), rel=1e-5)


# ---- deep networks: gradients at initialization ----------------------------------------


def test_deep_gradients_against_backward() -> None:
    setup = SMALL["BTC"]
    res = gradients.deep_gradients(setup, 6, "he")
    ds = stream.make_dataset(setup)
    x = ds.train[: gradients.BATCH].reshape(gradients.BATCH, -1)
    y = torch.randn(gradients.BATCH, gradients.OUT, generator=torch.Generator().manual_seed(0))
    for i, norm in enumerate((False, True)):
        m = gradients.build(6, x.shape[1], norm, "he", torch.Generator().manual_seed(0))
        F.mse_loss(m(x), y).backward()
        want = [float(layer.weight.grad.norm()) for layer in m if isinstance(layer, nn.Linear)]
        np.testing.assert_allclose(res.grad_norm[i], want[:-1], rtol=1e-5)
        assert sum(isinstance(layer, nn.BatchNorm1d) for layer in m) == (6 if norm else 0)


def test_deep_gradients_what_the_section_says() -> None:
    """Depth 20, torch's default init: plain gradients vanish toward the input (first/last
    below 1e-3), BatchNorm's grow (above 10×): BN keeps activations in range, no guarantee."""
    res = gradients.deep_gradients(lab.LabSetup(), 20, "torch")
    assert res.ratio(0) < 1e-3 and res.ratio(1) > 10
    assert res.act_std[0, -1] < 0.1 < 0.4 < res.act_std[1, -1]
    text = "\n".join(gradients.notes(res))
    assert "plain: the weight gradient shrinks" in text
    assert "with BatchNorm: the weight gradient grows" in text and "Yang et al. 2019" in text
    shallow = gradients.deep_gradients(lab.LabSetup(), 2, "he")
    assert "within a factor 10" in gradients.notes(shallow)[1]
    assert "Yang et al." not in "\n".join(gradients.notes(shallow))


def test_deep_gradients_log_axes_are_labelled_at_decades() -> None:
    """Depth 20: the gradient norms span over three decades; each panel's log axis is
    labelled at whole decades (a number dtick), five labels at most, never plotly's bare
    2 3 4 ... 9 between them."""
    res = gradients.deep_gradients(lab.LabSetup(), 20, "torch")
    fig = gradients.figure(res)
    for axis, data in ((fig.layout.yaxis, res.act_std), (fig.layout.yaxis2, res.grad_norm)):
        span = np.log10(data[data > 0].max() / data[data > 0].min())
        assert axis.type == "log" and isinstance(axis.dtick, int), axis
        assert span / axis.dtick <= 5
    assert np.log10(res.grad_norm.max() / res.grad_norm.min()) > 3  # the case that matters


# ---- corrected sentences ------------------------------------------------------------------


def test_train_eval_intro_is_exact() -> None:
    differ = [k for k in STANDARD_METHODS if METHODS[k].train_eval_differ]
    assert differ == ["batch"]
    assert "only BatchNorm does this by default" in lab.INTRO
    assert (
        "InstanceNorm keeps the same behaviour in both modes only with torch's default "
        + ("track_running_stats=False")
        in lab.INTRO
    )
    assert "the one common normalization" not in lab.INTRO


def test_sync_says_what_torch_does_and_what_is_tested() -> None:
    assert "all-gathers each device's (mean, 1/√(var + ε), count)" in sync.INTRO
    assert "equivalent formulations" in sync.INTRO
    assert "gloo" in sync.INTRO and "`nn.SyncBatchNorm` itself is not run" in sync.INTRO


def test_keras_means_keras_3() -> None:
    from normviz.batchnorm import running
    from normviz.running import CONVENTIONS

    assert lab.CONVENTION_LABELS["keras"].startswith("Keras 3")
    assert CONVENTIONS["keras"].startswith("Keras 3:")
    assert "Keras 3 writes the same rule" in running.INTRO
