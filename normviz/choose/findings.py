"""What the normalization checklist finds in a model: its layers, their placement, γ/β.

The source texts end with a checklist: which normalization layers a model has and
over which axes, whether each sits before or after its residual add, whether γ
and β are there, whether a layer before BatchNorm carries a bias the mean
subtraction removes anyway, whether running statistics exist and are saved, and
whether normalization parameters are kept out of weight decay. This module holds
the answers' shapes (`NormFinding`, `AuditReport`), the rules that read the method
registry, and those that read a module itself (`measure_modes` runs a copy of it,
`decay_check` reads an optimizer's param_groups); `engine.audit()` fills them in
from a real model.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass

import torch
from torch import nn

from normviz.errors import NormConfigError
from normviz.layouts import LAYOUTS
from normviz.methods import METHODS


class AuditError(NormConfigError):
    """A model or file the audit cannot read; the message says why."""


# ---- which torch module is which registry method -----------------------------------

# The registry's audit types, in registry order: the first isinstance match wins.
NORM_TYPES: tuple[tuple[type[nn.Module], str], ...] = tuple(
    (cls, key) for key, m in METHODS.items() for cls in m.audit_types
)
WEIGHT_LAYERS: tuple[type[nn.Module], ...] = (nn.Linear, nn.modules.conv._ConvNd)

PRE, POST, BRANCH, SHORTCUT, FINAL, SKIPLESS, BETWEEN, NONE = (
    "pre-norm",
    "post-norm",
    "inside the residual branch",
    "on the skip path (a projection shortcut)",
    "after the residual blocks, outside any branch",
    "in a block without a skip",
    "before or between the residual blocks",
    "no residual connection",
)
SANDWICH = "Peri-LN output norm (sandwich)"
PLACEMENT_HELP: dict[str, str] = {
    PRE: "normalizes the input of a residual branch; the skip path bypasses it",
    POST: "normalizes the sum x + F(x); every path goes through it",
    BRANCH: "sits inside F, after a convolution or linear layer; the skip path bypasses it",
    SANDWICH: "normalizes the branch's output just before it is added, in a branch that "
    "also opens with a pre-norm: x + Norm_out(F(Norm_in(x))), as in Gemma 2 and 3",
    SHORTCUT: "normalizes the projected input (e.g. a strided 1×1 convolution) that the block "
    "adds to its branch where the shapes differ",
    FINAL: "no residual add follows it: a final norm after the last block (GPT-2's ln_f) "
    "or a head's norm",
    SKIPLESS: "the block holding it adds no skip, so it is neither pre- nor post-norm of a "
    "residual: the whole stream passes through it",
    BETWEEN: "on the stream outside every block (a stem, a layer between stages); residual "
    "blocks follow it",
    NONE: "no residual add before or after it",
}


# A module outside torch.nn with no statistics to measure is known by its class's name
# (the registry's name hint: DyT, the DyT authors' DynamicTanh); one with statistics is
# only what its type says (a name alone cannot tell LayerNorm from RMSNorm).
NAMED_TYPES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(m.name_hint), key)
    for key, m in METHODS.items()
    if m.kind == "elementwise" and m.name_hint
)


def method_of(module: nn.Module) -> str | None:
    """The METHODS key of a torch normalization module, or None for anything else."""
    for cls, key in NORM_TYPES:
        if isinstance(module, cls):
            return key
    name = type(module).__name__.lower()
    return next((key for pattern, key in NAMED_TYPES if pattern.search(name)), None)


def bias_is_needless(method: str) -> bool:
    """True when a per-channel bias just before this norm is cancelled by its mean.

    That holds for centred methods with one statistic per channel (channel axis kept,
    not grouped): BatchNorm and InstanceNorm. GroupNorm and LayerNorm subtract a mean
    pooled over several channels, which cancels only the bias's average.
    """
    m = METHODS[method]
    return (
        m.centred
        and not m.grouped
        and all(LAYOUTS[k].channel not in m.reduces[k] for k in m.reduces)
    )


@dataclass(frozen=True)
class Modes:
    """How one normalization module behaves, measured by running a copy of it."""

    batch_dependent: bool  # in training, one sample's output moves when another's does
    train_eval_gap: float  # max |train − eval| of its output on the test input
    measured: bool  # False: it could not run on the test input; read off its attributes


TEST_SEED, TEST_MEAN, TEST_STD = 0, 1.0, 3.0  # the test input: batch 2, mean 1, std 3
GAP_TOL = 1e-5  # larger than float32 round-off on a normalized output


TEST_SIDE = 4  # spatial / sequence sizes are cut to this: the behaviour does not need more


def test_shape(module: nn.Module, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The test input's shape: a batch of 2, the dims the module's parameters fix (channels
    at dim 1; LayerNorm/RMSNorm's normalized_shape) kept, the others cut to TEST_SIDE."""
    kept = len(getattr(module, "normalized_shape", ()) or ())
    fixed = set(range(len(shape) - kept, len(shape))) if kept else {1}
    return (2, *(d if i in fixed else min(d, TEST_SIDE) for i, d in enumerate(shape) if i))


