"""A normalization audit of real torch models, and of uploaded state_dicts.

The source texts end with a checklist: which normalization layers a model has and
over which axes, whether each sits before or after its residual add, whether γ
and β are there, whether a layer before BatchNorm carries a bias the mean
subtraction removes anyway, whether running statistics exist and are saved, and
whether normalization parameters are kept out of weight decay. `audit()` runs that
checklist on a model by inspecting its modules, tracing its graph with torch.fx
(placement relative to the residual add), recording input shapes with forward
hooks, and reading its state_dict. `audit_state_dict()` does what can be done
from saved tensors alone.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import pandas as pd
import safetensors.torch
import torch
import torch.fx as fx
import torch.nn.functional as F
from torch import nn

from normviz.core import NormConfigError, contract
from normviz.layouts import LAYOUTS
from normviz.methods import METHODS


class AuditError(ValueError):
    """A model or file the audit cannot read; the message says why."""


# ---- which torch module is which registry method -----------------------------------

# Order matters: the first isinstance match wins.
NORM_TYPES: tuple[tuple[type[nn.Module], str], ...] = (
    (nn.modules.batchnorm._BatchNorm, "batch"),  # BatchNorm1d/2d/3d, SyncBatchNorm
    (nn.modules.instancenorm._InstanceNorm, "instance"),
    (nn.GroupNorm, "group"),
    (nn.LayerNorm, "layer"),
    (nn.RMSNorm, "rms"),
)
WEIGHT_LAYERS: tuple[type[nn.Module], ...] = (nn.Linear, nn.modules.conv._ConvNd)

PRE, POST, BRANCH, FINAL, NONE = (
    "pre-norm",
    "post-norm",
    "inside the residual branch",
    "after the residual blocks, outside any branch",
    "no residual connection",
)
PLACEMENT_HELP: dict[str, str] = {
    PRE: "normalizes the input of a residual branch; the skip path bypasses it",
    POST: "normalizes the sum x + F(x); every path goes through it",
    BRANCH: "sits inside F, after a convolution or linear layer; the skip path bypasses it",
    FINAL: "normalizes the stream after pre-norm residual blocks (a final norm), or later",
    NONE: "the model has no residual add around it",
}


def method_of(module: nn.Module) -> str | None:
    """The METHODS key of a torch normalization module, or None for anything else."""
    for cls, key in NORM_TYPES:
        if isinstance(module, cls):
            return key
    return None


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
class AuditReport:
    """The checklist for one model."""

    model_name: str
    findings: tuple[NormFinding, ...]
    residual_adds: int  # residual additions found in the traced graph
    traced: bool  # False: torch.fx could not trace it, placements are unknown
    param_groups: ParamGroups

    def finding(self, name: str) -> NormFinding:
        return next(f for f in self.findings if f.name == name)

    @property
    def placements(self) -> dict[str, str]:
        return {f.name: f.placement for f in self.findings}

    @property
    def needless_biases(self) -> tuple[str, ...]:
        return tuple(f.fed_by for f in self.findings if f.needless_bias and f.fed_by)

    def checklist(self) -> tuple[tuple[str, str], ...]:
        """(check, answer) pairs in the order of the source texts' checklist."""
        fs = self.findings
        kinds = sorted({f.module_type for f in fs}) or ["none"]
        places = sorted({f.placement for f in fs})
        running = [f for f in fs if f.running_buffers]
        no_affine = [f.name for f in fs if not f.has_gamma]
        no_beta = [f.name for f in fs if f.has_gamma and not f.has_beta]
        batch_dep = sorted({f.module_type for f in fs if METHODS[f.method].batch_dependent})
        return (
            ("Normalization layers", f"{len(fs)}: {', '.join(kinds)}"),
            ("Normalized axes", "; ".join(sorted({f"{f.module_type}: {f.axes}" for f in fs}))),
            (
                "Before or after the residual add",
                ", ".join(places) if self.traced else "unknown (torch.fx could not trace it)",
            ),
            (
                "Depends on the batch / differs train vs eval",
                f"yes: {', '.join(batch_dep)}" if batch_dep else "no: statistics per sample",
            ),
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
            (
                "Normalization parameters excluded from weight decay",
                f"with the recipe below: {len(self.param_groups.norm_params)} norm parameters "
                "and every bias get weight_decay=0",
            ),
        )


# ---- graph analysis with torch.fx -----------------------------------------------------

