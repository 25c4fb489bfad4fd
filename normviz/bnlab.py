"""The BatchNorm lab: running statistics, tiny batches, shift, accumulation, sync, freezing.

Every simulation draws minibatches from one seeded dataset (a shared data
generator) and runs them through the core: `normalize()` for the batch
statistics and outputs, `RunningStats` for the running buffers. Nothing here
re-implements the formula, so each number equals what torch's BatchNorm gives
for the same batches (tests/test_bnlab.py feeds nn.BatchNorm those batches).

Many small batches are run in one call: S batches of shape (b, ...) are folded
into the channel axis, so one `normalize()` over S·C "channels" gives every
batch its own mean and variance, exactly as S separate calls would.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace

import numpy as np
import torch
from torch import nn

from normviz.core import NormConfigError, check_values, contract, normalize
from normviz.data import generate
from normviz.layouts import LAYOUTS
from normviz.limits import max_elements
from normviz.methods import METHODS
from normviz.running import RunningStats

Progress = Callable[[float], None]

TRAIN_SAMPLES = 4096  # the training set minibatches are drawn from
HELD_OUT = 512  # fresh samples of the same distribution, for evaluation
CONVENTIONS: tuple[str, ...] = ("pytorch", "keras", "cumulative")
BATCH_SWEEP: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256)
BESSEL_NS: tuple[int, ...] = (2, 3, 4, 5, 6, 8, 12, 16, 32, 64, 128)
BESSEL_REPEATS = 8192  # independent batches averaged per n
SHIFT_GRID: tuple[float, ...] = tuple(np.round(np.linspace(-3.0, 3.0, 25), 2).tolist())
CLUSTERS = 4  # sub-populations in the non-i.i.d. demo
CLUSTER_SPREAD = 1.5  # cluster centres sit up to this many σ from the overall mean
CHUNK = 2**20  # elements per vectorized normalize() call
STREAM_CAP = 2**27  # elements one stream may push through BatchNorm in total
MODULE_STEPS = 200  # optimizer steps of the real nn.BatchNorm in the checkpoint demo
COMPARED: tuple[str, ...] = ("batch", "layer", "group")  # methods in the shift demo


@contextmanager
def one_thread() -> Iterator[None]:
    """Run torch on one thread inside the block (and restore the count after).

    The lab pushes thousands of tiny tensors through torch: waking a second thread
    for each costs more than it saves, and far more when other work keeps the
    cores busy. With torch's OpenMP backend the setting belongs to the calling
    thread, so other sessions of the server keep theirs.
    """
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


# ---- settings ----------------------------------------------------------------------


@dataclass(frozen=True)
class LabSetup:
    """The lab's plain settings: pages cache on it (it hashes field by field)."""

    layout: str = "BTC"
    sample_shape: tuple[int, ...] = (6, 8)  # one sample: (T, C) or (C, H, W)
    data: str = "channels"  # shared generator name
    seed: int = 0
    eps: float = 1e-5
    batch_size: int = 8  # b: samples per training batch
    steps: int = 100  # training batches fed to BatchNorm
    momentum: float = 0.1  # in the chosen convention (ignored by "cumulative")
    convention: str = "pytorch"  # pytorch | keras | cumulative

    @property
    def C(self) -> int:
        """Number of channels."""
        return self.sample_shape[LAYOUTS[self.layout].channel_axis - 1]

    @property
    def positions(self) -> int:
        """Values per channel in one sample: T, or H·W."""
        return math.prod(self.sample_shape) // self.C

    @property
    def n(self) -> int:
        """Values per channel in one training batch: b·T or b·H·W."""
        return self.batch_size * self.positions

    def batch_shape(self, b: int | None = None) -> tuple[int, ...]:
        """Shape of one training batch (of b samples, default the setup's)."""
        return (self.batch_size if b is None else b, *self.sample_shape)

    def with_(self, **kw: object) -> LabSetup:
        """A copy with some fields changed."""
        return replace(self, **kw)  # type: ignore[arg-type]


def new_running(C: int, momentum: float, convention: str) -> RunningStats:
    """RunningStats for a URL convention ("cumulative" is PyTorch's momentum=None)."""
    if convention not in CONVENTIONS:
        raise NormConfigError(
            f"unknown convention {convention!r}: choose one of {', '.join(CONVENTIONS)}"
        )
    if convention == "cumulative":
        return RunningStats(C, None, "pytorch")
    return RunningStats(C, momentum, convention)  # type: ignore[arg-type]


def convert_momentum(momentum: float, source: str, target: str) -> float:
    """The momentum that traces the same running mean in `target`: PyTorch m = 1 − Keras m."""
    if {source, target} == {"pytorch", "keras"}:
        return round(1.0 - momentum, 6)
    return momentum


def twin_convention(convention: str) -> str | None:
    """The other convention with the same running-mean curve (none for cumulative)."""
    return {"pytorch": "keras", "keras": "pytorch"}.get(convention)


def batch_weight(momentum: float, convention: str) -> float | None:
    """Weight of each new batch in the running update (None: 1/k at step k)."""
    if convention == "cumulative":
        return None
    return new_running(1, momentum, convention).factor()  # the core's own rule


def memory_steps(momentum: float, convention: str) -> float | None:
    """About how many recent batches the running statistics remember: 1/weight.

    None for the cumulative average (it weighs every batch equally); inf when the
    new batch has weight 0 (the running statistics never move).
    """
    w = batch_weight(momentum, convention)
    if w is None:
        return None
    return math.inf if w == 0 else 1.0 / w


