"""Training a grid of runs: batched (one wide model) and, as the reference, one at a time.

SGD with momentum 0.9 or Adam (each grid says which; torch.optim's updates, with
per-model learning rates), cross-entropy on the digits, full batches drawn in a
seeded order; every run of a grid sees the same number of samples. `train` trains
the whole grid at once (`wide.Wide`); `train_loop` trains each torch.nn model alone,
with the torch.optim optimizer of the same name: the oracle the batched trainer must
match, and the baseline of the speed benchmark.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from normviz.gate import Gate
from normviz.sections import Progress, no_progress
from normviz.threads import single_threaded
from normviz.training import resmlp
from normviz.training.data import CLASSES, batches, digits
from normviz.training.models import Net, build
from normviz.training.wide import Variant, Wide

SGD_MOMENTUM = 0.9
ADAM_BETAS = (0.9, 0.999)
ADAM_EPS = 1e-8
EVAL_CHUNK = 256  # validation samples per forward pass (bounds the memory of a wide grid)


@dataclass(frozen=True)
class Grid:
    """What to train: the runs and the settings they share (plain values, hashable)."""

    net: Net
    variants: tuple[Variant, ...]
    batch: int = 32
    samples: int = 4 * 1438  # training samples each run sees (about 4 epochs)
    momentum: float | None = 0.1  # BatchNorm's running-statistics momentum (None: cumulative)
    evals: int = 0  # validation checkpoints along training (0: only the end)
    train_mode_eval: bool = False  # also score the validation set with batch statistics
    optimizer: str = "sgd"  # "sgd" (momentum 0.9) or "adam" (torch's defaults)

    @property
    def steps(self) -> int:
        return max(1, self.samples // self.batch)

    def checkpoints(self) -> list[int]:
        """Steps (0 = before training) at which the curves are measured."""
        if self.evals <= 0:
            return []
        return sorted({round(self.steps * k / (self.evals - 1)) for k in range(self.evals)})


@dataclass(frozen=True)
class Outcome:
    """A grid's results, one entry per variant in the grid's order."""

    variants: tuple[Variant, ...]
    val_acc: np.ndarray  # (M,) evaluation mode (running statistics)
    val_loss: np.ndarray
    train_acc: np.ndarray  # on the whole training set, evaluation mode
    train_loss: np.ndarray
    diverged: np.ndarray  # (M,) bool: the training loss became inf or NaN
    val_acc_batch_stats: np.ndarray | None  # training mode: statistics of each val batch
    curve_steps: tuple[int, ...]
    curve_acc: np.ndarray  # (checkpoints, M) validation accuracy along training


Hook = Callable[[Wide, int, torch.Tensor, torch.Tensor], None]


def inputs(net: Net, x: torch.Tensor) -> torch.Tensor:
    """Images (..., 1, 8, 8) as the network reads them: 64 numbers for the MLP."""
    return x if net.kind == "cnn" else x.flatten(-3)


def order(grid: Grid) -> list[int]:
    """Variant positions sorted so that equal normalizations sit side by side.

    Raises:
        NormConfigError: a variant's normalization does not fit the network (its message).
    """
    for norm in {v.norm for v in grid.variants}:
        grid.net.check(norm)
    key = {n: i for i, n in enumerate(grid.net.norms())}
    return sorted(
        range(len(grid.variants)),
        key=lambda i: (key[grid.variants[i].norm], grid.variants[i].ghost),
    )


def builder(net: Net):
    """The torch.nn reference builder of `net` and the class of its wide form."""
    return (resmlp.build, resmlp.WideRes) if net.kind == "resmlp" else (build, Wide)


def build_wide(grid: Grid) -> tuple[Wide, list[int]]:
    """The wide model of `grid` (variants sorted) and the sort order."""
    pos = order(grid)
    vs = [grid.variants[i] for i in pos]
    make, wide = builder(grid.net)
    models = [make(grid.net, v.norm, v.seed, grid.momentum, v.ghost, v.ws) for v in vs]
    return wide(grid.net, vs, models, grid.momentum), pos


def per_model_loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """(M,) mean cross-entropy of each model; logits (B, M, 10), y (B, M)."""
    B, M, _ = logits.shape
    return (
        F.cross_entropy(logits.reshape(-1, CLASSES), y.reshape(-1), reduction="none")
        .view(B, M)
        .mean(0)
    )


def evaluate(wide: Wide, x: torch.Tensor, y: torch.Tensor, batch: int = 0):
    """(accuracy, loss) per model on the set (x, y): running statistics, or (batch > 0)
    the statistics of each batch of that size, without moving the running ones."""
    x = inputs(wide.net, x)
    size = batch if batch > 0 else EVAL_CHUNK
    n = (len(x) // size) * size if batch > 0 else len(x)
    correct = torch.zeros(wide.M)
    total = torch.zeros(wide.M)
    with torch.no_grad():
        for a in range(0, n, size):
            xb = x[a : a + size].unsqueeze(1).expand(-1, wide.M, *x.shape[1:])
            logits = wide.forward(xb, training=batch > 0, update=False).nan_to_num(0.0, 0.0, 0.0)
            yb = y[a : a + size].unsqueeze(1).expand(-1, wide.M)
            correct += (logits.argmax(-1) == yb).float().sum(0)
            total += per_model_loss(logits, yb) * len(yb)
    return (correct / n).numpy(), (total / n).numpy()


# One training-lab run at a time in a process: a class opening the lab at the same
# moment queues (each told so in its progress bar) instead of sharing the cores, where
# every student would wait for the sum of all runs.
GATE = Gate("training-lab runs", slots=1, one="training-lab run")


@single_threaded
def train(grid: Grid, progress: Progress = no_progress, hook: Hook | None = None):
    """Train every run of `grid` at once; returns (Outcome, Wide, sort order).

    `hook(wide, step, x, y)` runs at each checkpoint with that step's batch (x: (B, M, ...)).
    Waits for `GATE` first.
    """
    with GATE.enter(progress):
        return _train(grid, progress, hook)


def _train(grid: Grid, progress: Progress, hook: Hook | None):
    data = digits()
    wide, pos = build_wide(grid)
    M = wide.M
    vs = wide.variants
    idx = torch.stack([batches(v.seed, data.n_train, grid.batch, grid.samples) for v in vs], -1)
    X, Y = inputs(grid.net, data.x_train), data.y_train
    opt = _Optimizer(grid.optimizer, wide.parameters(), [v.lr for v in vs])
    checks = grid.checkpoints()
    curve = []
    for t in range(grid.steps + 1):
        b = idx[min(t, grid.steps - 1)]  # (B, M); the last checkpoint reuses the last batch
        x, y = X[b], Y[b]
        if t in checks:
            if hook is not None:
                hook(wide, t, x, y)
            curve.append(evaluate(wide, data.x_val, data.y_val)[0])
        if t == grid.steps:
            break
        loss = per_model_loss(wide.forward(x, training=True), y)
        opt.step(loss)
        if t % max(1, grid.steps // 50) == 0:
            progress(t / grid.steps, f"training {M} networks at once: step {t} of {grid.steps}")
    va, vl = evaluate(wide, data.x_val, data.y_val)
    ta, tl = evaluate(wide, data.x_train, data.y_train)
    bs = evaluate(wide, data.x_val, data.y_val, grid.batch)[0] if grid.train_mode_eval else None
    back = np.argsort(pos)  # sorted position of each variant of the grid
    un = lambda a: None if a is None else np.asarray(a)[..., back]  # noqa: E731
    out = Outcome(
        grid.variants,
        un(va),
        un(vl),
        un(ta),
        un(tl),
        un((~opt.alive).numpy()),
        un(bs),
        tuple(checks),
        un(np.array(curve).reshape(len(curve), M)),
    )
    return out, wide, pos


class _Optimizer:
    """torch.optim.SGD (momentum 0.9) or torch.optim.Adam, with one learning rate per model.

    A run whose loss turns inf or NaN stops (learning rate 0) and is marked diverged;
    the others never see it (its weights sit in their own slice).
    """

    def __init__(self, kind: str, params: list[tuple[torch.Tensor, int, int]], lrs: list[float]):
        self.kind = kind
        self.params = [p for p, _, _ in params]
        self.spans = [(a, z) for _, a, z in params]
        self.lr = torch.tensor(lrs)
        self.alive = torch.ones(len(lrs), dtype=torch.bool)
        self.m = [torch.zeros_like(p) for p in self.params]
        self.v = [torch.zeros_like(p) for p in self.params] if kind == "adam" else []
        self.t = 0
        self._rates()

    def _rates(self) -> None:
        """Per-parameter views of the per-model learning rates (dead runs: 0)."""
        self.rates = self._views(torch.where(self.alive, self.lr, 0.0))

    def _views(self, per_model: torch.Tensor) -> list[torch.Tensor]:
        """(M,) values as views broadcasting against each parameter's models."""
        return [
            per_model[a:z].view((-1,) + (1,) * (p.dim() - 1))
            for p, (a, z) in zip(self.params, self.spans, strict=True)
        ]

    def step(self, loss: torch.Tensor) -> None:
        """Backpropagate the (M,) per-model losses and update every model."""
        finite = torch.isfinite(loss.detach())
        dead = not bool(self.alive.all())
        if dead or not bool(finite.all()):
            self.alive &= finite
            self._rates()
            loss = torch.where(self.alive, loss, 0.0)
            dead = True
        loss.sum().backward()
        grads = [p.grad for p in self.params]  # a diverged run's NaN stays in its own slice
        with torch.no_grad():
            self.t += 1
            if self.kind == "sgd":
                torch._foreach_mul_(self.m, SGD_MOMENTUM)
                torch._foreach_add_(self.m, grads)
                torch._foreach_addcmul_(self.params, self.m, self.rates, -1.0)  # p − lr·buf
            else:  # torch.optim.Adam's update, betas (0.9, 0.999), eps 1e-8
                b1, b2 = ADAM_BETAS
                torch._foreach_lerp_(self.m, grads, 1 - b1)
                torch._foreach_mul_(self.v, b2)
                torch._foreach_addcmul_(self.v, grads, grads, 1 - b2)
                c1, c2 = 1 - b1**self.t, (1 - b2**self.t) ** 0.5
                denom = torch._foreach_div(torch._foreach_sqrt(self.v), c2)
                torch._foreach_add_(denom, ADAM_EPS)
                size = (torch.where(self.alive, self.lr, 0.0).double() / c1).float()
                steps = torch._foreach_mul(self.m, self._views(size))  # as addcdiv: s·m / d
                torch._foreach_div_(steps, denom)
                torch._foreach_sub_(self.params, steps)
        for p in self.params:
            p.grad = None


