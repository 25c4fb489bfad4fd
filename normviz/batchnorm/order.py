"""Sorted data: batches that each hold one cluster, against shuffled batches."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch

from normviz import style
from normviz.batchnorm import stream
from normviz.batchnorm.lab import TRAIN_SAMPLES, LabSetup, check, new_running, one_thread
from normviz.batchnorm.plot import BATCH, RUNNING, frame, level, steps_trace
from normviz.batchnorm.stream import Fraction, phase
from normviz.core import normalize
from normviz.figures.spec import Spec
from normviz.knobs import Value
from normviz.sections import Progress, Section

CLUSTERS = 4  # sub-populations in the non-i.i.d. demo
CLUSTER_SPREAD = 1.5  # cluster centres sit up to this many σ from the overall mean
INTRO = (
    f"The training set is split into {CLUSTERS} clusters. If the data arrive "
    "sorted, every batch holds a single cluster, and its statistics jump from cluster to "
    "cluster. The running mean averages the jumps out, but the running variance only "
    "ever sees the spread *inside* a cluster and comes out too small. Worse, in training "
    "each batch is centred on its own cluster, so the network learns on outputs that "
    "evaluation never reproduces. Shuffling fixes all three."
)

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
    channel: int = 0  # the channel the figure follows (a view: no rerun)


def clustered_dataset(setup: LabSetup) -> stream.Dataset:
    """The training set split into CLUSTERS sub-populations: sample i is in cluster i mod K.

    Each cluster's centre sits up to CLUSTER_SPREAD σ from the overall mean, per channel.
    """
    ds = stream.make_dataset(setup)
    g = np.random.default_rng(setup.seed + 1)
    centres = torch.from_numpy(g.uniform(-CLUSTER_SPREAD, CLUSTER_SPREAD, (CLUSTERS, setup.C)))
    cluster = torch.arange(TRAIN_SAMPLES) % CLUSTERS
    train = ds.train + ds.per_sample_view((centres.float() * ds.std)[cluster])
    whole = normalize(train, "batch", setup.layout)
    assert whole.mean is not None
    mean, var = whole.mean.reshape(-1), whole.var.reshape(-1)
    return stream.Dataset(setup.layout, train, ds.held_out, mean, var)


def order_indices(setup: LabSetup) -> tuple[torch.Tensor, torch.Tensor]:
    """(steps, b) indices into clustered_dataset: one cluster per batch (taking turns), shuffled."""
    b, steps, seed = setup.batch_size, setup.steps, setup.seed
    within = stream.batch_indices(TRAIN_SAMPLES // CLUSTERS, b, steps, seed)
    turn = torch.arange(setup.steps) % CLUSTERS
    one_cluster = within * CLUSTERS + turn[:, None]  # batch s: cluster s mod K only
    return one_cluster, stream.batch_indices(TRAIN_SAMPLES, b, steps, seed)


@one_thread()
def order_demo(setup: LabSetup, progress: Fraction | None = None) -> OrderResult:
    """Sorted (single-cluster) batches against shuffled ones.

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
        tr = stream.run_stream(
            train,
            idx,
            setup.layout,
            setup.eps,
            [rs],
            None if progress is None else (lambda f, i=i: progress((i + f) / 2)),
        )
        b_mean.append(stream.to_np(tr.batch_mean))
        r_mean.append(stream.to_np(tr.running_mean[0]))
        f_var.append(stream.to_np(rs.var))
        noise.append(((tr.batch_mean - t_mean) / t_std).std(dim=0, correction=0).mean().item())
        m_err.append(((rs.mean - t_mean).abs() / t_std).mean().item())
        v_ratio.append((rs.var / t_var.clamp_min(1e-12)).mean().item())
        last = train[idx[-CLUSTERS:]]  # (K, b, ...)
        y_train = stream.normalize_batches(last, setup.layout, setup.eps).output
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
        stream.to_np(t_mean),
        stream.to_np(t_var),
        np.asarray(noise),
        np.asarray(m_err),
        np.asarray(v_ratio),
        np.asarray(gap),
        CLUSTERS,
    )


def run(setup: LabSetup, knobs: Mapping[str, Value], progress: Progress) -> OrderResult:
    """The section: both orders at the lab's batch size, steps and momentum."""
    return order_demo(setup, phase(progress, "Feeding sorted and shuffled batches…"))


def figure(res: OrderResult, presenter: bool = False) -> go.Figure:
    """Batch means and running mean of one channel, for each batch order."""
    channel = res.channel
    fig = Spec.grid(
        len(res.orders),
        1,
        tuple(f"{o}: channel {channel}" for o in res.orders),
        shared_xaxes=True,
        shared_yaxes=True,
        vertical_spacing=0.1,
    )
    S = res.batch_mean.shape[1]
    for i, _ in enumerate(res.orders):
        row = i + 1
        fig.add_trace(
            steps_trace(
                res.batch_mean[i, :, channel],
                "batch mean",
                mode="markers",
                marker={"color": BATCH, "size": 5, "opacity": 0.7},
                legendgroup="batch",
                showlegend=i == 0,
            ),
            row,
            1,
        )
        fig.add_trace(
            steps_trace(
                res.running_mean[i, :, channel],
                "running mean",
                mode="lines",
                line={"color": RUNNING, "width": 3},
                legendgroup="running",
                showlegend=i == 0,
            ),
            row,
            1,
        )
        fig.add_trace(level(S, res.true_mean[channel], "training set mean", i == 0), row, 1)
    fig.update_xaxes(title="training step (batch)", row=len(res.orders), col=1)
    fig.update_layout(title="Sorted data: every batch is one cluster", legend=style.LEGEND_BELOW)
    return style.apply(fig, presenter, height=560).figure()


COLUMNS = (
    ("batches", "orders"),
    ("batch mean spread (σ)", "batch_noise"),
    ("running mean error (σ)", "mean_error"),
    ("running var / true var", "var_ratio"),
    ("mean |y_train − y_eval|", "gap"),
)


def table(res: OrderResult) -> pd.DataFrame:
    return frame(res, COLUMNS)


def notes(res: OrderResult) -> Sequence[str]:
    sorted_, shuffled = res.orders
    small = "smaller" if res.var_ratio[0] < res.var_ratio[1] else "not smaller"
    large = "larger" if res.gap[0] > res.gap[1] else "not larger"
    return (
        f"With *{sorted_}* the running variance is {res.var_ratio[0]:.3g} of the true one, "
        f"{small} than *{shuffled}* ({res.var_ratio[1]:.3g}), and the train/eval gap "
        f"({res.gap[0]:.3g}) is {large} than shuffled ({res.gap[1]:.3g}).",
    )


SECTION = Section("order", "Sorted data", INTRO, run, figure=figure, table=table, notes=notes)
