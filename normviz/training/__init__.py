"""Training lab (/training): why normalization helps, measured live on real digits.

Nine experiments, one module each, reading top to bottom (intro, knobs, run, figure,
table, notes); each names the paper's claim and ends in a verdict computed from
its runs. The machinery under them: `data.py` (scikit-learn's digits, offline),
`models.py` (the torch.nn networks and where each norm sits), `wide.py` (a grid of
networks as one batched model), `train.py` (batched training and the one-at-a-time
reference), `probes.py` (loss landscape, precise statistics) and `variants.py`
(normalizations at several batch sizes with equal samples seen).
"""

from __future__ import annotations

from normviz.knobs import Knob, merge
from normviz.sections import Section, slugs
from normviz.training import batch, converge, dyt_lr, lr, noise, population, smooth, tiny, ws
from normviz.training.common import Setup
from normviz.training.data import SHIFTS
from normviz.training.models import NORM_LABELS
from normviz.training.variants import BatchSizeRuns, score_runs, train_at_batch_sizes

SECTIONS: tuple[Section, ...] = (
    lr.SECTION,
    dyt_lr.SECTION,
    converge.SECTION,
    batch.SECTION,
    smooth.SECTION,
    noise.SECTION,
    population.SECTION,
    tiny.SECTION,
    ws.SECTION,
)
EXP = Knob("exp", SECTIONS[0].slug, choices=slugs(SECTIONS), label="Experiment")
KNOBS: tuple[Knob, ...] = (EXP, *merge(*(s.knobs for s in SECTIONS)))

INTRO = (
    "The other pages show *what* each normalization computes. This one trains small networks "
    "on real handwritten digits (scikit-learn's 1,797 8×8 images, a fixed split of 1,438 for "
    "training and 359 for validation) and checks, live, the claims papers make about *why* "
    "normalization helps. Every setting trains several seeds; a whole grid of networks trains "
    "as one batched computation. Each verdict is computed from the runs on screen."
)

# How a knob's choices read in its widget (knob name -> value -> label).
LABELS: dict[str, dict[object, str]] = {
    "exp": {s.slug: s.label for s in SECTIONS},
    "tol_norms": dict(NORM_LABELS),
    "tol_net": dict(lr.NET_LABELS),
    "pop_shift": {k: k for k in SHIFTS},
}
HELP: dict[str, str] = {"pop_shift": "; ".join(f"{k}: {v}" for k, v in SHIFTS.items())}


def choice_label(knob: str, value: object) -> str:
    """How a knob's value reads in its widget."""
    return LABELS.get(knob, {}).get(value, str(value))


def example_setup() -> Setup:
    """A small setup for the interface tests: a tenth of the samples."""
    return Setup(seed=0, scale=0.1)


__all__ = [
    "EXP",
    "HELP",
    "INTRO",
    "KNOBS",
    "LABELS",
    "SECTIONS",
    "BatchSizeRuns",
    "Setup",
    "choice_label",
    "example_setup",
    "score_runs",
    "train_at_batch_sizes",
]