def make_optimizer(kind: str, params, lr: float) -> torch.optim.Optimizer:
    """The torch.optim optimizer the batched one mirrors."""
    if kind == "adam":
        return torch.optim.Adam(params, lr=lr, betas=ADAM_BETAS, eps=ADAM_EPS)
    return torch.optim.SGD(params, lr=lr, momentum=SGD_MOMENTUM)


@single_threaded
def train_loop(grid: Grid) -> tuple[Outcome, list[nn.Sequential]]:
    """The reference: each run alone, as torch.nn modules and torch.optim (SGD or Adam)."""
    data = digits()
    X, Y = inputs(grid.net, data.x_train), data.y_train
    res: dict[str, list] = {k: [] for k in ("va", "vl", "ta", "tl", "dead", "bs")}
    models = []
    make = builder(grid.net)[0]
    for v in grid.variants:
        model = make(grid.net, v.norm, v.seed, grid.momentum, v.ghost, v.ws)
        opt = make_optimizer(grid.optimizer, model.parameters(), v.lr)
        dead = False
        model.train()
        for b in batches(v.seed, data.n_train, grid.batch, grid.samples):
            loss = F.cross_entropy(model(X[b]), Y[b])
            if not torch.isfinite(loss):
                dead = True
                break
            opt.zero_grad()
            loss.backward()
            opt.step()
        model.eval()
        for key, (x, y) in (
            ("v", (data.x_val, data.y_val)),
            ("t", (data.x_train, data.y_train)),
        ):
            acc, lo = _score(model, inputs(grid.net, x), y)
            res[key + "a"].append(acc)
            res[key + "l"].append(lo)
        res["dead"].append(dead)
        models.append(model)
    arr = {k: np.array(v) for k, v in res.items()}
    empty = np.zeros((0, len(grid.variants)))
    out = Outcome(
        grid.variants, arr["va"], arr["vl"], arr["ta"], arr["tl"], arr["dead"], None, (), empty
    )
    return out, models


def _score(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    with torch.no_grad():
        logits = model(x).nan_to_num(0.0, 0.0, 0.0)
    return float((logits.argmax(-1) == y).float().mean()), float(F.cross_entropy(logits, y))
