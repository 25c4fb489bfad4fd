"""torch's own modules: training vs evaluation mode, and what their defaults are.

Both sections build the real `torch.nn` modules and read the answer off them: the
first runs each one in training and in evaluation mode on the same batch, the
second reads what a module built with only its sizes holds (eps, γ/β, running
statistics). Nothing in either table is written by hand.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import pandas as pd
import torch
from torch import nn

from normviz.knobs import Value
from normviz.methods import METHODS, STANDARD_METHODS
from normviz.sections import Progress, Section
from normviz.sources import cite
from normviz.text import (
    DEFAULTS_C,
    DEFAULTS_G,
    default_module,
    rms_none_eps_text,
    torch_defaults_table,
)

# ---- training vs evaluation mode ------------------------------------------------------

SHAPE = (4, DEFAULTS_C, 5, 5)  # N, C, H, W of every batch
WARMUP_STEPS = 20  # training-mode batches before the comparison (they fill running stats)
SAME_TOL = 1e-6  # max |train − eval| below this counts as "the same"

# (label, builder): torch's defaults and the flag that flips the answer
CONFIGS: tuple[tuple[str, Callable[[], nn.Module]], ...] = (
    ("nn.BatchNorm2d(C)", lambda: nn.BatchNorm2d(DEFAULTS_C)),
    (
        "nn.BatchNorm2d(C, track_running_stats=False)",
        lambda: nn.BatchNorm2d(DEFAULTS_C, track_running_stats=False),
    ),
    ("nn.InstanceNorm2d(C)", lambda: nn.InstanceNorm2d(DEFAULTS_C)),
    (
        "nn.InstanceNorm2d(C, track_running_stats=True)",
        lambda: nn.InstanceNorm2d(DEFAULTS_C, track_running_stats=True),
    ),
    ("nn.GroupNorm(G, C)", lambda: nn.GroupNorm(DEFAULTS_G, DEFAULTS_C)),
    ("nn.LayerNorm((C, H, W))", lambda: nn.LayerNorm(SHAPE[1:])),
    ("nn.RMSNorm((C, H, W))", lambda: nn.RMSNorm(SHAPE[1:])),
)

TRAIN_EVAL_INTRO = (
    "Which layers compute something else after model.eval()? Each torch module below sees "
    f"{WARMUP_STEPS} training batches (filling its running statistics, if it keeps any), "
    "then one more batch twice: in training mode and in evaluation mode. BatchNorm's "
    f"switch is the famous one ({cite('ioffe2015')}; {cite('wu2021')} discuss its "
    "pitfalls), but the constructor flag track_running_stats decides it, for InstanceNorm "
    "too."
)


def batches(seed: int = 0) -> torch.Tensor:
    """WARMUP_STEPS + 1 batches of SHAPE with per-channel offsets and scales (seeded)."""
    g = torch.Generator().manual_seed(seed)
    offset = 3 * torch.randn(1, 1, DEFAULTS_C, 1, 1, generator=g)
    scale = 1 + 2 * torch.rand(1, 1, DEFAULTS_C, 1, 1, generator=g)
    return offset + scale * torch.randn(WARMUP_STEPS + 1, *SHAPE, generator=g)


def train_eval_gap(build: Callable[[], nn.Module], data: torch.Tensor) -> float:
    """max |train-mode output − eval-mode output| on the last batch, after the others."""
    mod = build()
    with torch.no_grad():
        mod.train()
        for x in data[:-1]:
            mod(x)
        trained = copy.deepcopy(mod)  # training mode updates running stats: use a copy
        y_train = trained.train()(data[-1])
        y_eval = mod.eval()(data[-1])
    return float((y_train - y_eval).abs().max())


@dataclass(frozen=True, eq=False)
class TrainEval:
    table: pd.DataFrame  # index: module; max |Δ| and whether it differs


def run_train_eval(setup: object, knobs: Mapping[str, Value], progress: Progress) -> TrainEval:
    data = batches()
    rows = []
    for i, (label, build) in enumerate(CONFIGS):
        progress(i / len(CONFIGS), label)
        gap = train_eval_gap(build, data)
        rows.append({"torch module": label, "max |train − eval|": gap, "differs": gap > SAME_TOL})
    return TrainEval(pd.DataFrame(rows).set_index("torch module"))


def table_train_eval(res: TrainEval) -> pd.DataFrame:
    df = res.table.copy()
    df["differs"] = df["differs"].map({True: "yes", False: "no"})
    return df


def notes_train_eval(res: TrainEval) -> Sequence[str]:
    differ = [f"`{m}`" for m, d in res.table["differs"].items() if d]
    same = [f"`{m}`" for m, d in res.table["differs"].items() if not d]
    out = []
    if differ:
        out.append(f"Training and evaluation mode differ for {', '.join(differ)}.")
    if same:
        out.append(f"They agree (to {SAME_TOL:g}) for {', '.join(same)}.")
    out.append(
        "A module with running statistics normalizes with them in evaluation mode; one "
        "without them keeps using the current batch's or sample's statistics, so eval() "
        "changes nothing for it."
    )
    return out


TRAIN_EVAL = Section(
    slug="train-eval",
    label="Training vs evaluation mode, in torch",
    intro=TRAIN_EVAL_INTRO,
    run=run_train_eval,
    table=table_train_eval,
    notes=notes_train_eval,
)


# ---- torch's defaults -------------------------------------------------------------------

DEFAULTS_INTRO = (
    "What you get when you build each torch module with only its sizes (C = "
    f"{DEFAULTS_C}, G = {DEFAULTS_G}). The table is read off the constructed modules, so it "
    "follows the installed torch."
)


@dataclass(frozen=True, eq=False)
class Defaults:
    table: pd.DataFrame  # index: method label
    eps: dict[str, float | None]  # METHODS key -> the module's eps attribute
    params: dict[str, tuple[str, ...]]  # METHODS key -> learned parameter names


def run_defaults(setup: object, knobs: Mapping[str, Value], progress: Progress) -> Defaults:
    mods = {k: default_module(k) for k in STANDARD_METHODS}
    return Defaults(
        torch_defaults_table(),
        {k: getattr(m, "eps", None) for k, m in mods.items()},
        {k: tuple(n for n, _ in m.named_parameters(recurse=False)) for k, m in mods.items()},
    )


def table_defaults(res: Defaults) -> pd.DataFrame:
    return res.table


def notes_defaults(res: Defaults) -> Sequence[str]:
    out = []
    bare = [METHODS[k].label for k, p in res.params.items() if not p]
    if bare:
        out.append(
            f"{' and '.join(bare)} learns no γ or β unless you pass affine=True: by default "
            "it only standardizes."
        )
    no_bias = [METHODS[k].label for k, p in res.params.items() if p and "bias" not in p]
    if no_bias:
        out.append(f"{' and '.join(no_bias)} learns a weight (γ) and no bias (β).")
    unset = [k for k, e in res.eps.items() if e is None]
    fixed = sorted({e for e in res.eps.values() if e is not None})
    if unset:
        names = " and ".join(METHODS[k].label for k in unset)
        fixed_text = " and ".join(f"{e:g}" for e in fixed)
        out.append(
            f"{names}'s eps is None, which torch resolves from the input's dtype: "
            f"{rms_none_eps_text()} (measured on this torch), not the {fixed_text} of the "
            "others. Pass eps explicitly to compare the two like for like."
        )
    return out


DEFAULTS = Section(
    slug="torch-defaults",
    label="torch's defaults",
    intro=DEFAULTS_INTRO,
    run=run_defaults,
    table=table_defaults,
    notes=notes_defaults,
)
