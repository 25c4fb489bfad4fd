"""The lab's setup: its shared knobs, the update rules, and the check every section runs first.

Every section of the BatchNorm lab draws minibatches from one seeded dataset
(`stream.py`) and runs them through the core: `normalize()` for the batch
statistics and outputs, `RunningStats` for the running buffers. Nothing here
re-implements the formula, so each number equals what torch's BatchNorm gives for
the same batches (tests/test_batchnorm_*.py feed nn.BatchNorm those batches).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from normviz.core import check_values, contract
from normviz.errors import NormConfigError
from normviz.knobs import Knob
from normviz.layouts import LAYOUTS
from normviz.limits import SIZE_LIMITS, max_elements
from normviz.methods import METHODS, STANDARD_METHODS
from normviz.running import RunningStats
from normviz.threads import one_thread  # noqa: F401  (the lab's sections import it from here)

TITLE = "BatchNorm lab"


def _intro() -> str:
    """The lab's opening: train ≠ eval, and which methods share it (read off the registry)."""
    differ = [METHODS[k].label for k in STANDARD_METHODS if METHODS[k].train_eval_differ]
    verb = "does" if len(differ) == 1 else "do"
    inst = METHODS["instance"]
    return (
        "BatchNorm behaves differently in training and in evaluation: training normalizes "
        "with the statistics of the current batch, evaluation with running averages "
        "collected during training. Of the common normalizations only "
        f"{' and '.join(differ)} {verb} this by default; {inst.label} keeps the same "
        f"behaviour in both modes only {inst.train_eval_note}. Each tab below makes one "
        "way this goes wrong visible, or shows what BatchNorm does besides, with every "
        "number equal to what torch's own BatchNorm computes."
    )


INTRO = _intro()

TRAIN_SAMPLES = 4096  # the training set minibatches are drawn from
HELD_OUT = 512  # fresh samples of the same distribution, for evaluation
CHUNK = 2**20  # elements per vectorized normalize() call
STREAM_CAP = 2**27  # elements one stream may push through BatchNorm in total
CONVENTIONS: tuple[str, ...] = ("pytorch", "keras", "cumulative")
CONVENTION_LABELS: dict[str, str] = {
    "pytorch": "PyTorch (m)",
    "keras": "Keras 3 (momentum)",
    "cumulative": "Cumulative (momentum=None)",
}

# ---- the knobs every section uses (they live in the LabSetup) -------------------------

BATCH_SIZE = Knob("batch_size", 8, lo=1, hi=256, label="Batch size b")
# the batch-size widget's stops: powers of two (a log scale); a link may carry any 1…256
BATCH_SIZES: tuple[int, ...] = tuple(2**k for k in range(9))
MOMENTUM = Knob("momentum", 0.1, lo=0.0, hi=1.0, label="Momentum")
CONVENTION = Knob("convention", "pytorch", choices=CONVENTIONS, label="Update rule")
STEPS = Knob("steps", 100, lo=1, hi=2000, label="Training steps")
LAB_KNOBS: tuple[Knob, ...] = (BATCH_SIZE, MOMENTUM, CONVENTION, STEPS)
# a view setting (no rerun): the channel a one-channel figure follows; a link's channel
# past the sidebar's C falls back to channel 0
CHANNEL = Knob("channel", 0, lo=0, hi=SIZE_LIMITS["C"] - 1, label="Channel to plot")
HELP: dict[str, str] = {
    "batch_size": "Samples per training batch. Each channel's statistics pool "
    "b × (values per sample) numbers.",
    "steps": "Batches fed to BatchNorm in training.",
    "convention": "PyTorch: new = (1 − m)·old + m·batch. Keras 3: new = momentum·old + "
    "(1 − momentum)·batch. Cumulative: the plain average of every batch so far.",
    "momentum": "The number in the chosen rule: PyTorch m = 0.1 is Keras momentum = 0.9. "
    "Switching the rule converts it.",
    "channel": "The channel the figure follows (0 to C − 1, C from the sidebar).",
}


def snap_batch(b: int) -> int:
    """The power of two nearest to b on a log scale (the batch-size widget's stops)."""
    b = min(max(int(b), BATCH_SIZES[0]), BATCH_SIZES[-1])
    return min(BATCH_SIZES, key=lambda p: (abs(math.log2(p) - math.log2(b)), p))


def snap_note(asked: int, used: int) -> str:
    """What the page says when a link's batch size is not one of the widget's stops."""
    return (
        f"The link asks for batch size {asked}; the batch-size slider moves in powers of two, "
        f"so the lab uses {used}, the nearest on a log scale."
    )


