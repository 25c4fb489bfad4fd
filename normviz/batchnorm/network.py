"""The real model's networks: a small MLP with BatchNorm, at a tiny and a normal batch size.

A three-layer MLP classifies seeded synthetic data (Gaussian classes on raw
features with their own offsets and scales). It is trained with BatchNorm at
batch size 2 and 64, and with a per-sample method (GroupNorm or LayerNorm) at
the same sizes; then every run is scored in training mode and in evaluation
mode, on clean and on shifted test data. Everything is seeded and runs on the
CPU in a few seconds.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from normviz.batchnorm.lab import one_thread
from normviz.batchnorm.stream import shifted
from normviz.core import NormConfigError
from normviz.methods import METHODS

ProgressText = Callable[[float, str], None]
COMPARABLE: tuple[str, ...] = ("group", "layer")  # per-sample methods to train beside BatchNorm


@dataclass(frozen=True)
class ModelConfig:
    """Everything that decides a training run (plain values: pages cache on it)."""

    seed: int = 0
    compare: str = "group"  # the per-sample method trained beside BatchNorm
    small_batch: int = 2  # the tiny batch size
    normal_batch: int = 64
    steps: int = 300  # optimizer steps per run, the same for every batch size
    features: int = 16
    classes: int = 4
    hidden: int = 32
    groups: int = 4  # GroupNorm's G over the hidden units
    n_train: int = 1024
    n_test: int = 1000
    lr: float = 0.01  # Adam

    @property
    def methods(self) -> tuple[str, str]:
        """BatchNorm and the method it is compared with."""
        return ("batch", self.compare)

    @property
    def batch_sizes(self) -> tuple[int, int]:
        """The tiny and the normal batch size."""
        return (self.small_batch, self.normal_batch)


@dataclass(frozen=True)
class ClassData:
    """Seeded classification data: raw features with their own offsets and scales."""

    x_train: torch.Tensor  # (n_train, features)
    y_train: torch.Tensor  # (n_train,) class indices
    x_test: torch.Tensor  # (n_test, features)
    y_test: torch.Tensor
    mean: torch.Tensor  # (features,) training-set mean
    std: torch.Tensor  # (features,) training-set std


def make_data(cfg: ModelConfig) -> ClassData:
    """Gaussian classes in a standardized space, mapped to raw features (offsets, scales)."""
    rng = np.random.default_rng(cfg.seed)
    offset = rng.uniform(-4.0, 4.0, cfg.features)  # raw features are far from mean 0, std 1
    scale = np.exp(rng.uniform(np.log(0.5), np.log(4.0), cfg.features))
    centres = 1.2 * rng.standard_normal((cfg.classes, cfg.features))

    def draw(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """n labelled samples from the class distributions."""
        y = rng.integers(0, cfg.classes, n)
        z = centres[y] + rng.standard_normal((n, cfg.features))
        x = torch.from_numpy((offset + scale * z).astype(np.float32))
        return x, torch.from_numpy(y)

    x_tr, y_tr = draw(cfg.n_train)
    x_te, y_te = draw(cfg.n_test)
    return ClassData(x_tr, y_tr, x_te, y_te, x_tr.mean(0), x_tr.std(0))


def _norm_layer(method: str, cfg: ModelConfig) -> nn.Module:
    """The torch module for `method` over a (batch, hidden) activation."""
    h = cfg.hidden
    if method == "batch":
        return nn.BatchNorm1d(h)
    if method == "layer":
        return nn.LayerNorm(h)
    if method == "group":
        return nn.GroupNorm(cfg.groups, h)
    raise NormConfigError(f"no torch layer for {method!r} in the model: use batch, layer or group")


def build(method: str, cfg: ModelConfig, generator: torch.Generator | None = None) -> nn.Sequential:
    """Linear → norm → ReLU → Linear → norm → ReLU → Linear, initialized from `generator`."""
    d, h = cfg.features, cfg.hidden
    model = nn.Sequential(
        nn.Linear(d, h),
        _norm_layer(method, cfg),
        nn.ReLU(),
        nn.Linear(h, h),
        _norm_layer(method, cfg),
        nn.ReLU(),
        nn.Linear(h, cfg.classes),
    )
    if generator is not None:  # torch's default init, drawn from our generator (thread-safe)
        for m in model:
            if isinstance(m, nn.Linear):
                nn.init.kaiming_uniform_(m.weight, a=math.sqrt(5), generator=generator)
                bound = 1 / math.sqrt(m.in_features)
                nn.init.uniform_(m.bias, -bound, bound, generator=generator)
    return model


@dataclass(frozen=True)
class TrainedRun:
    """One trained network: its normalization, batch size and weights."""

    method: str
    batch_size: int
    state: dict[str, torch.Tensor]  # state_dict, buffers included
    final_loss: float  # mean training loss over the last 50 steps


@dataclass(frozen=True)
class Trained:
    """The trained runs of one configuration."""

    config: ModelConfig
    runs: tuple[TrainedRun, ...]


@one_thread()
def train_all(cfg: ModelConfig, progress: ProgressText | None = None) -> Trained:
    """Train the four runs (BatchNorm and cfg.compare, small and normal batch), seeded.

    `progress(fraction, text)` is called as training proceeds (for a progress bar).
    """
    if cfg.compare not in COMPARABLE:
        raise NormConfigError(
            f"the model compares BatchNorm with one of {', '.join(COMPARABLE)}, not {cfg.compare!r}"
        )
    data = make_data(cfg)
    runs = []
    jobs = [(m, b) for m in cfg.methods for b in cfg.batch_sizes]
    for j, (method, b) in enumerate(jobs):
        g = torch.Generator().manual_seed(cfg.seed)
        model = build(method, cfg, g)
        opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
        order = _batches(cfg.n_train, b, cfg.steps, g)
        losses = []
        model.train()
        for s, idx in enumerate(order):
            loss = nn.functional.cross_entropy(model(data.x_train[idx]), data.y_train[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
            if progress is not None and s % 25 == 0:
                label = f"Training {METHODS[method].label} at batch size {b}"
                progress((j + s / cfg.steps) / len(jobs), label)
        state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        runs.append(TrainedRun(method, b, state, float(np.mean(losses[-50:]))))
    if progress is not None:
        progress(1.0, "Trained")
    return Trained(cfg, tuple(runs))


@dataclass(frozen=True, eq=False)
class _Reporter:
    """A progress callback that is no part of a cache key (all reporters are equal)."""

    progress: ProgressText | None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Reporter)

    def __hash__(self) -> int:
        return 0


@functools.lru_cache(maxsize=4)
def _trained(cfg: ModelConfig, reporter: _Reporter) -> Trained:
    return train_all(cfg, reporter.progress)


def trained(cfg: ModelConfig, progress: ProgressText | None = None) -> Trained:
    """train_all, remembered for the last few configurations (runs are never mutated).

    Scoring the same networks at another test shift then costs a fraction of a second
    instead of a retraining; `progress` is called only when training actually runs.
    """
    return _trained(cfg, _Reporter(progress))


def _batches(n: int, b: int, steps: int, g: torch.Generator) -> list[torch.Tensor]:
    """`steps` minibatch index sets: shuffled epochs, the incomplete last batch dropped."""
    out: list[torch.Tensor] = []
    while len(out) < steps:
        perm = torch.randperm(n, generator=g)
        out += list(perm[: (n // b) * b].view(-1, b))
    return out[:steps]


def restore(run: TrainedRun, cfg: ModelConfig) -> nn.Sequential:
    """A fresh network holding a run's weights and buffers."""
    model = build(run.method, cfg)
    model.load_state_dict(run.state)
    return model


