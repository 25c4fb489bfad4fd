"""BatchNorm as a regularizer: the same sample, different batch-mates, different outputs.

In training mode a sample is normalized with the statistics of its batch, so its
output depends on which other samples were drawn with it. One held-out sample (the
probe) is put into many random batches of training samples; its normalized values
are collected, batch size by batch size.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch

from normviz import sources, style
from normviz.batchnorm import stream
from normviz.batchnorm.lab import CHUNK, TRAIN_SAMPLES, LabSetup, check, one_thread
from normviz.batchnorm.plot import TRUTH, rounded
from normviz.batchnorm.sync import stats_holder
from normviz.core import normalize
from normviz.figures.spec import Spec, trace
from normviz.knobs import Value
from normviz.sections import Progress, Section

INTRO = (
    "In training mode a sample never gets the same output twice: it is normalized with "
    "the mean and variance of its batch, and those depend on which other samples it was "
    "drawn with. Below, one held-out sample goes into many random batches of training "
    "samples; each box is the spread of one of its values, per batch size. This noise is "
    "a regularizer, much as dropout's is: "
    f"{sources.cite('ioffe2015')} found that networks with BatchNorm needed less dropout, "
    "or none. Evaluation mode, with running statistics, gives the sample one fixed output."
)
SIZES: tuple[int, ...] = (2, 4, 8, 16, 32, 64)
DRAWS = 200  # random batches per batch size


@dataclass(frozen=True)
class Noise:
    """The probe's outputs over random batches, per batch size."""

    sizes: tuple[int, ...]
    values: np.ndarray  # (len(sizes), draws): the probe's first value in channel 0
    spread: np.ndarray  # (len(sizes),) std over draws, averaged over all the probe's values
    eval_value: float  # the same value in evaluation mode (training-set statistics)
    current_b: int  # the lab's batch size
    draws: int


def _draws(setup: LabSetup) -> int:
    """Batches per size: DRAWS, fewer for large samples (one normalize() call stays small)."""
    per_sample = math.prod(setup.sample_shape)
    return max(20, min(DRAWS, 4 * CHUNK // (max(SIZES) * per_sample)))


@one_thread()
def batch_noise(setup: LabSetup) -> Noise:
    """The probe (held-out sample 0) in `draws` random batches of each size, training mode."""
    check(setup)
    sizes = tuple(sorted({*SIZES, setup.batch_size} - {1}))
    draws = _draws(setup)
    ds = stream.make_dataset(setup)
    probe = ds.held_out[:1]
    g = torch.Generator().manual_seed(setup.seed)
    first = [0] * len(setup.sample_shape)  # position 0 of channel 0, in either layout
    values, spread = [], []
    for b in sizes:
        mates = torch.randint(0, TRAIN_SAMPLES, (draws, b - 1), generator=g)
        batches = torch.cat([probe.expand(draws, *probe.shape), ds.train[mates]], dim=1)
        out = stream.normalize_batches(batches, setup.layout, setup.eps).output[:, 0]
        values.append(stream.to_np(out[(slice(None), *first)]))
        spread.append(out.double().std(dim=0).mean().item())
    ev = normalize(
        probe,
        "batch",
        setup.layout,
        eps=setup.eps,
        training=False,
        running=stats_holder(ds.mean, ds.var),
    )
    eval_value = float(ev.output[(0, *first)])
    return Noise(sizes, np.stack(values), np.asarray(spread), eval_value, setup.batch_size, draws)


def run(setup: LabSetup, knobs: Mapping[str, Value], progress: Progress) -> Noise:
    progress(0.0, "Drawing random batch-mates…")
    return batch_noise(setup)


def figure(res: Noise, presenter: bool = False) -> go.Figure:
    """One box per batch size: the probe's value over random batches; the eval value dashed."""
    fig = Spec()
    for b, vals in zip(res.sizes, res.values, strict=True):
        fig.add_trace(
            trace(
                "box",
                y=rounded(vals, 4),
                name=f"b = {b}",
                boxpoints=False,
                marker={"color": style.HIGHLIGHT if b == res.current_b else style.PALETTE[0]},
                showlegend=False,
            )
        )
    fig.add_hline(y=res.eval_value, line={"color": TRUTH, "dash": "dash", "width": 2})
    fig.add_hline_note(res.eval_value, "evaluation mode", "top left")
    fig.update_xaxes(title="batch size (the lab's is highlighted)")
    fig.update_yaxes(title="the sample's first value in channel 0, normalized")
    fig.update_layout(title=f"One sample in {res.draws} random batches, per batch size")
    return style.apply(fig, presenter, height=440).figure()


def table(res: Noise) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "batch size": list(res.sizes),
            "lowest": res.values.min(axis=1),
            "highest": res.values.max(axis=1),
            "std (this value)": res.values.std(axis=1),
            "std (all the sample's values, averaged)": res.spread,
        }
    )


def notes(res: Noise) -> Sequence[str]:
    i = res.sizes.index(res.current_b)
    v = res.values[i]
    first, last = float(res.spread[0]), float(res.spread[-1])
    trend = "falls" if last < first else "does not fall"
    return (
        f"With b = {res.current_b}, the same sample's first value in channel 0 comes out "
        f"anywhere from {v.min():.3g} to {v.max():.3g} over {res.draws} batches (standard "
        f"deviation {v.std():.3g}), only because its batch-mates change. In evaluation mode, "
        "with the training set's statistics standing in for the running ones, it is always "
        f"{res.eval_value:.3g}.",
        f"Averaged over all the sample's values, the spread {trend} from {first:.3g} at "
        f"b = {res.sizes[0]} to {last:.3g} at b = {res.sizes[-1]}.",
    )


SECTION = Section("noise", "Batch noise", INTRO, run, figure=figure, table=table, notes=notes)