def measure_modes(module: nn.Module, shape: tuple[int, ...] | None) -> Modes:
    """Run a copy of `module` in eval and training mode on a test input of about `shape`
    (`test_shape`), then again with the second sample changed. The module is untouched.

    A module that cannot run so (no recorded shape, an unbatched input) is read off its
    attributes: BatchNorm uses the batch in training; running statistics, when kept,
    are what evaluation uses instead.
    """
    if shape:
        shape = test_shape(module, shape)
        g = torch.Generator().manual_seed(TEST_SEED)
        x = torch.randn(shape, generator=g) * TEST_STD + TEST_MEAN
        other = x.clone()
        other[1] = torch.randn(shape[1:], generator=g) * 2 * TEST_STD - TEST_MEAN
        m = copy.deepcopy(module)
        try:
            with torch.no_grad():
                ev = m.eval()(x)
                tr, tr_other = m.train()(x), m(other)
            gap = float((tr - ev).abs().max())
            moved = float((tr[0] - tr_other[0]).abs().max())
            return Modes(moved > GAP_TOL, gap if gap > GAP_TOL else 0.0, True)
        except Exception:  # a user module that needs other inputs: fall back below
            pass
    batch = isinstance(module, nn.modules.batchnorm._BatchNorm)
    running = getattr(module, "running_mean", None) is not None
    return Modes(batch, float("nan") if running else 0.0, False)


LOCAL, SYNCED, PER_EXAMPLE = "local", "synced", "example-wise"
STATISTICS_HELP: dict[str, str] = {
    LOCAL: "each device normalizes with its own part of the batch "
    "(nn.SyncBatchNorm.convert_sync_batchnorm would sync it)",
    SYNCED: "statistics all-reduced over the devices' batches",
    PER_EXAMPLE: "each example's own statistics, nothing to synchronize",
}


def statistics_of(module: nn.Module, modes: Modes) -> str:
    """Where a module's statistics come from under data-parallel training."""
    if isinstance(module, nn.SyncBatchNorm):
        return SYNCED
    return LOCAL if modes.batch_dependent else PER_EXAMPLE


# ---- the findings --------------------------------------------------------------------


@dataclass(frozen=True)
class NormFinding:
    """One normalization layer of a model and what the checklist says about it."""

    name: str  # module path, e.g. "blocks.0.ln1"
    module_type: str  # "LayerNorm"
    method: str  # METHODS key
    input_shape: tuple[int, ...] | None  # seen by a forward hook on the example input
    axes: str  # "N, H, W", from the registry contract for that shape
    keeps: str  # axes that keep separate statistics
    placement: str  # PRE, POST, BRANCH, FINAL or NONE
    has_gamma: bool
    has_beta: bool
    running_buffers: tuple[str, ...]  # running-statistics buffers the module holds
    modes: Modes  # batch dependence and train/eval difference, measured on the module
    statistics: str  # LOCAL, SYNCED or PER_EXAMPLE under data-parallel training
    buffers_in_state_dict: bool  # all of them are saved with the model
    fed_by: str | None  # the conv/linear module whose output it normalizes
    fed_by_bias: bool  # that layer has a bias
    needless_bias: bool  # ... and this norm cancels it