@torch.no_grad()
def accuracy(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, training: bool, batch_size: int
) -> float:
    """Share of correct predictions. In training mode the test set goes through in batches of
    `batch_size`, as during training (and the buffers this moves are thrown away by the caller).
    """
    model.train(training)
    if training:
        n = (len(x) // batch_size) * batch_size
        logits = torch.cat([model(x[i : i + batch_size]) for i in range(0, n, batch_size)])
        y = y[:n]
    else:
        logits = model(x)
    return (logits.argmax(1) == y).double().mean().item()


@dataclass(frozen=True)
class AccuracyRow:
    """Test accuracy of one run in both modes, on clean and shifted test data."""

    method: str
    batch_size: int
    train_clean: float
    eval_clean: float
    train_shifted: float
    eval_shifted: float


@dataclass(frozen=True)
class ModelReport:
    """Accuracy of every run, and the test-data shift it was scored on."""

    rows: tuple[AccuracyRow, ...]
    shift: float
    scale: float
    chance: float  # 1 / classes
    config: ModelConfig = ModelConfig()  # what was trained


@one_thread()
def evaluate(trained: Trained, shift: float, scale: float) -> ModelReport:
    """Score every run in training and evaluation mode, on clean and shifted test data.

    Shifted data: every feature's mean moves `shift` training standard deviations and
    its spread around the mean grows ×`scale` (as in the lab's shift demo).
    """
    cfg = trained.config
    data = make_data(cfg)
    x_shift = shifted(data.x_test, data.mean, data.std, shift, scale)
    rows = []
    for run in trained.runs:
        scores = []
        for x in (data.x_test, x_shift):
            for training in (True, False):
                # a fresh copy per score: training mode moves the running buffers
                scores.append(accuracy(restore(run, cfg), x, data.y_test, training, run.batch_size))
        rows.append(
            AccuracyRow(run.method, run.batch_size, scores[0], scores[1], scores[2], scores[3])
        )
    return ModelReport(tuple(rows), shift, scale, 1.0 / cfg.classes, cfg)