_ADD_TARGETS = (operator.add, operator.iadd, torch.add)


def _ancestors(node: fx.Node, memo: dict[fx.Node, frozenset[fx.Node]]) -> frozenset[fx.Node]:
    """Every node `node` depends on (not itself); iterative, graphs can be deep."""
    if node in memo:
        return memo[node]
    stack = [node]
    while stack:
        n = stack[-1]
        pending = [a for a in n.all_input_nodes if a not in memo]
        if pending:
            stack.extend(pending)
            continue
        stack.pop()
        acc: set[fx.Node] = set()
        for a in n.all_input_nodes:
            acc.add(a)
            acc |= memo[a]
        memo[n] = frozenset(acc)
    return memo[node]


def _is_add(node: fx.Node) -> bool:
    if node.op == "call_function" and node.target in _ADD_TARGETS:
        return True
    return node.op == "call_method" and node.target in ("add", "add_")


def residual_adds(graph: fx.Graph) -> list[tuple[fx.Node, fx.Node, fx.Node]]:
    """(add, skip, branch) for every add whose one operand is computed from the other."""
    memo: dict[fx.Node, frozenset[fx.Node]] = {}
    out = []
    for node in graph.nodes:
        if not _is_add(node) or len(node.args) < 2:
            continue
        u, v = node.args[0], node.args[1]
        if not (isinstance(u, fx.Node) and isinstance(v, fx.Node)):
            continue
        if u in _ancestors(v, memo):
            out.append((node, u, v))
        elif v in _ancestors(u, memo):
            out.append((node, v, u))
    return out


def _is_pre(
    norm: fx.Node,
    adds: list[tuple[fx.Node, fx.Node, fx.Node]],
    memo: dict[fx.Node, frozenset[fx.Node]],
    within: fx.Node | None = None,
) -> bool:
    """True when `norm` opens a residual branch: it normalizes the add's skip operand.

    `within`: only that add's branch counts.
    """
    inp = norm.args[0] if norm.args else None
    return any(
        skip is inp and (norm is branch or norm in _ancestors(branch, memo))
        for add, skip, branch in adds
        if within is None or add is within
    )


def _placement(
    norm: fx.Node,
    adds: list[tuple[fx.Node, fx.Node, fx.Node]],
    memo: dict[fx.Node, frozenset[fx.Node]],
    norms: list[fx.Node],
) -> str:
    """Where a norm node sits relative to the residual adds (see PLACEMENT_HELP)."""
    inp = norm.args[0] if norm.args else None
    if _is_pre(norm, adds, memo):
        return PRE  # (checked first: in pre-norm the input is often the previous add)
    fed_by_add = next((add for add, _, _ in adds if inp is add), None)
    if fed_by_add is not None:
        # a norm after a sum whose branch already opened with a norm is the final norm
        # of a pre-norm stream (GPT-2's ln_f), not post-norm
        if any(_is_pre(n, adds, memo, within=fed_by_add) for n in norms):
            return FINAL
        return POST
    if any(
        (norm is branch or norm in _ancestors(branch, memo))
        and norm is not skip
        and norm not in _ancestors(skip, memo)
        for _, skip, branch in adds
    ):
        return BRANCH
    if any(add in _ancestors(norm, memo) for add, _, _ in adds):
        return FINAL
    return NONE


# ---- the audit ---------------------------------------------------------------------------


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


def _describe_axes(
    method: str, shape: tuple[int, ...] | None, module: nn.Module
) -> tuple[str, str]:
    """(pooled axes, kept axes) named in the registry's layout letters when the shape fits one."""
    groups = getattr(module, "num_groups", None) if METHODS[method].grouped else None
    for layout in LAYOUTS.values():
        if shape is None or len(shape) != layout.rank:
            continue
        if method in ("layer", "rms"):
            # torch's LayerNorm/RMSNorm pool the trailing normalized_shape dims
            want = tuple(getattr(module, "normalized_shape", ()))
            if tuple(shape[len(shape) - len(want) :]) != want:
                continue
            con_axes = tuple(layout.axes[len(shape) - len(want) :])
            if con_axes != METHODS[method].reduces[layout.key]:
                continue
        elif not layout.channel_first:
            continue  # torch's BatchNorm/InstanceNorm/GroupNorm take channels at dim 1
        try:
            con = contract(method, layout.key, shape, groups=groups)
        except NormConfigError:
            continue
        return ", ".join(con.axes), ", ".join(con.kept)
    if method in ("layer", "rms"):
        k = len(getattr(module, "normalized_shape", ()))
        return f"the last {k} dim(s)", "all leading dims"
    return "every dim but dim 1 (per channel)", "dim 1 (channels)"


