"""The audits as tables, and the optimizer recipe as code."""

from __future__ import annotations

import pandas as pd

from normviz.choose.findings import AuditReport, ParamGroups
from normviz.choose.saved import StateDictReport

_SHORT = {"running_mean": "mean", "running_var": "var", "num_batches_tracked": "count"}


def findings_frame(report: AuditReport) -> pd.DataFrame:
    """One row per normalization layer: what it is, where it sits, what it holds."""
    return pd.DataFrame(
        [
            {
                "layer": f.name,
                "type": f.module_type,
                "input shape": "×".join(map(str, f.input_shape)) if f.input_shape else "?",
                "pools": f.axes,
                "keeps apart": f.keeps,
                "placement": f.placement,
                "γ": "yes" if f.has_gamma else "no",
                "β": "yes" if f.has_beta else "no",
                "running stats": ", ".join(_SHORT[b] for b in f.running_buffers) or "none",
                "fed by": (f"{f.fed_by} (bias)" if f.fed_by_bias else f.fed_by) or "",
                "needless bias": "YES" if f.needless_bias else "",
            }
            for f in report.findings
        ]
    ).set_index("layer")


def checklist_frame(report: AuditReport) -> pd.DataFrame:
    return pd.DataFrame(report.checklist(), columns=["check", "answer"]).set_index("check")


def saved_norms_frame(report: StateDictReport) -> pd.DataFrame:
    """One row per module prefix that holds normalization parameters or buffers."""
    return pd.DataFrame(
        [
            {
                "module": n.prefix or "(top level)",
                "looks like": n.kind,
                "parameters": ", ".join(n.params) or "none",
                "buffers": ", ".join(n.buffers) or "none",
                "notes": "; ".join(n.notes),
            }
            for n in report.norms
        ],
        columns=["module", "looks like", "parameters", "buffers", "notes"],
    ).set_index("module")


def optimizer_code(groups: ParamGroups, weight_decay: float = 0.01) -> str:
    """Python that builds AdamW with the two parameter groups of this recipe."""
    return (
        "import torch\n"
        "from torch import nn\n\n"
        "# model: the nn.Module you train (above: the audited one)\n"
        "NORMS = (nn.modules.batchnorm._BatchNorm, nn.GroupNorm, nn.LayerNorm,\n"
        "         nn.RMSNorm, nn.modules.instancenorm._InstanceNorm)\n"
        "norm_names = {n for n, m in model.named_modules() if isinstance(m, NORMS)}\n"
        "decay, no_decay = [], []\n"
        "for name, p in model.named_parameters():\n"
        "    owner, _, leaf = name.rpartition('.')\n"
        "    if owner in norm_names or leaf == 'bias' or p.ndim < 2:\n"
        "        no_decay.append(p)  # γ, β and biases: decay would only shrink them\n"
        "    else:\n"
        "        decay.append(p)\n"
        "optimizer = torch.optim.AdamW([\n"
        f"    {{'params': decay, 'weight_decay': {weight_decay:g}}},  "
        f"# {len(groups.decay)} tensors\n"
        f"    {{'params': no_decay, 'weight_decay': 0.0}},  # {len(groups.no_decay)} tensors\n"
        "], lr=3e-4)\n"
    )
