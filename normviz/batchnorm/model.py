"""Real model: small networks trained with tiny and normal batches, scored in both modes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd
import plotly.graph_objects as go

from normviz import style
from normviz.batchnorm.lab import LabSetup
from normviz.batchnorm.network import COMPARABLE, ModelConfig, ModelReport, evaluate, trained
from normviz.batchnorm.plot import TRUTH, rounded
from normviz.batchnorm.shift import SCALE, SHIFT
from normviz.knobs import Knob, Value
from normviz.methods import METHODS
from normviz.sections import Progress, Section

INTRO = (
    "A small MLP (two hidden layers with normalization) learns to classify synthetic "
    "data, once with batches of 2 and once with batches of 64, with BatchNorm and with a "
    "per-sample method. Accuracy is measured in training mode (test data in batches of "
    "the training size) and in evaluation mode, on clean and on shifted test data. With "
    "batches of 2, every training batch is normalized with the statistics of just two "
    "samples, which the running statistics used in evaluation do not reproduce. The notes "
    "below say what that does to the accuracy of these networks."
)
COMPARE = Knob("compare", "group", choices=COMPARABLE, label="Compare with")


def run(setup: LabSetup, knobs: Mapping[str, Value], progress: Progress) -> ModelReport:
    """The section: train (or reuse) the four networks, then score them at the test shift."""
    cfg = ModelConfig(seed=setup.seed, compare=str(knobs["compare"]), steps=setup.model_steps)
    progress(0.0, "Training the small networks…")
    return evaluate(trained(cfg, progress), float(knobs["shift"]), float(knobs["scale"]))


MODEL_SCORES: tuple[tuple[str, str, str], ...] = (
    # (AccuracyRow field, legend label, colour)
    ("train_clean", "training mode", style.PALETTE[4]),
    ("eval_clean", "evaluation mode", style.PALETTE[0]),
    ("train_shifted", "training mode, shifted test data", style.PALETTE[1]),
    ("eval_shifted", "evaluation mode, shifted test data", style.PALETTE[5]),
)


def figure(report: ModelReport, presenter: bool = False) -> go.Figure:
    """Test accuracy of every run, per mode, on clean and shifted data."""
    runs = [f"{METHODS[r.method].label}, batch {r.batch_size}" for r in report.rows]
    fig = go.Figure()
    for field, label, colour in MODEL_SCORES:
        fig.add_trace(
            go.Bar(
                x=runs,
                y=rounded([getattr(r, field) for r in report.rows], 4),
                name=label,
                marker={"color": colour},
                texttemplate="%{y:.0%}",
                textposition="outside",
            )
        )
    fig.add_hline(
        y=report.chance,
        line={"color": TRUTH, "dash": "dash", "width": 2},
        annotation_text="chance",
        annotation_position="bottom right",
    )
    fig.update_yaxes(title_text="test accuracy", range=[0, 1.12], tickformat=".0%")
    fig.update_layout(
        barmode="group",
        title=f"Test accuracy (shifted data: shift {report.shift:g} σ, scale ×{report.scale:g})",
        legend={"orientation": "h", "y": -0.2},
    )
    return style.apply(fig, presenter, height=480)


def table(report: ModelReport) -> pd.DataFrame:
    df = pd.DataFrame(
        {
            "network": [f"{METHODS[r.method].label}, batch {r.batch_size}" for r in report.rows],
            "training mode": [r.train_clean for r in report.rows],
            "evaluation mode": [r.eval_clean for r in report.rows],
            "training mode, shifted": [r.train_shifted for r in report.rows],
            "evaluation mode, shifted": [r.eval_shifted for r in report.rows],
        }
    )
    df.attrs["format"] = "percent"  # how the runner shows the numbers
    return df


def _points(a: float, b: float, other: str) -> str:
    """a against b (the score of `other`) in percentage points, in words."""
    d = round(100 * (a - b))
    if d == 0:
        return f"the same as {other}"
    return f"{abs(d)} points {'higher' if d > 0 else 'lower'} than {other}"


def notes(report: ModelReport) -> Sequence[str]:
    """The setup, then what the chart shows, every comparison computed from the scores."""
    cfg = report.config
    seen = "; ".join(
        f"with batches of {b} a network sees {b * cfg.steps:,} samples" for b in cfg.batch_sizes
    )
    out = [
        f"Each network takes {cfg.steps} Adam steps on {cfg.n_train} samples of "
        f"{cfg.features} raw features ({cfg.classes} classes, chance {report.chance:.0%}); "
        f"the test set has {cfg.n_test} samples. Seeded by the sidebar's seed. Equal steps "
        f"mean unequal data: {seen}.",
    ]
    bn = {r.batch_size: r for r in report.rows if r.method == "batch"}
    small, normal = bn.get(cfg.small_batch), bn.get(cfg.normal_batch)
    if small is not None and normal is not None:
        out.append(
            f"BatchNorm trained with batches of {small.batch_size} scores "
            f"{small.eval_clean:.0%} in evaluation mode and {small.train_clean:.0%} in "
            f"training mode (test batches of {small.batch_size}): evaluation mode is "
            f"{_points(small.eval_clean, small.train_clean, 'training mode')}. In evaluation "
            "mode it is "
            + _points(
                small.eval_clean,
                normal.eval_clean,
                f"BatchNorm trained with batches of {normal.batch_size} ({normal.eval_clean:.0%})",
            )
            + "."
        )
    moved = max(abs(r.train_shifted - r.train_clean) for r in bn.values()) if bn else 1.0
    if moved < 0.005:
        out.append(
            "BatchNorm's *training-mode* accuracy does not move with the shift: in training "
            "mode every test batch is re-centred and re-scaled with its own statistics, which "
            "undoes any shift or scale of the features. Evaluation mode keeps the training "
            "statistics, so it is the mode that pays for the shift, and the only one you deploy."
        )
    return tuple(out)


SECTION = Section(
    "model",
    "Real model",
    INTRO,
    run,
    knobs=(COMPARE, SHIFT, SCALE),
    figure=figure,
    table=table,
    notes=notes,
)