@dataclass(frozen=True)
class ParamGroups:
    """An optimizer recipe: which parameters get weight decay and which do not."""

    decay: tuple[str, ...]  # weights of linear / conv layers (and other ≥ 2-D weights)
    no_decay: tuple[str, ...]  # normalization γ/β and every bias
    norm_params: tuple[str, ...]  # the γ/β among no_decay

    def groups(self, model: nn.Module, weight_decay: float) -> list[dict[str, object]]:
        """Parameter groups in the form torch.optim optimizers take."""
        params = dict(model.named_parameters())
        return [
            {"params": [params[n] for n in self.decay], "weight_decay": weight_decay},
            {"params": [params[n] for n in self.no_decay], "weight_decay": 0.0},
        ]


@dataclass(frozen=True)
class DecayCheck:
    """What a real optimizer's param_groups give the normalization parameters."""

    recipe: str  # how the optimizer was built, e.g. "AdamW(model.parameters(), ...)"
    decayed: tuple[str, ...]  # norm γ/β in a param group with weight_decay > 0
    exempt: tuple[str, ...]  # norm γ/β in a group with weight_decay == 0
    decays: tuple[float, ...]  # the distinct weight_decay values the decayed ones get


def decay_check(model: nn.Module, optimizer: torch.optim.Optimizer, recipe: str) -> DecayCheck:
    """Read each norm γ/β's weight decay off `optimizer.param_groups` (by identity)."""
    norms = {n for n, m in model.named_modules() if method_of(m) is not None}
    names = {id(p): n for n, p in model.named_parameters()}
    decay = {
        names[id(p)]: float(g.get("weight_decay", 0.0))
        for g in optimizer.param_groups
        for p in g["params"]
        if id(p) in names
    }
    ours = [n for n in names.values() if n.rpartition(".")[0] in norms and n in decay]
    return DecayCheck(
        recipe,
        tuple(n for n in ours if decay[n] > 0),
        tuple(n for n in ours if decay[n] == 0),
        tuple(sorted({decay[n] for n in ours if decay[n] > 0})),
    )


