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
    "samples; the running statistics used in evaluation cannot reproduce what the network "
    "learned on, and its accuracy drops."
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


def notes(report: ModelReport) -> Sequence[str]:
    cfg = report.config
    return (
        f"Each network takes {cfg.steps} Adam steps on {cfg.n_train} samples of "
        f"{cfg.features} raw features ({cfg.classes} classes, chance {report.chance:.0%}); "
        f"the test set has {cfg.n_test} samples. Seeded by the sidebar's seed.",
        "Notice that BatchNorm's *training-mode* accuracy does not move with the shift: in "
        "training mode every test batch is re-centred and re-scaled with its own statistics, "
        "which undoes any shift or scale of the features. Evaluation mode keeps the training "
        "statistics, so it is the mode that pays for the shift, and the only one you deploy.",
    )


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