def audit(model: nn.Module, example: torch.Tensor, name: str = "model") -> AuditReport:
    """Run the checklist on `model`, using `example` as input for shapes and tracing.

    Raises:
        AuditError: the model has no normalization layer or fails on the example.
    """
    modules = dict(model.named_modules())
    norms = {n: m for n, m in modules.items() if method_of(m) is not None}
    if not norms:
        raise AuditError(f"{name} has no normalization layer to audit")
    shapes: dict[str, tuple[int, ...]] = {}

    def record(name: str) -> Callable[..., None]:
        def hook(mod: nn.Module, args: tuple[object, ...], out: object) -> None:
            if args and isinstance(args[0], torch.Tensor):
                shapes.setdefault(name, tuple(args[0].shape))

        return hook  # returns None, so the module's output is left as it is

    hooks = [m.register_forward_hook(record(n)) for n, m in norms.items()]
    was_training = model.training
    try:
        model.eval()  # eval: the audit must not move BatchNorm's running statistics
        with torch.no_grad():
            model(example)
    except Exception as e:  # any failure of a user model is reported, not raised through
        raise AuditError(f"{name} failed on an input of shape {tuple(example.shape)}: {e}") from e
    finally:
        for h in hooks:
            h.remove()
        model.train(was_training)

    try:
        graph = fx.symbolic_trace(model).graph
        traced = True
    except Exception:  # data-dependent control flow: placements stay unknown
        graph, traced = None, False
    memo: dict[fx.Node, frozenset[fx.Node]] = {}
    adds = residual_adds(graph) if graph is not None else []
    norm_nodes: dict[str, fx.Node] = {}
    if graph is not None:
        norm_nodes = {
            str(n.target): n for n in graph.nodes if n.op == "call_module" and n.target in norms
        }
    state_keys = set(model.state_dict().keys())
    findings = []
    for n, m in norms.items():
        method = method_of(m)
        assert method is not None
        node = norm_nodes.get(n)
        placement = (
            _placement(node, adds, memo, list(norm_nodes.values()))
            if node is not None
            else "unknown"
        )
        fed_by, fed_bias, needless = None, False, False
        if node is not None and node.args and isinstance(node.args[0], fx.Node):
            src = node.args[0]
            if src.op == "call_module" and isinstance(modules[str(src.target)], WEIGHT_LAYERS):
                fed_by = str(src.target)
                fed_bias = modules[fed_by].bias is not None
                # an output that also feeds something else needs its bias there
                needless = fed_bias and len(src.users) == 1 and bias_is_needless(method)
        running = tuple(
            b
            for b in ("running_mean", "running_var", "num_batches_tracked")
            if getattr(m, b, None) is not None
        )
        axes, keeps = _describe_axes(method, shapes.get(n), m)
        findings.append(
            NormFinding(
                name=n,
                module_type=type(m).__name__,
                method=method,
                input_shape=shapes.get(n),
                axes=axes,
                keeps=keeps,
                placement=placement,
                has_gamma=getattr(m, "weight", None) is not None,
                has_beta=getattr(m, "bias", None) is not None,
                running_buffers=running,
                buffers_in_state_dict=all(f"{n}.{b}" in state_keys for b in running),
                fed_by=fed_by,
                fed_by_bias=fed_bias,
                needless_bias=needless,
            )
        )
    return AuditReport(name, tuple(findings), len(adds), traced, param_groups(model))


# ---- a small zoo of real models ----------------------------------------------------------


class ResNetBlock(nn.Module):
    """A basic ResNet block; conv1 keeps a bias that bn1 cancels (the audit should say so)."""

    def __init__(self, c: int = 16) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=True)  # needless: bn1 removes it
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (N, C, H, W)
        h = F.relu(self.bn1(self.conv1(x)))
        h = self.bn2(self.conv2(h))
        return F.relu(x + h)