@dataclass(frozen=True)
class AuditReport:
    """The checklist for one model."""

    model_name: str
    findings: tuple[NormFinding, ...]
    residual_adds: int  # residual additions found in the traced graph
    traced: bool  # False: torch.fx could not trace it, placements are unknown
    param_groups: ParamGroups
    optimizers: tuple[DecayCheck, ...] = ()  # real AdamW optimizers built on the model

    def finding(self, name: str) -> NormFinding:
        return next(f for f in self.findings if f.name == name)

    @property
    def placements(self) -> dict[str, str]:
        return {f.name: f.placement for f in self.findings}

    @property
    def needless_biases(self) -> tuple[str, ...]:
        return tuple(f.fed_by for f in self.findings if f.needless_bias and f.fed_by)

    def _modes_answer(self) -> str:
        """The batch / train-vs-eval answer, from each module's measured modes."""
        fs = self.findings
        batch = sorted({f.module_type for f in fs if f.modes.batch_dependent})
        gaps = [f for f in fs if f.modes.train_eval_gap != 0.0]  # NaN: not measured
        parts = []
        if batch:
            verb = "uses" if len(batch) == 1 else "use"
            parts.append(f"{', '.join(batch)} {verb} the batch's statistics in training")
        if gaps:
            kinds = sorted({f.module_type for f in gaps})
            sizes = [f.modes.train_eval_gap for f in gaps if f.modes.measured]
            by = f" (outputs up to {max(sizes):.3g} apart on a test input)" if sizes else ""
            verb = "computes" if len(kinds) == 1 else "compute"
            parts.append(f"{', '.join(kinds)} {verb} differently in evaluation{by}")
        if parts:
            return "yes: " + "; ".join(parts)
        how = "measured" if all(f.modes.measured for f in fs) else "read off the modules"
        return f"no ({how}): each sample alone sets its output, the same in both modes"

    def _statistics_answer(self) -> str:
        """Local, synced or example-wise statistics, counted by module type."""
        out = []
        for kind in (LOCAL, SYNCED, PER_EXAMPLE):
            types = sorted({f.module_type for f in self.findings if f.statistics == kind})
            if types:
                n = sum(f.statistics == kind for f in self.findings)
                out.append(f"{kind} ({n}: {', '.join(types)}): {STATISTICS_HELP[kind]}")
        return "; ".join(out)

    def checklist(self) -> tuple[tuple[str, str], ...]:
        """(check, answer) pairs in the order of the source texts' checklist."""
        fs = self.findings
        kinds = sorted({f.module_type for f in fs}) or ["none"]
        places = sorted({f.placement for f in fs})
        running = [f for f in fs if f.running_buffers]
        no_affine = [f.name for f in fs if not f.has_gamma]
        no_beta = [f.name for f in fs if f.has_gamma and not f.has_beta]
        return (
            ("Normalization layers", f"{len(fs)}: {', '.join(kinds)}"),
            ("Normalized axes", "; ".join(sorted({f"{f.module_type}: {f.axes}" for f in fs}))),
            (
                "Before or after the residual add",
                ", ".join(places) if self.traced else "unknown (torch.fx could not trace it)",
            ),
            ("Depends on the batch / differs train vs eval", self._modes_answer()),
            ("Statistics under data-parallel training", self._statistics_answer()),
            (
                "γ and β present",
                "all"
                if not no_affine and not no_beta
                else "; ".join(
                    s
                    for s in (
                        f"no γ/β: {', '.join(no_affine)}" if no_affine else "",
                        f"γ only (no β): {', '.join(no_beta)}" if no_beta else "",
                    )
                    if s
                ),
            ),
            (
                "Bias disabled before per-channel norms (BatchNorm, InstanceNorm)",
                f"no: needless bias in {', '.join(self.needless_biases)}"
                if self.needless_biases
                else "yes, or no such layer",
            ),
            (
                "Running statistics saved in the checkpoint",
                "no running statistics"
                if not running
                else (
                    "yes, in the state_dict"
                    if all(f.buffers_in_state_dict for f in running)
                    else "NO: some are not in the state_dict"
                ),
            ),
            ("Normalization parameters excluded from weight decay", self._decay_answer()),
        )

    def _decay_answer(self) -> str:
        """Each real optimizer's verdict, read off its param_groups."""
        if not any(f.has_gamma or f.has_beta for f in self.findings):
            return "nothing to exempt: the norm layers have no γ/β"
        out = []
        for c in self.optimizers:
            n, k = len(c.decayed) + len(c.exempt), len(c.decayed)
            wd = ", ".join(f"{d:g}" for d in c.decays)
            if k == 0:
                out.append(f"{c.recipe}: no norm γ/β decayed (0 of {n})")
            elif k == n:
                out.append(f"{c.recipe}: every norm γ/β decayed ({n} of {n}, weight_decay {wd})")
            else:
                out.append(f"{c.recipe}: {k} of {n} norm γ/β decayed (weight_decay {wd})")
        return "; ".join(out) or "no optimizer checked"


def param_groups(model: nn.Module) -> ParamGroups:
    """Decay the weights of linear/conv layers; exempt normalization γ/β and every bias."""
    norm_names = {n for n, m in model.named_modules() if method_of(m) is not None}
    decay, no_decay, norm_params = [], [], []
    for name, p in model.named_parameters():
        owner, _, leaf = name.rpartition(".")
        if owner in norm_names:
            no_decay.append(name)
            norm_params.append(name)
        elif leaf == "bias" or p.ndim < 2:
            no_decay.append(name)
        else:
            decay.append(name)
    return ParamGroups(tuple(decay), tuple(no_decay), tuple(norm_params))