@dataclass(frozen=True)
class LabSetup:
    """The lab's plain settings: the runner caches on it (it hashes field by field)."""

    layout: str = "BTC"
    sample_shape: tuple[int, ...] = (6, 8)  # one sample: (T, C) or (C, H, W)
    data: str = "channels"  # shared generator name
    seed: int = 0
    eps: float = 1e-5
    groups: int = 2  # the sidebar's G: GroupNorm beside BatchNorm in the shift section
    batch_size: int = 8  # b: samples per training batch
    steps: int = 100  # training batches fed to BatchNorm
    momentum: float = 0.1  # in the chosen convention (ignored by "cumulative")
    convention: str = "pytorch"  # pytorch | keras | cumulative
    model_scale: float = 1.0  # the real-model section's training samples, × (tests: smaller)

    @property
    def C(self) -> int:
        """Number of channels."""
        return self.sample_shape[LAYOUTS[self.layout].channel_axis - 1]

    @property
    def positions(self) -> int:
        """Values per channel in one sample: T, or H·W."""
        return math.prod(self.sample_shape) // self.C

    @property
    def n(self) -> int:
        """Values per channel in one training batch: b·T or b·H·W."""
        return self.batch_size * self.positions

    def batch_shape(self, b: int | None = None) -> tuple[int, ...]:
        """Shape of one training batch (of b samples, default the setup's)."""
        return (self.batch_size if b is None else b, *self.sample_shape)

    def with_(self, **kw: object) -> LabSetup:
        """A copy with some fields changed."""
        return replace(self, **kw)  # type: ignore[arg-type]


def new_running(C: int, momentum: float, convention: str) -> RunningStats:
    """RunningStats for a URL convention ("cumulative" is PyTorch's momentum=None)."""
    if convention not in CONVENTIONS:
        raise NormConfigError(
            f"unknown convention {convention!r}: choose one of {', '.join(CONVENTIONS)}"
        )
    if convention == "cumulative":
        return RunningStats(C, None, "pytorch")
    return RunningStats(C, momentum, convention)  # type: ignore[arg-type]


def convert_momentum(momentum: float, source: str, target: str) -> float:
    """The momentum that traces the same running mean in `target`: PyTorch m = 1 − Keras m."""
    if {source, target} == {"pytorch", "keras"}:
        return round(1.0 - momentum, 6)
    return momentum


def twin_convention(convention: str) -> str | None:
    """The other convention with the same running-mean curve (none for cumulative)."""
    return {"pytorch": "keras", "keras": "pytorch"}.get(convention)


def batch_weight(momentum: float, convention: str) -> float | None:
    """Weight of each new batch in the running update (None: 1/k at step k)."""
    if convention == "cumulative":
        return None
    return new_running(1, momentum, convention).factor()  # the core's own rule


def memory_steps(momentum: float, convention: str) -> float | None:
    """About how many recent batches the running statistics remember: 1/weight.

    None for the cumulative average (it weighs every batch equally); inf when the
    new batch has weight 0 (the running statistics never move).
    """
    w = batch_weight(momentum, convention)
    if w is None:
        return None
    return math.inf if w == 0 else 1.0 / w


def memory_text(momentum: float, convention: str) -> str:
    """How the update rule weighs new batches, in words."""
    w = batch_weight(momentum, convention)
    mem = memory_steps(momentum, convention)
    if w is None:
        return "every batch weighs the same: step k adds 1/k"
    if mem == math.inf:
        return "new batches get weight 0: the running statistics never move"
    return f"each new batch gets weight {w:g}, so the memory is about {mem:.3g} batches"


def setup_caption(setup: LabSetup) -> str:
    """What one batch is, and how the update rule remembers batches (under the controls)."""
    per = "T" if setup.layout == "BTC" else "H·W"
    return (
        f"Each sample is one {setup.layout} item of shape {setup.sample_shape} (the sidebar's "
        "sizes); each batch draws b of them (the batch-size slider above). "
        f"A batch of b = {setup.batch_size} gives "
        f"every channel n = b·{per} = {setup.n} values. {CONVENTION_LABELS[setup.convention]}: "
        f"{memory_text(setup.momentum, setup.convention)}."
    )


def check(setup: LabSetup) -> None:
    """Raise when the lab cannot run these settings (sizes, one value per channel).

    Raises:
        Refusal: a batch with one value per channel (torch refuses it: the lesson).
        NormConfigError: the numbers that do not fit, and what to change.
    """
    lay = LAYOUTS.get(setup.layout)
    if lay is None:
        raise NormConfigError(
            f"unknown layout {setup.layout!r}: choose one of {', '.join(LAYOUTS)}"
        )
    new_running(setup.C, setup.momentum, setup.convention)  # convention and momentum range
    per_sample = math.prod(setup.sample_shape)
    total = (TRAIN_SAMPLES + HELD_OUT) * per_sample
    names = tuple(a for a in lay.axes if a != lay.sample)
    if total > max_elements():
        raise NormConfigError(
            f"the lab draws {TRAIN_SAMPLES + HELD_OUT:,} samples of ({', '.join(names)}) = "
            f"{setup.sample_shape}, {total:,} values, over the app's cap of {max_elements():,}: "
            f"make {' or '.join(names)} smaller"
        )
    work = setup.steps * setup.batch_size * per_sample
    if work > STREAM_CAP:
        raise NormConfigError(
            f"{setup.steps:,} steps × batch size {setup.batch_size} × {per_sample:,} values is "
            f"{work:,} values to normalize, over the lab's cap of {STREAM_CAP:,}: "
            "lower the steps or the batch size"
        )
    # the core refuses a batch with one value per channel, in its own words (a Refusal)
    check_values(contract("batch", setup.layout, setup.batch_shape()))
