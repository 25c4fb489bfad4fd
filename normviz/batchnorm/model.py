"""Real model: BatchNorm against a per-sample method on real digits, tiny and normal batches.

Two steps, cached apart: `SECTION` trains the networks (what decides the weights:
the compared method, the seeds), on the training lab's data and machinery
(`normviz.training.train_at_batch_sizes`: scikit-learn's digits, every run seeing
the same number of samples); `SHIFTED` only re-scores those trained networks on
test digits moved by `shift` and `scale`, so moving a slider never retrains. Every
sentence is computed from the accuracies it describes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from normviz import style
from normviz.batchnorm.lab import LabSetup
from normviz.batchnorm.plot import TRUTH
from normviz.batchnorm.shift import SCALE, SHIFT
from normviz.batchnorm.stream import shifted
from normviz.figures.spec import Spec, trace
from normviz.knobs import Knob, Value
from normviz.methods import METHODS
from normviz.sections import Progress, Section
from normviz.training import BatchSizeRuns, score_runs, train_at_batch_sizes
from normviz.training.data import CLASSES, digits
from normviz.training.models import Net

NET = Net("mlp", width=64, depth=2, groups=4)
BATCH_SIZES: tuple[int, int] = (2, 64)  # the tiny and the normal batch
LR = 0.01  # Adam
EPOCHS = 1.0  # training samples per run, in passes over the training digits
COMPARABLE: tuple[str, ...] = ("group", "layer")  # per-sample methods trained beside BatchNorm
SAME = 0.5  # points: a smaller difference of mean accuracies reads as "the same"

INTRO = (
    "Small networks learn to read scikit-learn's handwritten digits (the training lab's data), "
    "with BatchNorm and with a per-sample normalization, once with batches of 2 and once with "
    "batches of 64. Every run sees the same number of training digits, so the tiny batch takes "
    "32× the steps; several seeds per network show the spread. Each network is scored on the "
    "held-out digits in evaluation mode (BatchNorm uses its running statistics) and in "
    "training mode (each test batch, of the training size, normalized by its own statistics). "
    "The notes below say what the scores show."
)
SHIFTED_INTRO = (
    "The same trained networks (no retraining) on test digits moved away from the training "
    "data: every pixel's mean moves `shift` training standard deviations and its spread "
    "around the training mean grows ×`scale`."
)
COMPARE = Knob("compare", "group", choices=COMPARABLE, label="Compare with")
SEEDS = Knob("bn_seeds", 3, lo=1, hi=5, label="Seeds per network")


@dataclass(frozen=True)
class ModelRuns:
    """The trained networks: accuracies on clean test digits, and their weights.

    It is also the setup of the re-scoring step (hashed by value: plain numbers and arrays).
    """

    runs: BatchSizeRuns  # norms ("batch", the compared one) × batch sizes × seeds
    n_test: int  # held-out digits

    @property
    def chance(self) -> float:
        return 1.0 / CLASSES


def run(setup: LabSetup, knobs: Mapping[str, Value], progress: Progress) -> ModelRuns:
    """The training step: BatchNorm and the compared method at each batch size, every seed."""
    compare = str(knobs["compare"])
    seeds = tuple(range(setup.seed, setup.seed + int(knobs["bn_seeds"])))  # type: ignore[call-overload]
    samples = max(BATCH_SIZES[-1], round(EPOCHS * digits().n_train * setup.model_scale))
    runs = train_at_batch_sizes(
        NET, ("batch", compare), BATCH_SIZES, seeds, samples, LR, "adam", progress, keep=True
    )
    return ModelRuns(runs, digits().n_val)


@dataclass(frozen=True)
class ShiftScores:
    """Accuracies (norms, batch sizes, seeds) on clean and on shifted test digits."""

    runs: BatchSizeRuns  # what was scored (its clean accuracies included)
    shifted_eval: np.ndarray
    shifted_train: np.ndarray
    shift: float
    scale: float


def run_shifted(trained: ModelRuns, knobs: Mapping[str, Value], progress: Progress) -> ShiftScores:
    """The re-scoring step: the trained networks on test digits x → μ + scale·(x − μ) + shift·σ."""
    shift, scale = float(knobs["shift"]), float(knobs["scale"])  # type: ignore[arg-type]
    d = digits()
    mean, std = d.x_train.mean(0), d.x_train.std(0)  # per pixel, (1, 8, 8)
    x = shifted(d.x_val, mean, std, shift, scale)
    ev, tr = score_runs(trained.runs, x, d.y_val)
    return ShiftScores(trained.runs, ev, tr, shift, scale)


# ---- words --------------------------------------------------------------------------------


def name(norm: str, batch: int) -> str:
    return f"{METHODS[norm].label}, batch {batch}"


def pct(acc: np.ndarray, sep: str = " (") -> str:
    """Mean over seeds, and the seeds' range when there are several."""
    a = 100 * np.asarray(acc, dtype=float)
    if a.size == 1:
        return f"{a.mean():.1f} %"
    close = ")" if sep == " (" else ""
    return f"{a.mean():.1f} %{sep}seeds {a.min():.1f}–{a.max():.1f} %{close}"


