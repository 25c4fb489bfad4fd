"""Synchronized BatchNorm: the lab's simulation against a real torch.distributed run on gloo.

torch's SyncBatchNorm only runs on GPUs, so each of K local processes does what
it does on a GPU: compute per-channel Σx, Σx² and the count of its own batch,
all-reduce them over the gloo backend, normalize its own batch with the global
mean and variance, and update its running buffers with the unbiased global
variance (as batch_norm_gather_stats_with_counts does). The simulation must
agree with every process, step after step.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn import functional as F

from normviz import RunningStats
from normviz.batchnorm import lab, stream, sync

MOMENTUM = 0.1
EPS = 1e-5


def _channels_first(x: torch.Tensor, layout: str) -> torch.Tensor:
    return x.transpose(1, 2) if layout == "BTC" else x


def _worker(rank: int, world: int, init: str, jobs: list, out: str) -> None:
    """One device: its slice of every step's batch, all-reduced over gloo, for each job."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    try:
        results = []
        for layout, batches in jobs:  # batches: (steps, K, b, *sample)
            C = batches.shape[-1] if layout == "BTC" else batches.shape[3]
            running_mean, running_var = torch.zeros(C), torch.ones(C)
            outputs = []
            for step in batches:
                x = _channels_first(step[rank], layout)  # (b, C, ...)
                dims = [d for d in range(x.dim()) if d != 1]
                xd = x.double()
                sums = torch.stack(
                    [xd.sum(dims), xd.square().sum(dims), torch.full((C,), x.numel() / C).double()]
                )
                dist.all_reduce(sums, op=dist.ReduceOp.SUM)
                n = sums[2, 0]
                mean = sums[0] / n
                var = sums[1] / n - mean.square()
                y = F.batch_norm(x, mean.float(), var.float(), training=False, eps=EPS)
                running_mean = (1 - MOMENTUM) * running_mean + MOMENTUM * mean.float()
                running_var = (1 - MOMENTUM) * running_var + MOMENTUM * (var * n / (n - 1)).float()
                outputs.append(_channels_first(y, layout))
            results.append({"y": torch.stack(outputs), "mean": running_mean, "var": running_var})
        torch.save(results, Path(out) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


SETUPS = (
    lab.LabSetup(layout="BTC", sample_shape=(5, 6), batch_size=3, steps=4),
    lab.LabSetup(layout="NCHW", sample_shape=(4, 3, 2), batch_size=2, steps=4),
)


def test_simulation_equals_gloo_all_reduce(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    K = 2  # processes (two devices all-reduce as K do); one group runs every job
    jobs = []
    for setup in SETUPS:
        ds = stream.make_dataset(setup)
        idx = stream.batch_indices(lab.TRAIN_SAMPLES, K * setup.batch_size, setup.steps, setup.seed)
        jobs.append(
            (
                setup.layout,
                ds.train[idx].reshape(setup.steps, K, setup.batch_size, *setup.sample_shape),
            )
        )
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")  # loopback only, no network needed
    init = f"file://{tmp_path / 'store'}"
    # forked, not spawned: a spawned child imports torch and this module again (seconds
    # each on a busy machine); a forked one has them. Each sets one thread first, as
    # DataLoader's forked workers do, and all-reduces over its own fresh gloo group
    mp.start_processes(
        _worker, args=(K, init, jobs, str(tmp_path)), nprocs=K, join=True, start_method="fork"
    )
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in range(K)]

    for j, (setup, (layout, batches)) in enumerate(zip(SETUPS, jobs, strict=True)):
        rs = RunningStats(setup.C, MOMENTUM)
        for s in range(setup.steps):
            step = sync.sync_forward(list(batches[s]), layout, EPS, rs)
            for r in range(K):
                torch.testing.assert_close(
                    step.outputs[r], ranks[r][j]["y"][s], atol=1e-5, rtol=1e-5
                )
        for r in range(K):  # every device holds the same buffers, equal to the simulation's
            torch.testing.assert_close(rs.mean, ranks[r][j]["mean"], atol=1e-6, rtol=1e-5)
            torch.testing.assert_close(rs.var, ranks[r][j]["var"], atol=1e-6, rtol=1e-5)
        assert step.count == K * setup.n
        # and the devices' outputs differ from what each would get alone (the sync matters)
        alone = stream.normalize_batches(batches[-1], layout, EPS).output
        assert (alone - torch.stack(step.outputs)).abs().max() > 1e-3
