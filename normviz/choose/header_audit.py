"""The audit of a model read from its file's header alone: SmolLM2-135M's GGUF.

No tensor is dequantized and no forward runs: the header lists every tensor's name and
storage type and the metadata (architecture, block count, width, ε). The norms are the
tensors named `*norm.weight`; each is RMSNorm (the "llama" architecture the header names
normalizes with RMSNorm, ε from `llama.attention.layer_norm_rms_epsilon`), has a γ and no
β (no `*norm.bias` tensor), and sits where the architecture puts it: `blk.N.attn_norm`
before block N's attention (whose `attn_q`/`attn_k`/`attn_v` read it) and `blk.N.ffn_norm`
before its feed-forward (`ffn_gate`/`ffn_up`), each branch's output added to the
un-normalized stream (pre-norm); `output_norm` after the last block, before the head.
"""

from __future__ import annotations

import re

from torch import nn

from normviz.choose.engine import _describe_axes
from normviz.choose.findings import (
    FINAL,
    PRE,
    AuditError,
    AuditReport,
    NormFinding,
    ParamGroups,
    measure_modes,
    statistics_of,
)

BRANCH_INPUTS = {"attn_norm": ("attn_q", "attn_k", "attn_v"), "ffn_norm": ("ffn_gate", "ffn_up")}


def placement(name: str, tensors: dict[str, str]) -> str:
    """Where a llama norm sits: pre-norm when its block holds the branch it feeds."""
    if name == "output_norm":
        return FINAL
    m = re.fullmatch(r"blk\.(\d+)\.(attn_norm|ffn_norm)", name)
    if m is None:
        return "unknown"
    fed = [f"blk.{m[1]}.{t}.weight" for t in BRANCH_INPUTS[m[2]]]
    return PRE if all(f in tensors for f in fed) else "unknown"


def smollm2_report() -> AuditReport:
    """SmolLM2's norms from the GGUF header (tensor names, types and metadata only).

    Raises:
        AuditError: the wheel is absent (the message gives the install command), or the
            file is not a llama model.
    """
    from normviz.pretrained import smollm2

    try:
        hdr = smollm2.header()
    except (smollm2.NotInstalled, RuntimeError) as e:
        raise AuditError(str(e)) from e
    cfg, tensors = hdr.config, dict(hdr.tensors)
    found = {n.removesuffix(".weight") for n in tensors if n.endswith("norm.weight")}
    order = [n for n in smollm2.NORMS if n in found]  # network order, then any other
    norms = order + sorted(found - set(order))
    module = nn.RMSNorm(cfg.dim, eps=cfg.eps)  # the header's ε and width; γ stays in the file
    shape = (1, smollm2.MAX_TOKENS, cfg.dim)  # (B, T, C): the stream entering each norm
    axes, keeps = _describe_axes("rms", shape, module)
    modes = measure_modes(module, shape)
    findings = tuple(
        NormFinding(
            name=n,
            module_type="RMSNorm",
            method="rms",
            input_shape=shape,
            axes=axes,
            keeps=keeps,
            placement=placement(n, tensors),
            has_gamma=f"{n}.weight" in tensors,
            has_beta=f"{n}.bias" in tensors,
            running_buffers=(),
            modes=modes,
            statistics=statistics_of(module, modes),
            buffers_in_state_dict=True,
            fed_by=None,
            fed_by_bias=False,
            needless_bias=False,
        )
        for n in norms
    )
    norm_params = tuple(f"{n}.weight" for n in norms)
    biases = tuple(n for n in tensors if n.endswith(".bias"))
    decay = tuple(n for n in tensors if n not in norm_params and n not in biases)
    groups = ParamGroups(decay, norm_params + biases, norm_params)
    # every block adds its attention and its feed-forward output back: two adds a block
    adds = 2 * sum(placement(f"blk.{i}.attn_norm", tensors) == PRE for i in range(cfg.blocks))
    name = f"SmolLM2-135M-Instruct ({smollm2.FILE}, header only; RMSNorm ε = {cfg.eps:.0e})"
    return AuditReport(name, findings, adds, True, groups)


__all__ = ["placement", "smollm2_report"]
