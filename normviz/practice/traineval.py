"""Exercise 5: training or evaluation. Which statistics a call uses; whether a batch of one
runs; what the running mean is after a few batches (PyTorch, Keras or cumulative).

Truths come from normviz (normalize's refusals, RunningStats); the tests check each
against torch.nn's modules.
"""

from __future__ import annotations

import random

import torch

from normviz.core import normalize
from normviz.errors import Refusal
from normviz.layouts import LAYOUTS
from normviz.methods import METHODS, STANDARD_METHODS
from normviz.practice.common import Case, Exercise, pick, rng_for
from normviz.practice.show import fmt, section
from normviz.running import RunningStats

SLUG = "train-eval"
LABEL = "Train or eval"
_DIFFER = [m.label for m in METHODS.values() if m.train_eval_differ]
INTRO = (
    f"With torch's default flags, training and evaluation differ for {' and '.join(_DIFFER)} "
    "only; the flag track_running_stats decides it (InstanceNorm built with "
    "track_running_stats=True differs too, BatchNorm with False does not). Which statistics "
    "does a call use, does a batch of one sample run, and where do the running statistics go?"
)
QUESTIONS = ("stats", "one", "running")
STAT_OPTIONS = (
    ("input", "statistics computed from the input it is given"),
    ("running", "the running statistics stored during training"),
)
YES_NO = (("yes", "yes, it runs"), ("no", "no, torch raises an error"))
LINK = ("batchnorm", "the BatchNorm lab")


def _module(case: Case) -> str:
    """`BatchNorm2d(4)`: the torch module for the case (the default ε left out)."""
    return METHODS[case.method].torch_text(case.layout, case.shape, case.groups, eps=None)


def _call(case: Case) -> str:
    """The call as torch needs it: channel-first modules see (B, C, T), as the axes code shows."""
    lay = LAYOUTS[case.layout]
    if METHODS[case.method].torch[case.layout].channel_first and not lay.channel_first:
        t = lay.channel_axis
        return f"norm(x.transpose(1, {t})).transpose(1, {t})"
    return "norm(x)"


def _choice(seed: int, ctor: str, mode: str, question: str, answer: str, why: str) -> Exercise:
    """A question about one call: build the module, set its mode, call it."""
    return Exercise(
        kind=SLUG,
        seed=seed,
        prompt=f"`norm = {ctor}` then `{mode}` then {question}",
        form="choice",
        truth=(answer,),
        explanation=(why,),
        link=LINK,
        options=STAT_OPTIONS if answer in dict(STAT_OPTIONS) else YES_NO,
    )


def _stats(rng: random.Random, seed: int) -> Exercise:
    method = "batch" if rng.random() < 0.6 else rng.choice(STANDARD_METHODS[1:])
    layout = rng.choice(tuple(LAYOUTS))
    training = rng.random() < 0.5
    tracked = method != "batch" or rng.random() < 0.8
    uses_running = method == "batch" and not training and tracked
    C = 4
    groups = 2 if METHODS[method].grouped else None
    case = Case(layout, (8, 4, 4, 4) if layout == "NCHW" else (8, 16, C), method, groups)
    ctor = _module(case)
    if method == "batch" and not tracked:
        ctor = ctor[:-1] + ", track_running_stats=False)"
    mode = "norm.train()" if training else "norm.eval()"
    if uses_running:
        why = "In evaluation BatchNorm normalizes with the running mean and variance it stored."
    elif method == "batch" and training:
        why = "In training BatchNorm uses this batch's statistics (and updates its running ones)."
    elif method == "batch":
        why = "With track_running_stats=False BatchNorm stores none, so it uses the batch's."
    else:
        why = f"{METHODS[method].label} computes the same statistics in training and evaluation."
    prompt = (
        f"`y = {_call(case)}` with x of shape {case.shape_text}. Which statistics normalize x?"
    )
    return _choice(seed, ctor, mode, prompt, "running" if uses_running else "input", why)


