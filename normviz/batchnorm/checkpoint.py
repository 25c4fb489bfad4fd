"""Checkpoints: a trained nn.BatchNorm saved and reloaded with and without its buffers."""

from __future__ import annotations

import io
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch

from normviz import style
from normviz.batchnorm.lab import TRAIN_SAMPLES, LabSetup, check, one_thread
from normviz.batchnorm.plot import rounded
from normviz.batchnorm.stream import (
    batch_indices,
    from_torch_layout,
    make_dataset,
    to_np,
    to_torch_layout,
    torch_batchnorm,
    torch_momentum,
)
from normviz.core import normalize
from normviz.figures.spec import Spec, trace
from normviz.knobs import Value
from normviz.sections import Progress, Section

INTRO = (
    "A BatchNorm layer's state is more than γ and β: `running_mean`, `running_var` and "
    "`num_batches_tracked` are buffers, and a checkpoint must carry them. A real layer is "
    "trained below (it learns γ ≈ 2, β ≈ 1), saved, and loaded twice. Without its buffers "
    "it evaluates with mean 0 and variance 1, so the raw channel offsets pass straight "
    "through."
)
MODULE_STEPS = 200  # optimizer steps of the real nn.BatchNorm in the checkpoint demo


@dataclass(frozen=True)
class StateEntry:
    """One entry of a BatchNorm state_dict."""

    key: str
    kind: str  # "parameter" or "buffer"
    shape: tuple[int, ...]
    values: np.ndarray  # flattened


@dataclass(frozen=True)
class LoadCase:
    """What strict `load_state_dict` does with a checkpoint that lacks num_batches_tracked."""

    metadata: bool  # the dict still carries torch's `_metadata` (the BatchNorm version, 2)
    loaded: bool  # torch accepted it
    message: str  # torch's error, one line ("" when it loaded)
    counter: int | None  # num_batches_tracked of the loaded layer (None: not loaded)


def load_without_counter(
    saved: Mapping[str, torch.Tensor], build: Callable[[], torch.nn.Module]
) -> tuple[LoadCase, ...]:
    """Drop num_batches_tracked from a state_dict and load it strictly, without and with
    the `_metadata` torch.save keeps. `build()` makes a fresh BatchNorm layer.

    A dict rebuilt by a comprehension loses `_metadata`; torch then reads the entry as a
    checkpoint written before BatchNorm had the counter (version < 2) and fills it in.
    """
    meta = getattr(saved, "_metadata", None)
    cases = []
    for keep in (False, True):
        sd: OrderedDict[str, torch.Tensor] = OrderedDict(
            (k, v) for k, v in saved.items() if k != "num_batches_tracked"
        )
        if keep and meta is not None:
            sd._metadata = meta  # type: ignore[attr-defined]
        layer = build()
        try:
            layer.load_state_dict(sd)
        except RuntimeError as e:
            cases.append(LoadCase(keep, False, " ".join(str(e).split()), None))
        else:
            cases.append(LoadCase(keep, True, "", int(layer.num_batches_tracked)))
    return tuple(cases)


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
    no_counter: tuple[LoadCase, ...] = ()  # strict loads without the counter: no _metadata, with


@one_thread()
def checkpoint_demo(setup: LabSetup, lr: float = 0.1) -> CheckpointResult:
    """Train a real nn.BatchNorm, save its state_dict, reload it two ways.

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
        StateEntry(
            k, "parameter" if k in params else "buffer", tuple(v.shape), to_np(v.reshape(-1))
        )
        for k, v in saved.items()
    )

    def build() -> torch.nn.Module:
        return torch_batchnorm(setup.layout, setup.C, setup.eps, momentum)

    no_counter = load_without_counter(saved, build)
    full = build()
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
            means.append(to_np(st.mean.reshape(-1)))
            stds.append(to_np(st.var.reshape(-1).sqrt()))
    return CheckpointResult(
        entries,
        tuple(report.missing_keys),
        CHECKPOINT_VARIANTS,
        np.stack(means),
        np.stack(stds),
        steps,
        momentum,
        no_counter,
    )


def run(setup: LabSetup, knobs: Mapping[str, Value], progress: Progress) -> CheckpointResult:
    """The section: train, save, reload two ways, evaluate."""
    progress(0.0, "Training a real nn.BatchNorm and saving it…")
    return checkpoint_demo(setup)


def figure(res: CheckpointResult, presenter: bool = False) -> go.Figure:
    """Per-channel evaluation outputs of the layer and its two reloads."""
    fig = Spec()
    C = res.out_mean.shape[1]
    colours = (style.PALETTE[0], style.PALETTE[2], style.PALETTE[5])
    for i, name in enumerate(res.variants):
        fig.add_trace(
            trace(
                "bar",
                x=list(range(C)),
                y=rounded(res.out_mean[i]),
                error_y={"type": "data", "array": rounded(res.out_std[i]), "visible": True},
                name=name,
                marker={  # a pattern per reload: colour is not the only signal
                    "color": colours[i % len(colours)],
                    "pattern": {"shape": style.PATTERNS[i % len(style.PATTERNS)]},
                },
            )
        )
    fig.update_xaxes(title="channel", tickmode="linear", dtick=max(1, C // 16))
    fig.update_yaxes(title="evaluation output: mean ± std")
    fig.update_layout(
        barmode="group",
        title="Held-out data through the reloaded layers (evaluation mode)",
        legend=style.LEGEND_BELOW,
    )
    return style.apply(fig, presenter, height=440).figure()


def table(res: CheckpointResult) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "key": [e.key for e in res.entries],
            "kind": [e.kind for e in res.entries],
            "shape": [str(e.shape) for e in res.entries],
            "first values": [
                ", ".join(f"{v:.3g}" for v in e.values[:4]) + (" …" if e.values.size > 4 else "")
                for e in res.entries
            ],
        }
    )


def _case_text(case: LoadCase) -> str:
    """One strict load of a checkpoint without num_batches_tracked, as torch answered it."""
    how = "with its `_metadata` kept"
    if not case.metadata:
        how = "rebuilt as a plain dict (no `_metadata`)"
    if case.loaded:
        return (
            f"- {how}: it loads, and num_batches_tracked = {case.counter}: torch took it for "
            "a checkpoint older than the counter (BatchNorm version < 2) and filled in the "
            "fresh layer's value."
        )
    return f"- {how}: torch refuses it: `{case.message}`"


def notes(res: CheckpointResult) -> Sequence[str]:
    filled = "num_batches_tracked" not in res.missing
    out = [
        "Loading only the parameters with `load_state_dict(..., strict=False)` reports "
        f"missing keys {list(res.missing)} and carries on with fresh buffers."
        + (
            " num_batches_tracked is not in that list: the trimmed dict lost torch's "
            "`_metadata`, so torch filled the counter in."
            if filled
            else ""
        ),
    ]
    if res.no_counter:
        out.append(
            "A checkpoint that keeps both statistics but lacks num_batches_tracked, loaded "
            "strictly into a fresh layer:\n\n" + "\n".join(_case_text(c) for c in res.no_counter)
        )
    out.append(
        f"The layer was trained for {res.steps} steps with momentum {res.momentum}; bars are "
        "per-channel means of the evaluation outputs, whiskers their standard deviation."
    )
    return tuple(out)


SECTION = Section("checkpoint", "Checkpoints", INTRO, run, figure=figure, table=table, notes=notes)