def check(setup: LabSetup) -> None:
    """Raise NormConfigError when the lab cannot run these settings (sizes, one value).

    Raises:
        NormConfigError: the numbers that do not fit, and what to change.
    """
    lay = LAYOUTS.get(setup.layout)
    if lay is None:
        raise NormConfigError(
            f"unknown layout {setup.layout!r}: choose one of {', '.join(LAYOUTS)}"
        )
    new_running(setup.C, setup.momentum, setup.convention)  # convention and momentum range
    per_sample = math.prod(setup.sample_shape)
    total = (TRAIN_SAMPLES + HELD_OUT) * per_sample
    names = tuple(a for a in lay.axes if a != lay.sample)
    if total > max_elements():
        raise NormConfigError(
            f"the lab draws {TRAIN_SAMPLES + HELD_OUT:,} samples of ({', '.join(names)}) = "
            f"{setup.sample_shape}, {total:,} values, over the app's cap of {max_elements():,}: "
            f"make {' or '.join(names)} smaller"
        )
    work = setup.steps * setup.batch_size * per_sample
    if work > STREAM_CAP:
        raise NormConfigError(
            f"{setup.steps:,} steps × batch size {setup.batch_size} × {per_sample:,} values is "
            f"{work:,} values to normalize, over the lab's cap of {STREAM_CAP:,}: "
            "lower the steps or the batch size"
        )
    # the core refuses a batch with one value per channel, in its own words
    check_values(contract("batch", setup.layout, setup.batch_shape()))


# ---- the dataset and its minibatches -------------------------------------------------


@dataclass(frozen=True)
class Dataset:
    """A seeded training set, held-out samples, and the per-channel truth."""

    layout: str
    train: torch.Tensor  # (TRAIN_SAMPLES, *sample)
    held_out: torch.Tensor  # (HELD_OUT, *sample), same distribution
    mean: torch.Tensor  # (C,) training-set mean: where running_mean should end up
    var: torch.Tensor  # (C,) training-set variance (biased, over every value)

    @property
    def std(self) -> torch.Tensor:
        """σ per channel, floored so a constant channel does not divide by zero."""
        return self.var.sqrt().clamp_min(1e-6)

    def channel_view(self, t: torch.Tensor) -> torch.Tensor:
        """A (C,) tensor shaped to broadcast along the channel axis of a batch."""
        shape = [1] * self.train.ndim
        shape[LAYOUTS[self.layout].channel_axis] = -1
        return t.reshape(shape)

    def per_sample_view(self, t: torch.Tensor) -> torch.Tensor:
        """A (P, C) tensor (one value per sample and channel) shaped to broadcast on a batch."""
        shape = [1] * self.train.ndim
        shape[0], shape[LAYOUTS[self.layout].channel_axis] = t.shape[0], t.shape[1]
        return t.reshape(shape)


def make_dataset(setup: LabSetup) -> Dataset:
    """Training set + held-out samples from the shared generator (one call: one distribution)."""
    x = generate(
        setup.data, setup.layout, (TRAIN_SAMPLES + HELD_OUT, *setup.sample_shape), setup.seed
    )
    train, held = x[:TRAIN_SAMPLES], x[TRAIN_SAMPLES:]
    # the truth is what BatchNorm would compute with the whole training set as one batch
    whole = normalize(train, "batch", setup.layout)
    assert whole.mean is not None
    return Dataset(setup.layout, train, held, whole.mean.reshape(-1), whole.var.reshape(-1))