def will_run(case: Case, training: bool) -> tuple[bool, str]:
    """Does the call run (as torch decides), and why, in words."""
    x = torch.randn(case.shape, generator=torch.Generator().manual_seed(0))
    C = case.shape[LAYOUTS[case.layout].channel_axis]
    running = RunningStats(C) if case.method == "batch" else None
    try:
        res = normalize(
            x, case.method, case.layout, training=training, running=running, **case.norm_kwargs()
        )  # type: ignore[arg-type]
    except Refusal as e:
        return False, f"torch refuses it: {e}."
    con = res.contract
    if case.method == "batch" and not training:
        return True, "In evaluation BatchNorm uses its running statistics: one sample is fine."
    return True, f"It runs: m = {con.size_text()} values feed each statistic."


def _one(rng: random.Random, seed: int) -> Exercise:
    method = rng.choice(("batch", "batch", "instance", "layer", "group"))
    layout = rng.choice(tuple(LAYOUTS))
    small = rng.random() < 0.6
    shape = (1, 1, 4) if small else (1, 3, 4)
    if layout == "NCHW":
        shape = (1, 4, 1, 1) if small else (1, 4, 2, 2)
    groups = rng.choice((2, 4)) if METHODS[method].grouped else None
    case = Case(layout, shape, method, groups)
    training = rng.random() < 0.7
    ok, why = will_run(case, training)
    mode = "norm.train()" if training else "norm.eval()"
    prompt = (
        f"`{_call(case)}` with a single sample x of shape {case.shape_text}. Does the call run?"
    )
    return _choice(seed, _module(case), mode, prompt, "yes" if ok else "no", why)


def running_means(means: list[float], convention: str, momentum: float | None) -> list[float]:
    """The running mean after each batch (one channel), as RunningStats keeps it."""
    rs = RunningStats(
        1, momentum, "keras" if convention == "keras" else "pytorch", dtype=torch.float64
    )
    out = []
    for m in means:
        rs.update(torch.tensor([m], dtype=torch.float64), torch.ones(1, dtype=torch.float64), 2)
        out.append(float(rs.mean[0]))
    return out


def _running(rng: random.Random, seed: int) -> Exercise:
    convention = rng.choice(("pytorch", "keras", "cumulative"))
    momentum = {"pytorch": rng.choice((0.1, 0.5)), "keras": rng.choice((0.9, 0.5))}.get(convention)
    means = [float(rng.randint(-4, 8)) for _ in range(rng.randint(2, 3))]
    after = running_means(means, convention, momentum)
    rule = {
        "pytorch": f"PyTorch's rule with momentum = {momentum}: new = (1 − m)·old + m·batch",
        "keras": f"Keras's rule with momentum = {momentum}: new = m·old + (1 − m)·batch",
        "cumulative": "PyTorch with momentum=None: the cumulative average of the batch means",
    }[convention]
    steps = " → ".join(["0", *(fmt(v) for v in after)])
    return Exercise(
        kind=SLUG,
        seed=seed,
        prompt=f"A fresh BatchNorm (running mean 0) trains on {len(means)} batches whose "
        f"means for one channel are in the table. {rule}. What is the running mean after "
        "the last batch?",
        form="numbers",
        truth=(repr(after[-1]),),
        explanation=(f"Batch by batch the running mean goes {steps}.",),
        link=LINK,
        fields=("running mean",),
        tolerance=(0.01,),
        table=(("batch", "batch mean"), *((str(i + 1), fmt(m)) for i, m in enumerate(means))),
    )


def make(seed: int) -> Exercise:
    rng = rng_for(SLUG, seed)
    return {"stats": _stats, "one": _one, "running": _running}[pick(QUESTIONS, SLUG, seed)](
        rng, seed
    )


SECTION = section(SLUG, LABEL, INTRO, make)
