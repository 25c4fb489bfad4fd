"""Gradient accumulation: k micro-batches of b per optimizer step, against one batch of k·b."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from normviz.batchnorm import stream
from normviz.batchnorm.lab import TRAIN_SAMPLES, LabSetup, check, new_running, one_thread
from normviz.batchnorm.plot import Spread, spread_figure
from normviz.batchnorm.stream import Fraction, phase
from normviz.knobs import Knob, Value
from normviz.sections import Progress, Section

INTRO = (
    "Gradient accumulation runs k small forward and backward passes and then takes one "
    "optimizer step, to imitate a batch of k·b. The gradients add up as if the batch "
    "were large, but BatchNorm normalizes inside each forward pass: it only ever sees b "
    "samples, with b-sized noise, and it updates its buffers k times per step."
)
ACCUM = Knob("accum", 4, lo=1, hi=16, label="Micro-batches per optimizer step (k)")


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

    @property
    def spread(self) -> Spread:
        """The figure: the k micro-batch means BatchNorm used, against the k·b batch mean."""
        kb = self.k * self.b
        title = f"{self.k} accumulated micro-batches of {self.b}: one optimizer step"
        small = f"micro-batch of {self.b} (what BatchNorm sees)"
        return self.micro_dev, self.big_dev, small, f"one batch of {kb}", title


@one_thread()
def accumulation(setup: LabSetup, k: int, progress: Fraction | None = None) -> AccumResult:
    """The same samples as k micro-batches of b, or as one batch of k·b.

    Gradient accumulation adds up k backward passes before one optimizer step,
    but BatchNorm runs in each forward pass: it only ever sees b samples.
    """
    b = setup.batch_size
    check(setup)
    check(setup.with_(batch_size=k * b))
    ds = stream.make_dataset(setup)
    big_idx = stream.batch_indices(TRAIN_SAMPLES, k * b, setup.steps, setup.seed)  # (S, k·b)
    micro_idx = big_idx.reshape(-1, b)  # (S·k, b): the same samples, k at a time
    rs_micro = new_running(setup.C, setup.momentum, setup.convention)
    rs_big = new_running(setup.C, setup.momentum, setup.convention)
    stream.run_stream(
        ds.train,
        micro_idx,
        setup.layout,
        setup.eps,
        [rs_micro],
        None if progress is None else (lambda f: progress(f / 2)),
    )
    stream.run_stream(
        ds.train,
        big_idx,
        setup.layout,
        setup.eps,
        [rs_big],
        None if progress is None else (lambda f: progress(0.5 + f / 2)),
    )
    last = ds.train[big_idx[-1]]
    micro_batches = last.reshape(k, b, *setup.sample_shape)
    micro = stream.normalize_batches(micro_batches, setup.layout, setup.eps)
    big = stream.normalize_batches(last[None], setup.layout, setup.eps)
    gap = (micro.output.reshape(last.shape) - big.output[0]).abs().mean().item()
    return AccumResult(
        k,
        b,
        stream.to_np((micro.mean - ds.mean) / ds.std),
        stream.to_np((big.mean[0] - ds.mean) / ds.std),
        gap,
        np.asarray([((r.mean - ds.mean).abs() / ds.std).mean().item() for r in (rs_micro, rs_big)]),
        np.asarray([(r.var / ds.var.clamp_min(1e-12)).mean().item() for r in (rs_micro, rs_big)]),
        np.stack([stream.to_np(rs_micro.mean), stream.to_np(rs_big.mean)]),
        np.stack([stream.to_np(rs_micro.var), stream.to_np(rs_big.var)]),
        (rs_micro.num_batches_tracked, rs_big.num_batches_tracked),
    )


def run(setup: LabSetup, knobs: Mapping[str, Value], progress: Progress) -> AccumResult:
    """The section: k from its knob, b and the steps from the lab."""
    return accumulation(
        setup, int(knobs["accum"]), phase(progress, "Feeding micro-batches and full batches…")
    )


figure = spread_figure


def table(res: AccumResult) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "setup": [f"{res.k} × {res.b} accumulated", f"1 × {res.k * res.b}"],
            "samples per BatchNorm call": [res.b, res.k * res.b],
            "num_batches_tracked": list(res.batches_tracked),
            "running mean error (σ)": res.mean_error,
            "running var / true var": res.var_ratio,
        }
    )


def notes(res: AccumResult) -> Sequence[str]:
    return (
        f"Same samples, training mode: mean |y_micro − y_full| = {res.gap:.4g} on the last step.",
    )


SECTION = Section(
    "accumulation",
    "Accumulation",
    INTRO,
    run,
    knobs=(ACCUM,),
    figure=figure,
    table=table,
    notes=notes,
)