def batch_indices(n_samples: int, batch_size: int, steps: int, seed: int) -> torch.Tensor:
    """(steps, b) sample indices: shuffled epochs, as DataLoader(shuffle=True, drop_last=True)."""
    if batch_size > n_samples:
        raise NormConfigError(
            f"a batch of {batch_size:,} needs more than the {n_samples:,} samples available"
        )
    per_epoch = n_samples // batch_size
    g = torch.Generator().manual_seed(seed)
    epochs = -(-steps // per_epoch)
    idx = [
        torch.randperm(n_samples, generator=g)[: per_epoch * batch_size].view(per_epoch, -1)
        for _ in range(epochs)
    ]
    return torch.cat(idx)[:steps]


# ---- many batches through BatchNorm at once --------------------------------------------


@dataclass(frozen=True)
class BatchRun:
    """Training-mode BatchNorm applied to S batches, each with its own statistics."""

    output: torch.Tensor  # (S, b, *sample)
    mean: torch.Tensor  # (S, C) batch means
    var: torch.Tensor  # (S, C) biased batch variances: what normalizes each batch
    n: int  # values per channel in one batch


def normalize_batches(batches: torch.Tensor, layout: str, eps: float = 1e-5) -> BatchRun:
    """Training-mode BatchNorm on S batches (S, b, *sample) in one normalize() call.

    Raises:
        NormConfigError: a batch with one value per channel (the core's message).
    """
    S = batches.shape[0]
    c = LAYOUTS[layout].channel_axis
    b_shape = batches.shape[1:]
    C = b_shape[c]
    # (S, b, T, C) -> (b, T, S, C) -> (b, T, S·C): channel s·C + c is channel c of batch s
    moved = batches.movedim(0, c)
    folded = moved.reshape(*b_shape[:c], S * C, *b_shape[c + 1 :])
    res = normalize(folded, "batch", layout, eps=eps)
    assert res.mean is not None
    out = res.output.reshape(moved.shape).movedim(c, 0)
    return BatchRun(out, res.mean.reshape(S, C), res.var.reshape(S, C), res.contract.group_size)


@dataclass(frozen=True)
class StreamTrace:
    """Batch statistics of a training stream and the running buffers after every step."""

    batch_mean: torch.Tensor  # (S, C)
    batch_var: torch.Tensor  # (S, C), biased
    running_mean: torch.Tensor  # (R, S, C): one row per RunningStats fed
    running_var: torch.Tensor  # (R, S, C)
    n: int


def run_stream(
    samples: torch.Tensor,
    idx: torch.Tensor,
    layout: str,
    eps: float,
    runnings: Sequence[RunningStats],
    progress: Progress | None = None,
) -> StreamTrace:
    """Feed the batches samples[idx[s]] through BatchNorm in training mode, in order.

    Every RunningStats in `runnings` is updated with each batch, as nn.BatchNorm's
    buffers would be; statistics are computed chunk by chunk, vectorized.
    """
    S, b = idx.shape
    C = samples.shape[LAYOUTS[layout].channel_axis]
    per_sample = samples[0].numel()
    per_chunk = max(1, CHUNK // max(1, b * per_sample))
    mean = torch.empty(S, C)
    var = torch.empty(S, C)
    r_mean = torch.empty(len(runnings), S, C)
    r_var = torch.empty(len(runnings), S, C)
    n = 0
    for start in range(0, S, per_chunk):
        stop = min(S, start + per_chunk)
        run = normalize_batches(samples[idx[start:stop]], layout, eps)
        n = run.n
        mean[start:stop], var[start:stop] = run.mean, run.var
        for s in range(stop - start):
            for r, rs in enumerate(runnings):
                rs.update(run.mean[s], run.var[s], n)
                r_mean[r, start + s], r_var[r, start + s] = rs.mean, rs.var
        if progress is not None:
            progress(stop / S)
    return StreamTrace(mean, var, r_mean, r_var, n)


def _np(t: torch.Tensor) -> np.ndarray:
    """A tensor as a float64 numpy array (results hold plain arrays)."""
    return t.detach().double().numpy()


# ---- 1. running statistics over a training stream ------------------------------------


@dataclass(frozen=True)
class RunningTrace:
    """Running mean/var step by step against the batch statistics and the truth."""

    batch_mean: np.ndarray  # (S, C)
    batch_var: np.ndarray  # (S, C) biased: what normalized each batch
    running_mean: np.ndarray  # (S, C) after each step
    running_var: np.ndarray  # (S, C)
    twin_mean: np.ndarray | None  # the other convention at the equivalent momentum
    twin_var: np.ndarray | None
    twin: str | None  # "keras" / "pytorch" / None
    twin_momentum: float | None
    true_mean: np.ndarray  # (C,)
    true_var: np.ndarray  # (C,)
    n: int  # values per channel per batch
    final: RunningStats  # the buffers after the last step (a copy)

    @property
    def bessel(self) -> float:
        """n/(n−1): PyTorch's running_var uses the unbiased batch variance."""
        return self.n / (self.n - 1)


@one_thread()
def running_trace(setup: LabSetup, progress: Progress | None = None) -> RunningTrace:
    """Simulation 1: a training stream of `steps` batches into RunningStats (and its twin)."""
    check(setup)
    ds = make_dataset(setup)
    idx = batch_indices(TRAIN_SAMPLES, setup.batch_size, setup.steps, setup.seed)
    rs = new_running(setup.C, setup.momentum, setup.convention)
    twin = twin_convention(setup.convention)
    twin_m = convert_momentum(setup.momentum, setup.convention, twin) if twin else None
    runnings = [rs] + ([new_running(setup.C, twin_m, twin)] if twin and twin_m is not None else [])
    tr = run_stream(ds.train, idx, setup.layout, setup.eps, runnings, progress)
    return RunningTrace(
        batch_mean=_np(tr.batch_mean),
        batch_var=_np(tr.batch_var),
        running_mean=_np(tr.running_mean[0]),
        running_var=_np(tr.running_var[0]),
        twin_mean=_np(tr.running_mean[1]) if twin else None,
        twin_var=_np(tr.running_var[1]) if twin else None,
        twin=twin,
        twin_momentum=twin_m,
        true_mean=_np(ds.mean),
        true_var=_np(ds.var),
        n=tr.n,
        final=rs.copy(),
    )


# ---- 2. biased vs unbiased variance ---------------------------------------------------


@dataclass(frozen=True)
class BesselResult:
    """How the biased batch variance underestimates σ², and the n/(n−1) fix."""

    n: np.ndarray  # values per channel
    factor: np.ndarray  # n/(n−1)
    biased: np.ndarray  # average biased batch variance / true σ² (≈ (n−1)/n)
    unbiased: np.ndarray  # average of what enters running_var / true σ² (≈ 1)
    repeats: int


@one_thread()
def bessel(seed: int = 0, ns: Sequence[int] = BESSEL_NS) -> BesselResult:
    """Simulation 2: average batch variances of N(0, 1) values (σ² = 1) for each n.

    Each of BESSEL_REPEATS channels is one independent batch of n values, so one
    normalize() call per n gives thousands of batches; a RunningStats with momentum 1
    holds exactly what PyTorch adds to running_var (the unbiased variance).
    """
    biased, unbiased = [], []
    for n in ns:
        x = generate("normal", "BTC", (n, 1, BESSEL_REPEATS), seed + n)  # (B=n, T=1, C=repeats)
        rs = RunningStats(BESSEL_REPEATS, momentum=1.0)
        res = normalize(x, "batch", "BTC", running=rs)
        biased.append(res.var.double().mean().item())
        unbiased.append(rs.var.double().mean().item())
    n_arr = np.asarray(ns, dtype=float)
    return BesselResult(
        n_arr, n_arr / (n_arr - 1), np.asarray(biased), np.asarray(unbiased), BESSEL_REPEATS
    )


@dataclass(frozen=True)
class OneValue:
    """A batch with one value per channel: refused in training, fine in evaluation."""

    refusal: str  # the core's message (torch: "Expected more than 1 value per channel")
    x: np.ndarray  # (C,) the single sample's values
    eval_output: np.ndarray  # (C,) normalized with the running statistics


@one_thread()
def one_value(setup: LabSetup, running: RunningStats) -> OneValue:
    """A single sample with one position, in training mode (refused) and evaluation mode."""
    ds = make_dataset(setup)
    lay = LAYOUTS[setup.layout]
    one = ds.held_out[:1]
    for ax in range(1, one.ndim):  # keep the first position of every non-channel axis
        if ax != lay.channel_axis:
            one = one.narrow(ax, 0, 1)
    try:
        normalize(one, "batch", setup.layout, eps=setup.eps)
        refusal = ""
    except NormConfigError as e:
        refusal = str(e)
    out = normalize(one, "batch", setup.layout, eps=setup.eps, training=False, running=running)
    return OneValue(refusal, _np(one.reshape(-1)), _np(out.output.reshape(-1)))


# ---- 3. train/eval gap vs batch size ---------------------------------------------------


@dataclass(frozen=True)
class GapSweep:
    """The same held-out batches in training and in evaluation mode, per batch size."""

    batch_sizes: tuple[int, ...]
    gap: np.ndarray  # mean |y_train − y_eval| (nan where training refuses)
    eval_mean: np.ndarray  # mean over channels of |eval output mean|
    eval_var: np.ndarray  # mean over channels of eval output variance
    running_error: np.ndarray  # mean over channels of |running mean − truth| / σ
    refused: tuple[int, ...]  # batch sizes with one value per channel


@one_thread()
def gap_sweep(
    setup: LabSetup,
    sizes: Sequence[int] = BATCH_SWEEP,
    progress: Progress | None = None,
) -> GapSweep:
    """Simulation 3: train running statistics at each batch size, then compare the modes."""
    check(setup.with_(batch_size=max(sizes)))
    ds = make_dataset(setup)
    gap, e_mean, e_var, r_err, refused = [], [], [], [], []
    for i, b in enumerate(sizes):
        try:
            check_values(contract("batch", setup.layout, setup.batch_shape(b)))
        except NormConfigError:  # one value per channel: training refuses this batch size
            refused.append(b)
            for lst in (gap, e_mean, e_var, r_err):
                lst.append(math.nan)
            continue
        rs = new_running(setup.C, setup.momentum, setup.convention)
        idx = batch_indices(TRAIN_SAMPLES, b, setup.steps, setup.seed)
        run_stream(ds.train, idx, setup.layout, setup.eps, [rs])
        held = ds.held_out[: (HELD_OUT // b) * b]
        y_train = normalize_batches(
            held.reshape(-1, b, *setup.sample_shape), setup.layout, setup.eps
        )
        y_train_flat = y_train.output.reshape(held.shape)
        y_eval = normalize(held, "batch", setup.layout, eps=setup.eps, training=False, running=rs)
        gap.append((y_train_flat - y_eval.output).abs().mean().item())
        stats = normalize(y_eval.output, "batch", setup.layout)  # per-channel mean/var of outputs
        assert stats.mean is not None
        e_mean.append(stats.mean.abs().mean().item())
        e_var.append(stats.var.mean().item())
        r_err.append(((rs.mean - ds.mean).abs() / ds.std).mean().item())
        if progress is not None:
            progress((i + 1) / len(sizes))
    return GapSweep(
        tuple(sizes),
        np.asarray(gap),
        np.asarray(e_mean),
        np.asarray(e_var),
        np.asarray(r_err),
        tuple(refused),
    )


# ---- 4. distribution shift at inference ------------------------------------------------


def shifted(
    x: torch.Tensor, mean: torch.Tensor, std: torch.Tensor, shift: float, scale: float
) -> torch.Tensor:
    """x' = μ + scale·(x − μ) + shift·σ: the mean moves `shift` σ, the spread grows ×scale.

    `mean` and `std` are the training data's, shaped to broadcast against x.
    """
    return mean + scale * (x - mean) + shift * std


def comparison_groups(C: int, wanted: int) -> int:
    """The GroupNorm G used beside BatchNorm: `wanted` if it divides C, else the nearest below."""
    return max(g for g in range(1, max(1, min(wanted, C)) + 1) if C % g == 0)


@dataclass(frozen=True)
class ShiftResult:
    """Pooled output mean and variance of shifted evaluation data, per method."""

    methods: tuple[str, ...]
    shifts: np.ndarray  # (K,) the sweep, at the current scale
    mean: np.ndarray  # (M, K)
    var: np.ndarray  # (M, K)
    shift: float
    scale: float
    current_mean: np.ndarray  # (M,) at the current shift and scale
    current_var: np.ndarray  # (M,)
    groups: int


@one_thread()
def shift_sweep(
    setup: LabSetup, running: RunningStats, shift: float, scale: float, groups: int = 2
) -> ShiftResult:
    """Simulation 4: evaluation data moved by `shift` σ and scaled; BatchNorm uses `running`.

    BatchNorm normalizes with the running statistics of training; LayerNorm and
    GroupNorm compute fresh statistics from each sample, so the shift cannot reach them.
    """
    check(setup)
    ds = make_dataset(setup)
    G = comparison_groups(setup.C, groups)
    mu, sd = ds.channel_view(ds.mean), ds.channel_view(ds.std)

    def stats(sh: float) -> list[tuple[float, float]]:
        """Pooled output mean and variance of each method for one shift."""
        x = shifted(ds.held_out, mu, sd, sh, scale)
        out = []
        for m in COMPARED:
            kw: dict = {"groups": G} if METHODS[m].grouped else {}
            if METHODS[m].train_eval_differ:
                kw |= {"training": False, "running": running}
            y = normalize(x, m, setup.layout, eps=setup.eps, **kw).output.double()
            out.append((y.mean().item(), y.var(correction=0).item()))
        return out

    grid = np.asarray(SHIFT_GRID)
    sweep = np.asarray([stats(float(s)) for s in grid])  # (K, M, 2)
    cur = np.asarray(stats(shift))  # (M, 2)
    return ShiftResult(
        COMPARED, grid, sweep[:, :, 0].T, sweep[:, :, 1].T, shift, scale, cur[:, 0], cur[:, 1], G
    )


# ---- 5. non-i.i.d. batches -------------------------------------------------------------

ORDERS: tuple[str, ...] = ("one cluster per batch", "shuffled")


@dataclass(frozen=True)
class OrderResult:
    """Single-cluster batches against shuffled ones, same data, same running statistics."""

    orders: tuple[str, ...]
    batch_mean: np.ndarray  # (2, S, C)
    running_mean: np.ndarray  # (2, S, C)
    final_var: np.ndarray  # (2, C) running_var at the end
    true_mean: np.ndarray  # (C,)
    true_var: np.ndarray  # (C,)
    batch_noise: np.ndarray  # (2,) spread of batch means around the truth, in σ
    mean_error: np.ndarray  # (2,) |running mean − truth| / σ at the end
    var_ratio: np.ndarray  # (2,) running var / true var at the end
    gap: np.ndarray  # (2,) mean |y_train − y_eval| on the last CLUSTERS batches
    clusters: int


def clustered_dataset(setup: LabSetup) -> Dataset:
    """The training set split into CLUSTERS sub-populations: sample i is in cluster i mod K.

    Each cluster's centre sits up to CLUSTER_SPREAD σ from the overall mean, per channel.
    """
    ds = make_dataset(setup)
    g = np.random.default_rng(setup.seed + 1)
    centres = torch.from_numpy(g.uniform(-CLUSTER_SPREAD, CLUSTER_SPREAD, (CLUSTERS, setup.C)))
    cluster = torch.arange(TRAIN_SAMPLES) % CLUSTERS
    train = ds.train + ds.per_sample_view((centres.float() * ds.std)[cluster])
    whole = normalize(train, "batch", setup.layout)
    assert whole.mean is not None
    return Dataset(setup.layout, train, ds.held_out, whole.mean.reshape(-1), whole.var.reshape(-1))


def order_indices(setup: LabSetup) -> tuple[torch.Tensor, torch.Tensor]:
    """(steps, b) indices into clustered_dataset: one cluster per batch (taking turns), shuffled."""
    within = batch_indices(TRAIN_SAMPLES // CLUSTERS, setup.batch_size, setup.steps, setup.seed)
    turn = torch.arange(setup.steps) % CLUSTERS
    one_cluster = within * CLUSTERS + turn[:, None]  # batch s: cluster s mod K only
    return one_cluster, batch_indices(TRAIN_SAMPLES, setup.batch_size, setup.steps, setup.seed)


@one_thread()
def order_demo(setup: LabSetup, progress: Progress | None = None) -> OrderResult:
    """Simulation 5: sorted (single-cluster) batches against shuffled ones.

    "One cluster per batch" fills each batch from a single cluster, the clusters
    taking turns (sorted data); "shuffled" mixes them. Both streams see the same
    number of batches with the same momentum.
    """
    check(setup)
    ds = clustered_dataset(setup)
    train, t_mean, t_var, t_std = ds.train, ds.mean, ds.var, ds.std
    b_mean, r_mean, f_var, noise, m_err, v_ratio, gap = [], [], [], [], [], [], []
    for i, idx in enumerate(order_indices(setup)):
        rs = new_running(setup.C, setup.momentum, setup.convention)
        tr = run_stream(
            train,
            idx,
            setup.layout,
            setup.eps,
            [rs],
            None if progress is None else (lambda f, i=i: progress((i + f) / 2)),
        )
        b_mean.append(_np(tr.batch_mean))
        r_mean.append(_np(tr.running_mean[0]))
        f_var.append(_np(rs.var))
        noise.append(((tr.batch_mean - t_mean) / t_std).std(dim=0, correction=0).mean().item())
        m_err.append(((rs.mean - t_mean).abs() / t_std).mean().item())
        v_ratio.append((rs.var / t_var.clamp_min(1e-12)).mean().item())
        last = train[idx[-CLUSTERS:]]  # (K, b, ...)
        y_train = normalize_batches(last, setup.layout, setup.eps).output
        y_eval = normalize(
            last.reshape(-1, *setup.sample_shape),
            "batch",
            setup.layout,
            eps=setup.eps,
            training=False,
            running=rs,
        ).output.reshape(last.shape)
        gap.append((y_train - y_eval).abs().mean().item())
    return OrderResult(
        ORDERS,
        np.stack(b_mean),
        np.stack(r_mean),
        np.stack(f_var),
        _np(t_mean),
        _np(t_var),
        np.asarray(noise),
        np.asarray(m_err),
        np.asarray(v_ratio),
        np.asarray(gap),
        CLUSTERS,
    )


# ---- 6. gradient accumulation ----------------------------------------------------------


@dataclass(frozen=True)
class AccumResult:
    """k micro-batches of b per optimizer step against one batch of k·b."""

    k: int
    b: int
    micro_dev: np.ndarray  # (k, C) last step: each micro-batch's mean − truth, in σ
    big_dev: np.ndarray  # (C,) the k·b batch's mean − truth, in σ
    gap: float  # mean |y_micro − y_big| on the last k·b samples, training mode
    mean_error: np.ndarray  # (2,) |running mean − truth| / σ at the end: micro, big
    var_ratio: np.ndarray  # (2,) running var / true var at the end
    final_mean: np.ndarray  # (2, C) running mean at the end: micro, big
    final_var: np.ndarray  # (2, C)
    batches_tracked: tuple[int, int]  # num_batches_tracked: k·steps vs steps


@one_thread()
def accumulation(setup: LabSetup, k: int, progress: Progress | None = None) -> AccumResult:
    """Simulation 6: the same samples as k micro-batches of b, or as one batch of k·b.

    Gradient accumulation adds up k backward passes before one optimizer step,
    but BatchNorm runs in each forward pass: it only ever sees b samples.
    """
    b = setup.batch_size
    check(setup)
    check(setup.with_(batch_size=k * b))
    ds = make_dataset(setup)
    big_idx = batch_indices(TRAIN_SAMPLES, k * b, setup.steps, setup.seed)  # (S, k·b)
    micro_idx = big_idx.reshape(-1, b)  # (S·k, b): the same samples, k at a time
    rs_micro = new_running(setup.C, setup.momentum, setup.convention)
    rs_big = new_running(setup.C, setup.momentum, setup.convention)
    run_stream(
        ds.train,
        micro_idx,
        setup.layout,
        setup.eps,
        [rs_micro],
        None if progress is None else (lambda f: progress(f / 2)),
    )
    run_stream(
        ds.train,
        big_idx,
        setup.layout,
        setup.eps,
        [rs_big],
        None if progress is None else (lambda f: progress(0.5 + f / 2)),
    )
    last = ds.train[big_idx[-1]]
    micro = normalize_batches(last.reshape(k, b, *setup.sample_shape), setup.layout, setup.eps)
    big = normalize_batches(last[None], setup.layout, setup.eps)
    gap = (micro.output.reshape(last.shape) - big.output[0]).abs().mean().item()
    return AccumResult(
        k,
        b,
        _np((micro.mean - ds.mean) / ds.std),
        _np((big.mean[0] - ds.mean) / ds.std),
        gap,
        np.asarray([((r.mean - ds.mean).abs() / ds.std).mean().item() for r in (rs_micro, rs_big)]),
        np.asarray([(r.var / ds.var.clamp_min(1e-12)).mean().item() for r in (rs_micro, rs_big)]),
        np.stack([_np(rs_micro.mean), _np(rs_big.mean)]),
        np.stack([_np(rs_micro.var), _np(rs_big.var)]),
        (rs_micro.num_batches_tracked, rs_big.num_batches_tracked),
    )


# ---- 7. synchronized BatchNorm -----------------------------------------------------------


def device_sums(batches: torch.Tensor, layout: str) -> torch.Tensor:
    """(N, b, *sample) -> (3, N, C) float64: Σx, Σx² and the count per channel of each batch.

    This is what each device sends to the all-reduce in synchronized BatchNorm.
    """
    N = batches.shape[0]
    c = LAYOUTS[layout].channel_axis
    b_shape = batches.shape[1:]
    C = b_shape[c]
    folded = batches.movedim(0, c).reshape(*b_shape[:c], N * C, *b_shape[c + 1 :])
    con = contract("batch", layout, tuple(folded.shape))
    xv = folded.double().reshape(con.expanded_shape)  # float64: Σx² − n·μ² must not cancel
    s = xv.sum(dim=con.reduce_dims).reshape(N, C)
    q = xv.square().sum(dim=con.reduce_dims).reshape(N, C)
    return torch.stack([s, q, torch.full_like(s, con.group_size)])


def reduced_stats(total: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Global mean, biased variance and count from all-reduced (Σx, Σx², n) along dim 0."""
    count = int(total[2].reshape(-1)[0].item())
    mean = total[0] / count
    var = (total[1] / count - mean.square()).clamp_min(0.0)
    return mean, var, count


def stats_holder(mean: torch.Tensor, var: torch.Tensor) -> RunningStats:
    """Given statistics in the form normalize() accepts them for evaluation: running buffers."""
    holder = RunningStats(mean.numel())
    holder.mean, holder.var = mean.float(), var.float()
    return holder


@dataclass(frozen=True)
class SyncStep:
    """One synchronized BatchNorm forward pass over K devices."""

    outputs: tuple[torch.Tensor, ...]  # each device's own batch, normalized with global stats
    mean: torch.Tensor  # (C,) float64 global mean
    var: torch.Tensor  # (C,) float64 global biased variance
    count: int  # values per channel over all devices
    sums: torch.Tensor  # (3, K, C) what each device sent


def sync_forward(
    xs: Sequence[torch.Tensor],
    layout: str,
    eps: float = 1e-5,
    running: RunningStats | None = None,
) -> SyncStep:
    """SyncBatchNorm in training mode: all-reduce Σx, Σx², n, then normalize locally.

    `xs` are the K devices' local batches (equal shapes); `running` is updated once
    with the global statistics, as every device's copy of the buffers is.
    """
    sums = device_sums(torch.stack(list(xs)), layout)
    mean, var, count = reduced_stats(sums.sum(dim=1))  # the all-reduce is a sum over devices
    if running is not None:
        running.update(mean, var, count)
    glob = stats_holder(mean, var)
    outs = tuple(
        normalize(x, "batch", layout, eps=eps, training=False, running=glob).output for x in xs
    )
    return SyncStep(outs, mean, var, count, sums)


@dataclass(frozen=True)
class SyncResult:
    """K devices with local batches of b: local statistics against synchronized ones."""

    devices: int
    b: int
    local_dev: np.ndarray  # (K, C) last step: each device's batch mean − truth, in σ
    sync_dev: np.ndarray  # (C,) synchronized mean − truth, in σ
    sums: np.ndarray  # (K, 3, C) what each device sent at the last step
    gap: float  # mean |y_local − y_sync| at the last step
    one_batch_diff: float  # max |y_sync − BatchNorm on one batch of K·b|
    mean_error: np.ndarray  # (2,) running mean error / σ at the end: device 0 local, synced
    var_ratio: np.ndarray  # (2,) running var / true var at the end
    final_mean: np.ndarray  # (2, C) running mean at the end: device 0 local, synced
    final_var: np.ndarray  # (2, C)


@one_thread()
def sync_demo(setup: LabSetup, devices: int, progress: Progress | None = None) -> SyncResult:
    """Simulation 7: K simulated devices, each with a local batch of b, for `steps` steps.

    Without synchronization every device normalizes with its own b samples and
    keeps its own buffers (DDP then copies device 0's); with it, they share the
    statistics of all K·b samples.
    """
    K, b = devices, setup.batch_size
    check(setup)
    check(setup.with_(batch_size=K * b))
    ds = make_dataset(setup)
    idx = batch_indices(TRAIN_SAMPLES, K * b, setup.steps, setup.seed)  # device k: columns k·b…
    rs_local = new_running(setup.C, setup.momentum, setup.convention)
    run_stream(ds.train, idx[:, :b], setup.layout, setup.eps, [rs_local])
    rs_sync = new_running(setup.C, setup.momentum, setup.convention)
    per_chunk = max(1, CHUNK // (K * b * math.prod(setup.sample_shape)))
    S = setup.steps
    for start in range(0, S, per_chunk):
        stop = min(S, start + per_chunk)
        x = ds.train[idx[start:stop]].reshape((stop - start) * K, b, *setup.sample_shape)
        sums = device_sums(x, setup.layout).reshape(3, stop - start, K, setup.C)
        mean, var, count = reduced_stats(sums.sum(dim=2))  # (s, C): all-reduce per step
        for s in range(stop - start):
            rs_sync.update(mean[s], var[s], count)
        if progress is not None:
            progress(stop / S)
    last = ds.train[idx[-1]].reshape(K, b, *setup.sample_shape)
    step = sync_forward(list(last), setup.layout, setup.eps)
    local = normalize_batches(last, setup.layout, setup.eps)
    one = normalize_batches(last.reshape(1, K * b, *setup.sample_shape), setup.layout, setup.eps)
    y_sync = torch.stack(step.outputs)
    return SyncResult(
        K,
        b,
        _np((local.mean - ds.mean) / ds.std),
        _np((step.mean.float() - ds.mean) / ds.std),
        _np(step.sums.permute(1, 0, 2)),
        (local.output - y_sync).abs().mean().item(),
        (y_sync.reshape(one.output.shape) - one.output).abs().max().item(),
        np.asarray(
            [((r.mean - ds.mean).abs() / ds.std).mean().item() for r in (rs_local, rs_sync)]
        ),
        np.asarray([(r.var / ds.var.clamp_min(1e-12)).mean().item() for r in (rs_local, rs_sync)]),
        np.stack([_np(rs_local.mean), _np(rs_sync.mean)]),
        np.stack([_np(rs_local.var), _np(rs_sync.var)]),
    )


# ---- 8 and 9: real nn.BatchNorm modules -------------------------------------------------

STATE_NAMES: tuple[str, ...] = (
    "weight",
    "bias",
    "running_mean",
    "running_var",
    "num_batches_tracked",
)


def torch_momentum(momentum: float, convention: str) -> float | None:
    """nn.BatchNorm's momentum for a lab convention (Keras 0.9 is PyTorch 0.1; None: cumulative)."""
    return batch_weight(momentum, convention)


def torch_batchnorm(
    layout: str, C: int, eps: float = 1e-5, momentum: float | None = 0.1
) -> nn.Module:
    """The registry's torch reference for BatchNorm in this layout (BatchNorm1d or BatchNorm2d)."""
    name = METHODS["batch"].torch_module[layout].split("(")[0].removeprefix("nn.")
    return getattr(nn, name)(C, eps=eps, momentum=momentum)


def to_torch_layout(x: torch.Tensor, layout: str) -> torch.Tensor:
    """Channels at dim 1, as torch's BatchNorm wants them: (B, T, C) -> (B, C, T)."""
    if METHODS["batch"].torch_channel_first and not LAYOUTS[layout].channel_first:
        return x.transpose(1, 2)
    return x


def from_torch_layout(x: torch.Tensor, layout: str) -> torch.Tensor:
    """The inverse of to_torch_layout (a transpose is its own inverse)."""
    return to_torch_layout(x, layout)


@dataclass(frozen=True)
class FreezeRow:
    """One mode/requires_grad combination and which state entries one step changed."""

    training: bool
    requires_grad: bool
    changed: tuple[bool, ...]  # in STATE_NAMES order


@dataclass(frozen=True)
class FreezeResult:
    """The four freezing setups, one row each."""

    names: tuple[str, ...]
    rows: tuple[FreezeRow, ...]
    lr: float


@one_thread()
def freeze_demo(setup: LabSetup, lr: float = 0.1) -> FreezeResult:
    """Simulation 8: one SGD step on a real nn.BatchNorm in each of the four freezing setups.

    γ and β only move when they require gradients; the running buffers only move
    in training mode, whatever requires_grad says.
    """
    check(setup)
    ds = make_dataset(setup)
    x = to_torch_layout(ds.train[: setup.batch_size], setup.layout)
    rows = []
    for training in (True, False):
        for requires_grad in (True, False):
            bn = torch_batchnorm(
                setup.layout, setup.C, setup.eps, torch_momentum(setup.momentum, setup.convention)
            )
            bn.train(training)
            for p in bn.parameters():
                p.requires_grad_(requires_grad)
            opt = torch.optim.SGD(bn.parameters(), lr=lr)
            before = {k: v.clone() for k, v in bn.state_dict().items()}
            # the input carries a gradient, as if a trainable layer came first: backward always
            # has a path, even when γ and β are frozen
            xin = x.clone().requires_grad_(True)
            loss = (bn(xin) - 1.0).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            after = bn.state_dict()
            changed = tuple(not torch.equal(before[k], after[k]) for k in STATE_NAMES)
            rows.append(FreezeRow(training, requires_grad, changed))
    return FreezeResult(STATE_NAMES, tuple(rows), lr)


@dataclass(frozen=True)
class StateEntry:
    """One entry of a BatchNorm state_dict."""

    key: str
    kind: str  # "parameter" or "buffer"
    shape: tuple[int, ...]
    values: np.ndarray  # flattened


CHECKPOINT_VARIANTS: tuple[str, ...] = (
    "trained layer",
    "checkpoint with buffers",
    "checkpoint without buffers",
)


@dataclass(frozen=True)
class CheckpointResult:
    """A trained nn.BatchNorm saved, reloaded with and without its buffers, then evaluated."""

    entries: tuple[StateEntry, ...]
    missing: tuple[str, ...]  # what load_state_dict(strict=False) reports as missing
    variants: tuple[str, ...]
    out_mean: np.ndarray  # (3, C) per-channel mean of evaluation outputs on held-out data
    out_std: np.ndarray  # (3, C)
    steps: int  # optimizer steps the layer was trained for
    momentum: float | None  # nn.BatchNorm's momentum


@one_thread()
def checkpoint_demo(setup: LabSetup, lr: float = 0.1) -> CheckpointResult:
    """Simulation 9: train a real nn.BatchNorm, save its state_dict, reload it two ways.

    The layer learns γ ≈ 2 and β ≈ 1 (its target is 2·standardized x + 1) while its
    buffers track the batches; a checkpoint without the buffers evaluates with the
    fresh running mean 0 and variance 1.
    """
    check(setup)
    ds = make_dataset(setup)
    steps = min(setup.steps, MODULE_STEPS)
    momentum = torch_momentum(setup.momentum, setup.convention)
    bn = torch_batchnorm(setup.layout, setup.C, setup.eps, momentum)
    opt = torch.optim.SGD(bn.parameters(), lr=lr)
    mu, sd = ds.channel_view(ds.mean), ds.channel_view(ds.std)
    for rows in batch_indices(TRAIN_SAMPLES, setup.batch_size, steps, setup.seed):
        x = ds.train[rows]
        target = 2.0 * (x - mu) / sd + 1.0
        loss = bn(to_torch_layout(x, setup.layout)) - to_torch_layout(target, setup.layout)
        opt.zero_grad()
        loss.square().mean().backward()
        opt.step()
    buf = io.BytesIO()
    torch.save(bn.state_dict(), buf)
    buf.seek(0)
    saved = torch.load(buf, weights_only=True)
    params = {k for k, _ in bn.named_parameters()}
    entries = tuple(
        StateEntry(k, "parameter" if k in params else "buffer", tuple(v.shape), _np(v.reshape(-1)))
        for k, v in saved.items()
    )
    full = torch_batchnorm(setup.layout, setup.C, setup.eps, momentum)
    full.load_state_dict(saved)
    partial = torch_batchnorm(setup.layout, setup.C, setup.eps, momentum)
    report = partial.load_state_dict({k: v for k, v in saved.items() if k in params}, strict=False)
    means, stds = [], []
    held = to_torch_layout(ds.held_out, setup.layout)
    with torch.no_grad():
        for module in (bn, full, partial):
            module.eval()
            y = from_torch_layout(module(held), setup.layout)
            st = normalize(y, "batch", setup.layout)  # per-channel mean/var of the outputs
            assert st.mean is not None
            means.append(_np(st.mean.reshape(-1)))
            stds.append(_np(st.var.reshape(-1).sqrt()))
    return CheckpointResult(
        entries,
        tuple(report.missing_keys),
        CHECKPOINT_VARIANTS,
        np.stack(means),
        np.stack(stds),
        steps,
        momentum,
    )