class StyleResBlock(nn.Module):
    """The residual block of fast style transfer: conv → InstanceNorm → ReLU → conv → IN."""

    def __init__(self, c: int = 16) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1)  # bias=True by default: in1 cancels it
        self.in1 = nn.InstanceNorm2d(c, affine=True)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1)  # same
        self.in2 = nn.InstanceNorm2d(c, affine=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (N, C, H, W)
        h = F.relu(self.in1(self.conv1(x)))
        return x + self.in2(self.conv2(h))


class FeedForward(nn.Module):
    """Linear → GELU → Linear, the transformer MLP."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class PreLNBlock(nn.Module):
    """x + Attn(LN(x)), then x + MLP(LN(x)): GPT-2's block."""

    def __init__(self, d: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = FeedForward(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, C)
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class PostLNBlock(nn.Module):
    """LN(x + Attn(x)), then LN(x + MLP(x)): the original transformer's block."""

    def __init__(self, d: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln1 = nn.LayerNorm(d)
        self.mlp = FeedForward(d)
        self.ln2 = nn.LayerNorm(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, C)
        x = self.ln1(x + self.attn(x, x, x, need_weights=False)[0])
        return self.ln2(x + self.mlp(x))


class GNResBlock(nn.Module):
    """GroupNorm → SiLU → conv, twice, around a skip (the diffusion U-Net block)."""

    def __init__(self, c: int, groups: int = 4) -> None:
        super().__init__()
        self.gn1 = nn.GroupNorm(groups, c)
        self.conv1 = nn.Conv2d(c, c, 3, padding=1)
        self.gn2 = nn.GroupNorm(groups, c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv1(F.silu(self.gn1(x)))
        h = self.conv2(F.silu(self.gn2(h)))
        return x + h


class SmallUNet(nn.Module):
    """One level of a U-Net: stem, GroupNorm res-block, down, res-block, up, concat skip, head."""

    def __init__(self, c_in: int = 3, c: int = 16) -> None:
        super().__init__()
        self.stem = nn.Conv2d(c_in, c, 3, padding=1)
        self.enc = GNResBlock(c)
        self.down = nn.Conv2d(c, 2 * c, 3, stride=2, padding=1)
        self.mid = GNResBlock(2 * c)
        self.up = nn.ConvTranspose2d(2 * c, c, 2, stride=2)
        self.dec_conv = nn.Conv2d(2 * c, c, 3, padding=1)  # bias kept: GroupNorm follows
        self.dec_norm = nn.GroupNorm(4, c)
        self.head = nn.Conv2d(c, c_in, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (N, C, H, W), H and W even
        s = self.enc(self.stem(x))
        h = self.up(self.mid(self.down(s)))
        h = F.silu(self.dec_norm(self.dec_conv(torch.cat([h, s], dim=1))))
        return self.head(h)


class SwiGLU(nn.Module):
    """W₂ (SiLU(W₁ x) ⊙ W₃ x), without biases, as Llama's MLP."""

    def __init__(self, d: int) -> None:
        super().__init__()
        hidden = 8 * d // 3
        self.w1 = nn.Linear(d, hidden, bias=False)
        self.w3 = nn.Linear(d, hidden, bias=False)
        self.w2 = nn.Linear(hidden, d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention without biases (q, k, v and output projections)."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.proj = nn.Linear(d, d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, C)
        # size() one axis at a time: torch.fx can trace that, not tuple unpacking
        b, t, c = x.size(0), x.size(1), x.size(2)
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, heads, T, C/heads)
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class RMSDecoderBlock(nn.Module):
    """A Llama-style decoder block: pre-norm RMSNorm, causal attention, SwiGLU, no biases."""

    def __init__(self, d: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.attn_norm = nn.RMSNorm(d, eps=1e-5)
        self.attn = CausalSelfAttention(d, heads)
        self.mlp_norm = nn.RMSNorm(d, eps=1e-5)
        self.mlp = SwiGLU(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, C)
        x = x + self.attn(self.attn_norm(x))
        return x + self.mlp(self.mlp_norm(x))


@dataclass(frozen=True)
class ZooModel:
    """A model the app builds and audits, with an example input shape and what to expect."""

    key: str
    label: str
    description: str
    build: Callable[[], nn.Module]
    example_shape: tuple[int, ...]

    def example(self, seed: int = 0) -> torch.Tensor:
        return torch.randn(self.example_shape, generator=torch.Generator().manual_seed(seed))


ZOO: dict[str, ZooModel] = {
    z.key: z
    for z in (
        ZooModel(
            "resnet",
            "ResNet basic block (BatchNorm)",
            "conv → BatchNorm → ReLU → conv → BatchNorm, plus the skip; conv1 keeps a bias",
            ResNetBlock,
            (2, 16, 8, 8),
        ),
        ZooModel(
            "pre_ln",
            "Pre-LN transformer block",
            "x + Attn(LayerNorm(x)), then x + MLP(LayerNorm(x)), as in GPT-2",
            PreLNBlock,
            (2, 6, 32),
        ),
        ZooModel(
            "post_ln",
            "Post-LN transformer block",
            "LayerNorm(x + Attn(x)), then LayerNorm(x + MLP(x)), as in the original transformer",
            PostLNBlock,
            (2, 6, 32),
        ),
        ZooModel(
            "unet",
            "Small U-Net (GroupNorm)",
            "GroupNorm residual blocks at two resolutions, a concatenated skip, GroupNorm decoder",
            SmallUNet,
            (1, 3, 16, 16),
        ),
        ZooModel(
            "style",
            "Style-transfer residual block (InstanceNorm)",
            "conv → InstanceNorm → ReLU → conv → InstanceNorm, plus the skip; convs keep biases",
            StyleResBlock,
            (1, 16, 12, 12),
        ),
        ZooModel(
            "rms_decoder",
            "RMSNorm decoder block",
            "Llama-style: RMSNorm before causal attention and before a SwiGLU MLP, no biases",
            RMSDecoderBlock,
            (2, 6, 32),
        ),
    )
}


def audit_zoo_model(key: str, seed: int = 0) -> AuditReport:
    """Build a zoo model with a fixed seed and audit it."""
    if key not in ZOO:
        raise AuditError(f"unknown model {key!r}: choose one of {', '.join(ZOO)}")
    z = ZOO[key]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = z.build()
    return audit(model, z.example(seed), z.label)


def zoo_state_dict(key: str, seed: int = 0, warmup: int = 0) -> dict[str, torch.Tensor]:
    """A zoo model's state_dict, after `warmup` training-mode forward passes.

    The passes move BatchNorm's running statistics as a short training run would.
    """
    if key not in ZOO:
        raise AuditError(f"unknown model {key!r}: choose one of {', '.join(ZOO)}")
    z = ZOO[key]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = z.build().train()
        with torch.no_grad():
            for i in range(warmup):
                model(z.example(seed + 1 + i) * 2 + 1)  # data with mean 1 and std 2
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def zoo_safetensors(key: str, seed: int = 0, warmup: int = 3) -> bytes:
    """A zoo model's state_dict as .safetensors bytes: a sample file for the upload path."""
    tensors = zoo_state_dict(key, seed, warmup)
    return safetensors.torch.save({k: v.contiguous() for k, v in tensors.items()})


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
        "from torch import nn\n\n"
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


# ---- uploaded state_dicts ----------------------------------------------------------------

_NAME_HINTS: tuple[tuple[str, str], ...] = (
    (r"(^|[._])(bn|batchnorm|batch_norm)\d*($|[._])", "batch"),
    (r"(^|[._])(gn|groupnorm|group_norm)\d*($|[._])", "group"),
    (r"(^|[._])(in|instancenorm|instance_norm)\d*($|[._])", "instance"),
    (r"rms", "rms"),
    (r"(^|[._])(ln|layernorm|layer_norm|ln_f|ln_\d+)\d*($|[._])", "layer"),
    (r"norm", "layer"),  # LayerNorm or RMSNorm; the name alone cannot tell
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


@dataclass(frozen=True)
class StateDictReport:
    """What an uploaded state_dict says about normalization."""

    n_tensors: int
    n_elements: int
    norms: tuple[SavedNorm, ...]
    decay: tuple[str, ...]  # ≥ 2-D weights (by name: ...weight)
    no_decay: tuple[str, ...]  # 1-D weights and biases (γ, β, biases)


def _natural(name: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key that puts layers.2 before layers.10 (files do not keep the model's order)."""
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"(\d+)", name))


def _guess(prefix: str) -> str | None:
    low = prefix.lower()
    for pattern, key in _NAME_HINTS:
        if re.search(pattern, low):
            return key
    return None


def audit_state_dict(tensors: Mapping[str, torch.Tensor]) -> StateDictReport:
    """Find normalization parameters and buffers in saved tensors, by shape and name.

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
        norms.append(SavedNorm(prefix, kind, method, params, tuple(has_buffers), tuple(notes)))
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
