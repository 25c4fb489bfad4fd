"""Audit real models: one zoo model in detail ("inspect"), and the whole zoo at a glance.

The source texts end with a checklist. Here it runs on real torch models built in
the app (`zoo.py`) by the audit engine (`engine.py`); the tables and the optimizer
recipe come from `tables.py`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from normviz.choose.engine import NAIVE
from normviz.choose.findings import PLACEMENT_HELP, AuditReport, DecayCheck
from normviz.choose.tables import checklist_frame, findings_frame, optimizer_code
from normviz.choose.zoo import MODELS, ZOO, audit_zoo_model
from normviz.knobs import Knob, Value
from normviz.sections import Extra, Progress, Section

# ---- inspect: one model, the whole checklist -------------------------------------------

INSPECT_INTRO = (
    "The source texts end with a checklist. Here it runs on real torch models built in "
    "the app: the layers are found by type, their placement by tracing the model's graph "
    "(torch.fx) back from each residual add and the module tree (which blocks add a "
    "skip), their input shapes with forward hooks, and the saved buffers from the "
    "state_dict. A copy of each layer runs in training and evaluation mode on a test "
    "input, and weight decay is read off real AdamW optimizers built on the model."
)
INSPECT_KNOBS = (
    Knob("model", next(iter(ZOO)), choices=tuple(MODELS), label="Model", widget="select"),
)
OPTIMIZER_FOLD = "Optimizer recipe: no weight decay on γ, β and biases"
DECAY_WHY = (
    "Weight decay pulls γ toward 0 and so fights the scale the layer learned. This recipe "
    "exempts γ, β and biases, as transformer recipes usually do; classic ResNet/ImageNet "
    "recipes decay every parameter. Either way it can change calibration and stability: "
    "if you decay them, say so."
)


@dataclass(frozen=True)
class Inspection:
    """The audit of one zoo model."""

    key: str  # ZOO key
    report: AuditReport


DECAY_FOLD = "Check a real optimizer: which norm γ/β its param_groups decay"


def decay_code(key: str, checks: Sequence[DecayCheck]) -> str:
    """Python that builds this zoo model and a naive AdamW and lists the γ/β it decays."""
    naive = next(c for c in checks if c.recipe == NAIVE)
    n = len(naive.decayed) + len(naive.exempt)
    return (
        "import torch\n"
        "from torch import nn\n\n"
        "from normviz.choose.zoo import MODELS\n\n"
        f"model = MODELS[{key!r}].build()\n"
        "NORMS = (nn.modules.batchnorm._BatchNorm, nn.GroupNorm, nn.LayerNorm,\n"
        "         nn.RMSNorm, nn.modules.instancenorm._InstanceNorm)\n\n\n"
        "def decayed_norm_params(model, optimizer):\n"
        '    """The γ/β of the norm layers that the optimizer\'s param_groups decay."""\n'
        "    norms = {n for n, m in model.named_modules() if isinstance(m, NORMS)}\n"
        "    names = {id(p): n for n, p in model.named_parameters()}\n"
        "    return [\n"
        "        names[id(p)]\n"
        "        for g in optimizer.param_groups\n"
        "        if g['weight_decay'] > 0\n"
        "        for p in g['params']\n"
        "        if names[id(p)].rpartition('.')[0] in norms\n"
        "    ]\n\n\n"
        "naive = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)\n"
        f"print(decayed_norm_params(model, naive))  # {len(naive.decayed)} of {n} norm γ/β\n"
    )


def decay_text(checks: Sequence[DecayCheck]) -> str:
    """Each optimizer's verdict, with the names it decays, from its param_groups."""
    lines = []
    for c in checks:
        names = ", ".join(f"`{n}`" for n in c.decayed) or "none"
        lines.append(f"{c.recipe}: decays {len(c.decayed)} norm γ/β ({names}).")
    return "  \n".join(lines)


def run_inspect(setup: object, knobs: Mapping[str, Value], progress: Progress) -> Inspection:
    key = str(knobs["model"])
    return Inspection(key, audit_zoo_model(key))


