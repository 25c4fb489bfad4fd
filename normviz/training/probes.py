"""Measurements on a wide model in the middle of training: the loss landscape along the
gradient (Santurkar et al. 2018), precise population statistics (Wu & Johnson 2021),
and statistics re-estimated on shifted data.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from normviz.training.train import evaluate, inputs, per_model_loss
from normviz.training.wide import Wide


def _per_model(wide: Wide, tensors: Sequence[torch.Tensor], spans) -> torch.Tensor:
    """(M,) sum over every parameter of a per-model quantity (tensors: one per parameter)."""
    out = torch.zeros(wide.M)
    for t, (a, z) in zip(tensors, spans, strict=True):
        out[a:z] += t.reshape(z - a, -1).sum(1)
    return out


def landscape(wide: Wide, x: torch.Tensor, y: torch.Tensor, etas: torch.Tensor):
    """Loss and gradient along each model's own gradient, at step sizes etas (K, M).

    Returns (losses (K+1, M), gradient changes (K, M)): the loss at the current
    weights and after each step w − η·∇L, and ‖∇L(w − η·∇L) − ∇L(w)‖. BatchNorm uses the
    batch's statistics without moving its running ones.
    """
    params = wide.parameters()
    ps = [p for p, _, _ in params]
    spans = [(a, z) for _, a, z in params]

    def loss_and_grad():
        loss = per_model_loss(wide.forward(x, training=True, update=False), y)
        grads = torch.autograd.grad(loss.sum(), ps)
        return loss.detach(), [g.detach() for g in grads]

    base = [p.detach().clone() for p in ps]
    loss0, g0 = loss_and_grad()
    losses, changes = [loss0], []
    try:
        for eta in etas:
            with torch.no_grad():
                for p, b, g, (a, z) in zip(ps, base, g0, spans, strict=True):
                    p.copy_(b - eta[a:z].view((-1,) + (1,) * (p.dim() - 1)) * g)
            loss, g = loss_and_grad()
            losses.append(loss)
            changes.append(
                _per_model(wide, [(u - v) ** 2 for u, v in zip(g, g0, strict=True)], spans).sqrt()
            )
    finally:
        with torch.no_grad():
            for p, b in zip(ps, base, strict=True):
                p.copy_(b)
    return torch.stack(losses).numpy(), torch.stack(changes).numpy()


def snapshot(wide: Wide) -> list:
    """The running statistics (to restore after a re-estimation)."""
    return [
        (
            [None if t is None else t.clone() for t in s.mean],
            [None if t is None else t.clone() for t in s.var],
            list(s.tracked),
        )
        for s in wide.slices
    ]


def restore(wide: Wide, snap: list) -> None:
    for s, (mean, var, tracked) in zip(wide.slices, snap, strict=True):
        s.mean, s.var, s.tracked = mean, var, tracked


def reestimate(wide: Wide, x: torch.Tensor, batch: int) -> None:
    """Precise statistics: reset, then the plain average over every batch of `x` (as
    torch.optim.swa_utils.update_bn: momentum None, batches of the training size)."""
    momentum, wide.momentum = wide.momentum, None
    wide.reset_stats()
    x = inputs(wide.net, x)
    with torch.no_grad():
        for a in range(0, (len(x) // batch) * batch, batch):
            wide.forward(x[a : a + batch].unsqueeze(1).expand(-1, wide.M, *x.shape[1:]), True)
    wide.momentum = momentum


def precise_accuracy(wide: Wide, x_stats, x_val, y_val, batch: int) -> np.ndarray:
    """(M,) validation accuracy with statistics re-estimated on x_stats (then restored)."""
    snap = snapshot(wide)
    try:
        reestimate(wide, x_stats, batch)
        return evaluate(wide, x_val, y_val)[0]
    finally:
        restore(wide, snap)
