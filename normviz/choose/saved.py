"""The state_dict audit: what saved tensors alone say about normalization.

Without the model's code, the kind of layer is a guess from names and shapes: a
1-D `weight` (γ) with an optional 1-D `bias` (β), and BatchNorm-style running
statistics.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import torch

from normviz.choose.findings import AuditError, bias_is_needless
from normviz.methods import METHODS

# The registry's name hints (the first match wins), then any "norm" as LayerNorm or RMSNorm:
# the name alone cannot tell those two apart.
_NAME_HINTS: tuple[tuple[str, str], ...] = (
    *((m.name_hint, k) for k, m in METHODS.items() if m.name_hint),
    (r"norm", "layer"),
)
_BUFFERS = ("running_mean", "running_var", "num_batches_tracked")


@dataclass(frozen=True)
class SavedNorm:
    """A module prefix in a state_dict that holds normalization parameters or buffers."""

    prefix: str
    kind: str  # what the evidence suggests, in words
    method: str | None  # METHODS key when the evidence is clear
    params: tuple[str, ...]  # "weight (64,)", "bias (64,)"
    buffers: tuple[str, ...]  # running statistics present
    notes: tuple[str, ...]
    fed_by: str | None = None  # the layer whose bias this norm likely cancels (a guess)


@dataclass(frozen=True)
class StateDictReport:
    """What an uploaded state_dict says about normalization."""

    n_tensors: int
    n_elements: int
    norms: tuple[SavedNorm, ...]
    decay: tuple[str, ...]  # ≥ 2-D weights (by name: ...weight)
    no_decay: tuple[str, ...]  # 1-D weights and biases (γ, β, biases)

    @property
    def needless_biases(self) -> tuple[str, ...]:
        """Biases a per-channel norm after them likely cancels, e.g. "stem.0.bias"."""
        return tuple(f"{n.fed_by}.bias" for n in self.norms if n.fed_by is not None)


def _natural(name: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key that puts layers.2 before layers.10 (files do not keep the model's order)."""
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"(\d+)", name))


def _guess(prefix: str) -> str | None:
    low = prefix.lower()
    for pattern, key in _NAME_HINTS:
        if re.search(pattern, low):
            return key
    return None


_WEIGHT_NAMES = ("conv", "fc", "linear", "proj")  # what a layer before "bn1" is called
_NORM_WORD = re.compile(r"^(.*?)(batchnorm|batch_norm|bn|norm|instancenorm|in)(_?\d*)$", re.I)


def _feeder_names(prefix: str) -> tuple[str, ...]:
    """Names the layer just before a norm usually has: "stem.0" before "stem.1",
    "conv1" before "bn1" (nn.Sequential indices, the conv/bn naming habit)."""
    parent, dot, leaf = prefix.rpartition(".")
    if leaf.isascii() and leaf.isdigit():  # (not "²", which int() refuses)
        return (f"{parent}{dot}{int(leaf) - 1}",) if int(leaf) > 0 else ()
    m = _NORM_WORD.match(leaf)
    if m is None:
        return ()
    return tuple(f"{parent}{dot}{m.group(1)}{w}{m.group(3)}" for w in _WEIGHT_NAMES)


def _needless_feeder(
    prefix: str,
    method: str | None,
    prefixes: dict[str, dict[str, torch.Tensor]],
    order: list[str] | None,
) -> str | None:
    """The conv/linear layer whose bias a per-channel norm at `prefix` likely cancels.

    Its output channels and bias size must equal the norm's channels. Which layer
    feeds the norm: with `order` (a torch.save'd state_dict keeps the modules'
    registration order) the layer saved just before it, else the usual names.
    """
    if method is None or not bias_is_needless(method):
        return None
    leaves = prefixes[prefix]
    stat = next((leaves[k] for k in ("weight", "running_mean") if k in leaves), None)
    if stat is None or stat.ndim != 1:
        return None
    c = stat.shape[0]
    if order is not None:
        i = order.index(prefix)
        names: tuple[str, ...] = (order[i - 1],) if i > 0 else ()
    else:
        names = _feeder_names(prefix)
    for name in names:
        w, b = prefixes.get(name, {}).get("weight"), prefixes.get(name, {}).get("bias")
        if w is None or b is None or w.ndim < 2 or b.ndim != 1:
            continue
        if w.shape[0] == c == b.shape[0]:  # its output channels are the norm's
            return name
    return None


