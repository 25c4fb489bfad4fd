"""The training lab's machinery against torch: every norm layer equals normviz.normalize
for its contract, and the batched (wide) trainer equals training each torch.nn model
alone (torch.optim.SGD / Adam, torch.optim.swa_utils.update_bn)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from normviz import normalize
from normviz.training.data import batches, digits, shifted
from normviz.training.models import GhostBatchNorm, Net, build, layer_contract, pooled
from normviz.training.probes import landscape, precise_accuracy
from normviz.training.train import Grid, build_wide, inputs, train, train_loop
from normviz.training.variants import train_at_batch_sizes
from normviz.training.wide import Variant

MLP = Net("mlp", width=16, depth=2, groups=4)
CNN = Net("cnn", width=4, depth=2, groups=2)


def test_digits_split_is_fixed_and_stratified() -> None:
    d = digits()
    assert d.x_train.shape == (1438, 1, 8, 8) and d.x_val.shape == (359, 1, 8, 8)
    assert float(d.x_train.min()) >= 0.0 and float(d.x_train.max()) <= 1.0
    assert set(d.y_val.bincount().tolist()) <= {35, 36, 37}
    b = batches(3, d.n_train, 32, 3 * d.n_train)
    assert b.shape == (134, 32) and torch.equal(b, batches(3, d.n_train, 32, 3 * d.n_train))
    assert not torch.equal(b, batches(4, d.n_train, 32, 3 * d.n_train))


@pytest.mark.parametrize("net", [MLP, CNN], ids=["mlp", "cnn"])
def test_every_norm_layer_equals_normviz_for_its_contract(net: Net) -> None:
    """The torch.nn layer each model uses, in training mode, is normviz.normalize with the
    contract the page names (MLP activations as BTC with T = 1)."""
    for norm in net.norms():
        if norm == "none":
            continue
        model = build(net, norm, seed=0)
        mod = model[1]
        for p in mod.parameters():  # non-trivial γ and β
            nn.init.uniform_(p, 0.5, 1.5)
        x = inputs(net, digits().x_train[:6])
        h = model[0](x)  # the activation the norm sees
        con = layer_contract(norm, net, batch=6)
        mod.train()
        got = mod(h)
        hv = h.unsqueeze(1) if net.kind == "mlp" else h
        w = getattr(mod, "weight", None)
        b = getattr(mod, "bias", None)
        if norm in ("layer", "rms"):  # torch's (C, H, W) γ: apply it after normviz's (C,) none
            want = normalize(hv, norm, net.layout, groups=None).output
            want = want.squeeze(1) if net.kind == "mlp" else want
            want = want * w + (0 if b is None else b)
        else:
            g = net.groups if norm == "group" else None
            want = normalize(hv, norm, net.layout, groups=g, weight=w, bias=b).output
            want = want.squeeze(1) if net.kind == "mlp" else want
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
        assert con.axes  # the contract resolves for the layer's real shape
        assert pooled(norm, net) != "nothing"


def test_ghost_batchnorm_is_batchnorm_on_each_chunk() -> None:
    bn = nn.BatchNorm1d(5)
    ghost = GhostBatchNorm(bn, 4)
    x = torch.randn(12, 5)
    y = ghost(x)
    for i in range(3):
        chunk = x[4 * i : 4 * i + 4]
        torch.testing.assert_close(
            y[4 * i : 4 * i + 4], normalize(chunk.unsqueeze(1), "batch", "BTC").output.squeeze(1)
        )
    assert int(bn.num_batches_tracked) == 3


def _grid(net: Net, optimizer: str, momentum: float | None = 0.1, steps: int = 12) -> Grid:
    lr = 0.05 if optimizer == "sgd" else 0.003
    variants = [Variant(n, lr * (1 + s), s) for n in net.norms() for s in (0, 1)]
    variants.append(Variant("batch", lr, 2, ghost=4))
    variants.reverse()  # out of norm order: the trainer sorts and restores the order
    return Grid(
        net, tuple(variants), batch=16, samples=16 * steps, momentum=momentum, optimizer=optimizer
    )


@pytest.mark.parametrize(
    ("net", "optimizer", "momentum"),
    [
        (MLP, "sgd", 0.1),
        (MLP, "sgd", None),
        (CNN, "sgd", 0.1),
        (MLP, "adam", 0.1),
        (CNN, "adam", None),
    ],
    ids=["mlp-sgd", "mlp-sgd-cumulative", "cnn-sgd", "mlp-adam", "cnn-adam-cumulative"],
)
def test_batched_training_equals_one_model_at_a_time(net: Net, optimizer: str, momentum) -> None:
    grid = _grid(net, optimizer, momentum, steps=12 if optimizer == "sgd" else 4)
    out, wide, pos = train(grid)
    ref, models = train_loop(grid)
    # Adam divides by √v: the bias before a BatchNorm has a gradient of 0 up to rounding,
    # and Adam turns that rounding into steps of ±lr, differently in any two summation
    # orders. The norm cancels those biases in training; in evaluation only their lag
    # in the running mean reaches the loss. Every other run matches as tightly as SGD.
    bn = np.array([v.norm == "batch" for v in grid.variants])
    tol = np.where(bn & (optimizer == "adam"), 1e-2, 1e-4)
    for key in ("val_loss", "train_loss"):
        a, b = getattr(out, key), getattr(ref, key)
        assert (np.abs(a - b) <= tol * np.abs(b) + 1e-5).all(), (key, a, b)
    assert (np.abs(out.val_acc - ref.val_acc) <= np.where(tol > 1e-4, 0.02, 0)).all()
    tol = 1e-4 if optimizer == "sgd" else 1e-2
    assert not out.diverged.any() and not ref.diverged.any()
    for k, i in enumerate(pos):  # weights and BatchNorm running statistics, model by model
        torch.testing.assert_close(wide.w[0][k], models[i][0].weight, rtol=tol, atol=1e-5)
        torch.testing.assert_close(wide.head_w[k], models[i][-1].weight, rtol=tol, atol=1e-5)
    for s in wide.slices:
        if s.norm != "batch" or optimizer == "adam":
            continue
        for k in range(s.start, s.stop):
            bn = models[pos[k]][1]
            bn = getattr(bn, "bn", bn)
            c = bn.num_features
            j = k - s.start
            torch.testing.assert_close(
                s.mean[0][j * c : (j + 1) * c], bn.running_mean, rtol=1e-4, atol=1e-5
            )
            torch.testing.assert_close(
                s.var[0][j * c : (j + 1) * c], bn.running_var, rtol=1e-4, atol=1e-5
            )


def test_a_diverging_run_stops_alone() -> None:
    variants = (Variant("none", 0.05, 0), Variant("none", 1e6, 0), Variant("batch", 0.05, 0))
    grid = Grid(MLP, variants, batch=16, samples=16 * 10)
    out, _, _ = train(grid)
    ref, _ = train_loop(grid)
    assert out.diverged.tolist() == [False, True, False] == ref.diverged.tolist()
    np.testing.assert_allclose(out.val_loss[[0, 2]], ref.val_loss[[0, 2]], rtol=1e-4)


def test_precise_statistics_equal_update_bn() -> None:
    grid = Grid(
        MLP, (Variant("batch", 0.05, 0), Variant("batch", 0.1, 1)), batch=16, samples=16 * 8
    )
    _, wide, pos = train(grid)
    _, models = train_loop(grid)
    data = digits()
    x = shifted(data.x_val, "contrast", 0.5)
    got = precise_accuracy(wide, x, x, data.y_val, 16)
    for k, i in enumerate(pos):
        m = models[i]
        loader = [inputs(MLP, x[a : a + 16]) for a in range(0, (len(x) // 16) * 16, 16)]
        torch.optim.swa_utils.update_bn(loader, m)
        m.eval()
        with torch.no_grad():
            acc = float((m(inputs(MLP, x)).argmax(-1) == data.y_val).float().mean())
        assert got[k] == pytest.approx(acc, abs=1e-6)


def test_landscape_steps_along_each_models_gradient() -> None:
    grid = Grid(MLP, (Variant("none", 0.1, 0), Variant("batch", 0.1, 0)), batch=16, samples=16 * 4)
    wide, _ = build_wide(grid)
    data = digits()
    x = inputs(MLP, data.x_train[:16]).unsqueeze(1).expand(-1, 2, -1)
    y = data.y_train[:16].unsqueeze(1).expand(-1, 2)
    before = [p.detach().clone() for p, _, _ in wide.parameters()]
    losses, changes = landscape(wide, x, y, torch.tensor([[0.0, 0.0], [0.1, 0.1]]))
    assert losses.shape == (3, 2) and changes.shape == (2, 2)
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-6)  # η = 0: no move
    np.testing.assert_allclose(changes[0], 0.0, atol=1e-6)
    for (p, _, _), b in zip(wide.parameters(), before, strict=True):
        assert torch.equal(p, b)  # the weights are restored
    model = build(MLP, "none", 0)  # the loss after one plain gradient step, in torch
    loss = nn.functional.cross_entropy(model(x[:, 0]), y[:, 0])
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p -= 0.1 * p.grad
        after = float(nn.functional.cross_entropy(model(x[:, 0]), y[:, 0]))
    assert losses[2, 0] == pytest.approx(after, rel=1e-5)


def test_train_at_batch_sizes_shapes_and_equal_samples() -> None:
    runs = train_at_batch_sizes(MLP, ("batch", "layer"), (4, 16), (0, 1), samples=64, lr=0.01)
    assert runs.eval_acc.shape == runs.train_acc.shape == (2, 2, 2)
    # LayerNorm has no batch statistics: training mode scores the same, up to the last
    # partial validation batch that training mode drops
    np.testing.assert_allclose(runs.eval_acc[1], runs.train_acc[1], atol=0.02)