def inspect_table(res: Inspection) -> pd.DataFrame:
    return findings_frame(res.report)


def inspect_notes(res: Inspection) -> Sequence[str]:
    """What each placement found in this model means."""
    places = sorted({f.placement for f in res.report.findings})
    return (" · ".join(f"**{p}**: {PLACEMENT_HELP.get(p, 'not traced')}" for p in places),)


def inspect_extras(res: Inspection) -> Sequence[Extra]:
    """The model and its checklist first; the optimizer recipe folded at the end."""
    z = MODELS[res.key]
    g = res.report.param_groups
    shape = " × ".join(map(str, z.example_shape))
    lists = (
        f"Decayed ({len(g.decay)}): {', '.join(f'`{n}`' for n in g.decay)}.  \n"
        f"Not decayed ({len(g.no_decay)}): {', '.join(f'`{n}`' for n in g.no_decay)}."
    )
    return (
        Extra("caption", f"{z.description}. Example input: {shape}.", top=True),
        Extra("static", checklist_frame(res.report), top=True),
        Extra("markdown", lists, fold=OPTIMIZER_FOLD),
        Extra("code", optimizer_code(g), fold=OPTIMIZER_FOLD),
        Extra("caption", DECAY_WHY, fold=OPTIMIZER_FOLD),
    ) + (
        (
            Extra("markdown", decay_text(res.report.optimizers), fold=DECAY_FOLD),
            Extra("code", decay_code(res.key, res.report.optimizers), fold=DECAY_FOLD),
        )
        if res.report.optimizers
        else ()
    )


INSPECT = Section(
    slug="inspect",
    label="Model audit",
    intro=INSPECT_INTRO,
    run=run_inspect,
    knobs=INSPECT_KNOBS,
    table=inspect_table,
    notes=inspect_notes,
    extras=inspect_extras,
)


# ---- the zoo: every model at a glance ----------------------------------------------------

ZOO_INTRO = (
    "Every model of the zoo through the same checklist: which normalization it uses, "
    "where the layers sit around the residual adds, and which biases they make needless."
)


@dataclass(frozen=True)
class ZooOverview:
    """The audit of every zoo model, in ZOO order."""

    reports: tuple[tuple[str, AuditReport], ...]  # (ZOO key, its audit)


def run_zoo(setup: object, knobs: Mapping[str, Value], progress: Progress) -> ZooOverview:
    out = []
    for i, key in enumerate(ZOO):
        progress(i / len(ZOO), f"auditing {ZOO[key].label}")
        out.append((key, audit_zoo_model(key)))
    return ZooOverview(tuple(out))


def zoo_table(res: ZooOverview) -> pd.DataFrame:
    """One row per model: its norms, their placements, the needless biases."""
    rows = []
    for key, r in res.reports:
        rows.append(
            {
                "model": ZOO[key].label,
                "normalization": ", ".join(sorted({f.module_type for f in r.findings})),
                "layers": len(r.findings),
                "residual adds": r.residual_adds,
                "placements": ", ".join(sorted({f.placement for f in r.findings})),
                "needless bias": ", ".join(r.needless_biases),
            }
        )
    return pd.DataFrame(rows).set_index("model")


def zoo_notes(res: ZooOverview) -> Sequence[str]:
    """Counts over the whole zoo, from the audits."""
    findings = [f for _, r in res.reports for f in r.findings]
    places = Counter(f.placement for f in findings)
    spread = "; ".join(f"{p}: {n}" for p, n in places.most_common())
    needless = [(ZOO[k].label, r.needless_biases) for k, r in res.reports if r.needless_biases]
    text = f"{len(res.reports)} models, {len(findings)} normalization layers: {spread}."
    if needless:
        named = "; ".join(f"{label} ({', '.join(b)})" for label, b in needless)
        text += f" A bias the next norm cancels: {named}."
    else:
        text += " No model carries a bias its next norm cancels."
    return (text,)


ZOO_SECTION = Section(
    slug="zoo",
    label="The model zoo",
    intro=ZOO_INTRO,
    run=run_zoo,
    table=zoo_table,
    notes=zoo_notes,
)