def overlap(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether the seeds' ranges of two sets of accuracies overlap."""
    return bool(max(np.min(a), np.min(b)) <= min(np.max(a), np.max(b)))


def versus(a: np.ndarray, b: np.ndarray, other: str) -> str:
    """a against b (the accuracies of `other`), in points of the means, with the spread."""
    d = 100 * (float(np.mean(a)) - float(np.mean(b)))
    if abs(d) < SAME:
        head = f"about the same as {other} ({pct(b, ', ')})"
    else:
        more = "higher" if d > 0 else "lower"
        head = f"{abs(d):.1f} points {more} than {other} ({pct(b, ', ')})"
    if min(np.size(a), np.size(b)) < 2:
        return head
    return head + (
        "; the seeds' ranges overlap" if overlap(a, b) else "; the seeds' ranges do not overlap"
    )


def notes(res: ModelRuns) -> Sequence[str]:
    """The design (equal samples seen), then each comparison, computed from the scores."""
    r = res.runs
    (small, large), bn, other = r.batch_sizes, 0, 1
    ev, tr = r.eval_acc, r.train_acc
    label = METHODS[r.norms[other]].label
    steps = " and ".join(f"{r.steps(b):,} steps at batch {b}" for b in r.batch_sizes)
    full = ", ".join(f"{res.n_test // b * b} digits at batch {b}" for b in r.batch_sizes)
    out = [
        f"Each network is an MLP over the 64 pixels (two hidden layers of {NET.width}, each "
        f"followed by the normalization and a ReLU), trained with Adam (learning rate {LR:g}). "
        f"Equal samples seen: every run sees {r.samples:,} training digits, which is {steps}. "
        f"{len(r.seeds)} seed{'s' if len(r.seeds) > 1 else ''} per network, from the "
        f"sidebar's seed; the test set is the {res.n_test} held-out digits (chance "
        f"{res.chance:.0%}); training mode scores the full test batches only ({full}).",
        f"In evaluation mode, BatchNorm trained with batches of {small} scores "
        f"{pct(ev[bn, 0])}: "
        + versus(ev[bn, 0], ev[bn, 1], f"BatchNorm trained with batches of {large}")
        + ".",
        f"BatchNorm trained with batches of {small}, in training mode (test batches of "
        f"{small}, each normalized by its own statistics), scores {pct(tr[bn, 0])}: "
        + versus(tr[bn, 0], ev[bn, 0], "the same networks in evaluation mode")
        + ".",
        f"{label} trained with batches of {small} scores {pct(ev[other, 0])}: "
        + versus(ev[other, 0], ev[bn, 0], "BatchNorm at the same batch size")
        + ".",
        f"{label} at batch {small} is "
        + versus(ev[other, 0], ev[other, 1], f"{label} trained with batches of {large}")
        + ".",
    ]
    gap = 100 * float(np.max(np.abs(tr[other].mean(-1) - ev[other].mean(-1))))
    out.append(
        f"{label} keeps no running statistics, so a digit gets the same output in both modes: "
        + (
            f"its two scores agree (within {gap:.1f} points)."
            if gap < SAME
            else f"its two scores differ (by up to {gap:.1f} points) only because training "
            "mode scores the full test batches alone."
        )
    )
    return out


def shifted_notes(res: ShiftScores) -> Sequence[str]:
    """How far the shift moves each mode, computed from the scores."""
    r = res.runs
    large = len(r.batch_sizes) - 1
    moved = [
        f"{name(n, r.batch_sizes[large])}: "
        + _moved(r.eval_acc[i, large], res.shifted_eval[i, large])
        for i, n in enumerate(r.norms)
    ]
    out = [
        f"Shift {res.shift:g} σ, scale ×{res.scale:g}: in evaluation mode, "
        + "; ".join(moved)
        + "."
    ]
    bn = r.norms.index("batch")
    d = 100 * float(np.max(np.abs(res.shifted_train[bn].mean(-1) - r.train_acc[bn].mean(-1))))
    if d < SAME:
        out.append(
            "BatchNorm's *training-mode* accuracy does not move with the shift (at most "
            f"{d:.1f} points): in training mode every test batch is re-centred and re-scaled "
            "with its own statistics, which undoes a shift or scale of the inputs of the first "
            "layer. Evaluation mode keeps the training statistics, so it is the mode that pays "
            "for the shift, and the only one you deploy."
        )
    else:
        out.append(
            f"BatchNorm's training-mode accuracy moves by up to {d:.1f} points with the shift."
        )
    return out


def _moved(clean: np.ndarray, moved: np.ndarray) -> str:
    d = 100 * (float(np.mean(moved)) - float(np.mean(clean)))
    if abs(d) < SAME:
        return f"{pct(moved)}, about the same as on clean digits"
    return f"{pct(moved)}, {abs(d):.1f} points {'above' if d > 0 else 'below'} clean digits"


# ---- figures and tables ------------------------------------------------------------------

Series = tuple[str, str, np.ndarray]  # legend label, colour, accuracies (norms, sizes, seeds)


def _bars(r: BatchSizeRuns, series: Sequence[Series], title: str, presenter: bool) -> go.Figure:
    """Mean test accuracy per network and series, the seeds' spread as error bars."""
    nets = [name(n, b) for n in r.norms for b in r.batch_sizes]
    fig = Spec()
    for i, (label, colour, acc) in enumerate(series):
        a = acc.reshape(len(nets), -1)
        fig.add_trace(
            trace(
                "bar",
                x=nets,
                y=np.round(a.mean(-1), 4).tolist(),
                error_y={"type": "data", "array": np.round(a.std(-1), 4).tolist()},
                name=label,
                # a pattern per series: colour is not the only signal
                marker={"color": colour, "pattern": {"shape": style.PATTERNS[i]}},
                texttemplate="%{y:.0%}",
                textposition="outside",
            )
        )
    fig.add_hline(y=1.0 / CLASSES, line={"color": TRUTH, "dash": "dash", "width": 2})
    fig.add_hline_note(1.0 / CLASSES, "chance", "bottom right")
    fig.update_yaxes(title="test accuracy (mean over seeds)", range=[0, 1.15], tickformat=".0%")
    fig.update_layout(barmode="group", title=title, legend=style.LEGEND_BELOW)
    return style.apply(fig, presenter, height=480).figure()


TRAIN_MODE, EVAL_MODE = style.PALETTE[4], style.PALETTE[0]


def figure(res: ModelRuns, presenter: bool = False) -> go.Figure:
    r = res.runs
    series = [
        ("evaluation mode", EVAL_MODE, r.eval_acc),
        ("training mode (test batches of the training size)", TRAIN_MODE, r.train_acc),
    ]
    return _bars(r, series, "Test accuracy on the held-out digits", presenter)


def shifted_figure(res: ShiftScores, presenter: bool = False) -> go.Figure:
    r = res.runs
    series = [
        ("evaluation mode", EVAL_MODE, r.eval_acc),
        ("evaluation mode, shifted", style.PALETTE[5], res.shifted_eval),
        ("training mode", TRAIN_MODE, r.train_acc),
        ("training mode, shifted", style.PALETTE[1], res.shifted_train),
    ]
    title = f"Clean and shifted test digits (shift {res.shift:g} σ, scale ×{res.scale:g})"
    return _bars(r, series, title, presenter)


def _frame(r: BatchSizeRuns, columns: Sequence[tuple[str, np.ndarray]]) -> pd.DataFrame:
    """One row per network: the mean accuracy of each column and its spread over seeds."""
    data: dict[str, list] = {"network": [name(n, b) for n in r.norms for b in r.batch_sizes]}
    for title, acc in columns:
        a = acc.reshape(len(data["network"]), -1)
        data[title] = a.mean(-1).tolist()
        data[f"{title} ± sd"] = a.std(-1).tolist()
    df = pd.DataFrame(data)
    df.attrs["format"] = "percent"  # how the runner shows the numbers
    return df


def table(res: ModelRuns) -> pd.DataFrame:
    r = res.runs
    return _frame(r, (("evaluation mode", r.eval_acc), ("training mode", r.train_acc)))


def shifted_table(res: ShiftScores) -> pd.DataFrame:
    return _frame(
        res.runs,
        (
            ("evaluation mode, shifted", res.shifted_eval),
            ("training mode, shifted", res.shifted_train),
        ),
    )


SECTION = Section("model", "Real model", INTRO, run, (COMPARE, SEEDS), figure, table, notes)
SHIFTED = Section(
    "model-shift",
    "Shifted test digits",
    SHIFTED_INTRO,
    run_shifted,
    (SHIFT, SCALE),
    shifted_figure,
    shifted_table,
    shifted_notes,
)