def audit_state_dict(tensors: Mapping[str, torch.Tensor], ordered: bool = False) -> StateDictReport:
    """Find normalization parameters and buffers in saved tensors, by shape and name.

    `ordered`: the mapping keeps the model's module order (torch.save of a
    state_dict does; a safetensors file sorts its tensors its own way).

    A normalization layer shows up as a 1-D `weight` (γ) with an optional 1-D `bias`
    (β) of the same size, and BatchNorm-style layers add running_mean, running_var
    and num_batches_tracked. Linear and conv weights are ≥ 2-D.

    Raises:
        AuditError: nothing was loaded, or a value is not a tensor.
    """
    if not tensors:
        raise AuditError("the file holds no tensors")
    for k, v in tensors.items():
        if not isinstance(v, torch.Tensor):
            raise AuditError(f"{k!r} is not a tensor ({type(v).__name__})")
    prefixes: dict[str, dict[str, torch.Tensor]] = {}
    for k, v in tensors.items():
        prefix, _, leaf = k.rpartition(".")
        prefixes.setdefault(prefix, {})[leaf] = v
    norms = []
    for prefix, leaves in prefixes.items():
        w = leaves.get("weight")
        has_buffers = [b for b in _BUFFERS if b in leaves]
        one_d_weight = w is not None and w.ndim == 1
        if not (has_buffers or one_d_weight):
            continue
        guess = _guess(prefix)
        notes: list[str] = []
        if has_buffers:
            method = "instance" if guess == "instance" else "batch"
            kind = f"{METHODS[method].label}-style: running statistics saved"
            rm, rv = leaves.get("running_mean"), leaves.get("running_var")
            nbt = leaves.get("num_batches_tracked")
            if nbt is not None and nbt.numel() == 1:
                steps = int(nbt.item())
                notes.append(f"updated in {steps} training step(s)")
                if steps == 0:
                    notes.append("never updated: evaluation would use mean 0 and variance 1")
            elif rm is not None and rv is not None and bool((rm == 0).all() and (rv == 1).all()):
                notes.append("running mean 0 and variance 1: probably never updated")
            if rv is not None and bool((rv < 0).any()):
                notes.append("negative running variance: the file is damaged")
            if "running_mean" not in leaves or "running_var" not in leaves:
                notes.append("running_mean or running_var missing: evaluation mode cannot work")
        elif (a := leaves.get("alpha")) is not None and a.numel() == 1 and one_d_weight:
            method = "dyt"  # DyT's signature: one scalar α beside γ (and β), no statistics
            kind = f"{METHODS[method].label}-style: a scalar α beside γ, no statistics"
        else:
            method = guess
            b = leaves.get("bias")
            if guess is None:
                kind = "a 1-D weight: likely a normalization scale γ (the name does not say)"
            elif b is None:
                kind = f"{METHODS[guess].label} (by name), γ only"
                if guess == "layer":
                    kind = "RMSNorm, or LayerNorm without β (γ only)"
                    method = "rms"
            else:
                kind = f"{METHODS[guess].label} (by name), γ and β"
        if w is None and not has_buffers:
            continue
        if w is None:
            notes.append("no γ/β: affine=False")
        params = tuple(
            f"{leaf} {tuple(leaves[leaf].shape)}" for leaf in ("weight", "bias") if leaf in leaves
        )
        fed_by = _needless_feeder(prefix, method, prefixes, list(prefixes) if ordered else None)
        if fed_by is not None:
            how = "file order" if ordered else "names"
            notes.append(
                f"needless bias: {fed_by}.bias, which its mean subtraction removes "
                f"(a guess from {how} and shapes)"
            )
        norms.append(
            SavedNorm(prefix, kind, method, params, tuple(has_buffers), tuple(notes), fed_by)
        )
    # parameters by name (weight, in_proj_weight, bias, ...); optimizer state and
    # buffers of a full checkpoint are neither
    decay = tuple(
        k for k, v in tensors.items() if v.ndim >= 2 and k.rpartition(".")[2].endswith("weight")
    )
    no_decay = tuple(
        k
        for k, v in tensors.items()
        if v.ndim == 1 and k.rpartition(".")[2].endswith(("weight", "bias"))
    )
    return StateDictReport(
        n_tensors=len(tensors),
        n_elements=sum(int(v.numel()) for v in tensors.values()),
        norms=tuple(sorted(norms, key=lambda n: _natural(n.prefix))),
        decay=decay,
        no_decay=no_decay,
    )
