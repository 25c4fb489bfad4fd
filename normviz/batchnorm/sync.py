"""Synchronized BatchNorm: K devices all-reduce Σx, Σx² and the count, then normalize locally.

torch's nn.SyncBatchNorm all-gathers (mean, invstd, count) instead; both give the same
global statistics (tests/test_batchnorm_syncbn_gloo.py runs this reduction over gloo).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from normviz.batchnorm import stream
from normviz.batchnorm.lab import CHUNK, TRAIN_SAMPLES, LabSetup, check, new_running, one_thread
from normviz.batchnorm.plot import Spread, spread_figure
from normviz.batchnorm.stream import Fraction, phase
from normviz.core import contract, normalize
from normviz.knobs import Knob, Value
from normviz.layouts import LAYOUTS
from normviz.running import RunningStats
from normviz.sections import Progress, Section

INTRO = (
    "With data parallelism each device normalizes its own local batch of b. Synchronized "
    "BatchNorm makes every device normalize with the mean and variance of all K·b samples: "
    "exactly one big batch. Here each device sends three numbers per channel (Σx, Σx² and "
    "the count) to an all-reduce (a sum over devices). torch's `nn.SyncBatchNorm` "
    "exchanges a different triple: it all-gathers each device's (mean, 1/√(var + ε), "
    "count) and combines them into the same global mean and variance, so the two are "
    "equivalent formulations of one computation. What the test suite checks: this "
    "reduction, run by real processes all-reducing over torch.distributed's gloo backend "
    "on the CPU, gives the simulation's outputs and running buffers at every step. "
    "`nn.SyncBatchNorm` itself is not run, since it needs GPUs."
)
DEVICES = Knob("devices", 4, lo=1, hi=16, label="Devices (K)")


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

    @property
    def spread(self) -> Spread:
        """The figure: each device's local batch mean against the synchronized mean."""
        local = f"one device's local batch of {self.b}"
        title = f"{self.devices} devices × {self.b} samples: one training step"
        pooled = f"synchronized over {self.devices} devices"
        return self.local_dev, self.sync_dev, local, pooled, title


@one_thread()
def sync_demo(setup: LabSetup, devices: int, progress: Fraction | None = None) -> SyncResult:
    """K simulated devices, each with a local batch of b, for `steps` steps.

    Without synchronization every device normalizes with its own b samples and
    keeps its own buffers (DDP then copies device 0's); with it, they share the
    statistics of all K·b samples.
    """
    K, b = devices, setup.batch_size
    check(setup)
    check(setup.with_(batch_size=K * b))
    ds = stream.make_dataset(setup)
    # device k: columns k·b…
    idx = stream.batch_indices(TRAIN_SAMPLES, K * b, setup.steps, setup.seed)
    rs_local = new_running(setup.C, setup.momentum, setup.convention)
    stream.run_stream(ds.train, idx[:, :b], setup.layout, setup.eps, [rs_local])
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
    local = stream.normalize_batches(last, setup.layout, setup.eps)
    one_batch = last.reshape(1, K * b, *setup.sample_shape)
    one = stream.normalize_batches(one_batch, setup.layout, setup.eps)
    y_sync = torch.stack(step.outputs)
    return SyncResult(
        K,
        b,
        stream.to_np((local.mean - ds.mean) / ds.std),
        stream.to_np((step.mean.float() - ds.mean) / ds.std),
        stream.to_np(step.sums.permute(1, 0, 2)),
        (local.output - y_sync).abs().mean().item(),
        (y_sync.reshape(one.output.shape) - one.output).abs().max().item(),
        np.asarray(
            [((r.mean - ds.mean).abs() / ds.std).mean().item() for r in (rs_local, rs_sync)]
        ),
        np.asarray([(r.var / ds.var.clamp_min(1e-12)).mean().item() for r in (rs_local, rs_sync)]),
        np.stack([stream.to_np(rs_local.mean), stream.to_np(rs_sync.mean)]),
        np.stack([stream.to_np(rs_local.var), stream.to_np(rs_sync.var)]),
    )


def run(setup: LabSetup, knobs: Mapping[str, Value], progress: Progress) -> SyncResult:
    """The section: K from its knob, b and the steps from the lab."""
    text = "All-reducing the devices' sums…"
    return sync_demo(setup, int(knobs["devices"]), phase(progress, text))


figure = spread_figure


def table(res: SyncResult) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "buffers": ["device 0, local (DDP copies them)", "synchronized"],
            "running mean error (σ)": res.mean_error,
            "running var / true var": res.var_ratio,
        }
    )


def notes(res: SyncResult) -> Sequence[str]:
    rows = "\n".join(
        f"| {k} | {row[0, 0]:.6g} | {row[1, 0]:.6g} | {int(row[2, 0])} |"
        for k, row in enumerate(res.sums)
    )
    return (
        f"Last step: mean |y_local − y_sync| = {res.gap:.4g}; synchronized vs one batch of "
        f"{res.devices * res.b}: max difference {res.one_batch_diff:.1e} (float rounding).",
        "What each device sends (channel 0, last step):\n\n"
        "| device | Σx | Σx² | count |\n|---:|---:|---:|---:|\n" + rows,
    )


SECTION = Section(
    "sync", "SyncBN", INTRO, run, knobs=(DEVICES,), figure=figure, table=table, notes=notes
)
