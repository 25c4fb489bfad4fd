"""The audit engine: run the checklist on a torch model.

Layers are found by type, their placement by tracing the model's graph with
torch.fx back from each residual add (and the module tree, for blocks without a
skip), their input shapes with forward hooks, and the saved buffers from the
state_dict. Each layer's batch and train/eval behaviour is measured on a copy of
it (`findings.measure_modes`), and weight decay is read off real AdamW optimizers.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import torch
import torch.fx as fx
from torch import nn

from normviz.choose.findings import (
    BETWEEN,
    BRANCH,
    FINAL,
    NONE,
    POST,
    PRE,
    SANDWICH,
    SHORTCUT,
    SKIPLESS,
    WEIGHT_LAYERS,
    AuditError,
    AuditReport,
    DecayCheck,
    NormFinding,
    ParamGroups,
    bias_is_needless,
    decay_check,
    measure_modes,
    method_of,
    param_groups,
    statistics_of,
)
from normviz.choose.residual_adds import _ancestors, residual_adds
from normviz.core import NormConfigError, contract
from normviz.layouts import LAYOUTS
from normviz.methods import METHODS

# ---- graph analysis with torch.fx -----------------------------------------------------

# torch.fx traces by patching torch.nn.Module.__call__ and __getattr__ for the whole
# process while it runs, and puts back what it found when it ends. In a server, where
# every session runs in its own thread, that has two failures: a module another
# session calls meanwhile is sent to the tracer ("NameError: module is not installed
# as a submodule", seen on /residual while a class opened /choose), and two traces at
# once restore each other's patches in the wrong order. So one trace at a time, by a
# tracer that hands every other thread's module calls straight to the module.
_TRACE_LOCK = threading.Lock()


class _OwnThreadTracer(fx.Tracer):
    """An fx.Tracer that records only its own thread's module calls."""

    def __init__(self) -> None:
        super().__init__()
        self._owner = threading.get_ident()

    def call_module(self, m: nn.Module, forward: Callable[..., Any], args: Any, kwargs: Any) -> Any:
        if threading.get_ident() != self._owner:
            return forward(*args, **kwargs)
        return super().call_module(m, forward, args, kwargs)

    def is_leaf_module(self, m: nn.Module, module_qualified_name: str) -> bool:
        # a normalization outside torch.nn (the registry's DyT) is one node, like torch's own
        return method_of(m) is not None or super().is_leaf_module(m, module_qualified_name)

    def getattr(self, attr: str, attr_val: Any, parameter_proxy_cache: dict[str, Any]) -> Any:
        if threading.get_ident() != self._owner:
            return attr_val
        return super().getattr(attr, attr_val, parameter_proxy_cache)


def trace(model: nn.Module) -> fx.Graph:
    """The model's fx graph (as `fx.symbolic_trace(model).graph`), safe beside other
    threads running torch modules; raises what fx raises on an untraceable model."""
    with _TRACE_LOCK:
        return _OwnThreadTracer().trace(model)


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


def _in_branch(
    node: fx.Node, skip: fx.Node, branch: fx.Node, memo: dict[fx.Node, frozenset[fx.Node]]
) -> bool:
    """True when `node` is computed in the branch F of x + F(x), not on the skip path."""
    return (
        (node is branch or node in _ancestors(branch, memo))
        and node is not skip
        and node not in _ancestors(skip, memo)
    )


def skipless_blocks(
    graph: fx.Graph,
    adds: list[tuple[fx.Node, fx.Node, fx.Node]],
    memo: dict[fx.Node, frozenset[fx.Node]],
    modules: dict[str, nn.Module],
) -> frozenset[str]:
    """Module paths of the blocks without a skip, read off the module tree.

    A block is a module of a class whose forward does a residual add somewhere in the
    model (the innermost module on the add's nn_module_stack): EfficientNet's MBConv.
    It has a skip when it holds a residual add or a module called inside a branch F;
    the others of its class are blocks without a skip (MBConv when the shape changes).
    """
    with_skip: set[str] = set()
    block_types: set[type[nn.Module]] = set()
    for add, _, _ in adds:
        stack = [path for path, _ in add.meta.get("nn_module_stack", {}).values()]
        with_skip |= set(stack)
        if stack and stack[-1] in modules:
            block_types.add(type(modules[stack[-1]]))
    for node in graph.nodes:
        if node.op == "call_module" and any(_in_branch(node, s, b, memo) for _, s, b in adds):
            parts = str(node.target).split(".")
            with_skip |= {".".join(parts[:i]) for i in range(1, len(parts))}
    return frozenset(
        path
        for path, m in modules.items()
        if path and path not in with_skip and type(m) in block_types
    )


def _placement(
    norm: fx.Node,
    adds: list[tuple[fx.Node, fx.Node, fx.Node]],
    memo: dict[fx.Node, frozenset[fx.Node]],
    norms: list[fx.Node],
    skipless: frozenset[str],
) -> str:
    """Where a norm node sits relative to the residual adds (see PLACEMENT_HELP).

    `skipless`: the module paths of `skipless_blocks()`.
    """
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
    for add, _, branch in adds:
        # the last step of a branch that opened with a pre-norm: Peri-LN's output norm
        if norm is branch and any(_is_pre(n, adds, memo, within=add) for n in norms):
            return SANDWICH
    if any(_in_branch(norm, skip, branch, memo) for _, skip, branch in adds):
        return BRANCH
    if any(_in_branch(norm, branch, skip, memo) for _, skip, branch in adds):
        return SHORTCUT  # on the skip path itself: a projection shortcut's norm
    if not adds:
        return NONE
    if str(norm.target).rpartition(".")[0] in skipless:
        return SKIPLESS  # e.g. EfficientNet's blocks whose shapes change: no skip
    before = any(add in _ancestors(norm, memo) for add, _, _ in adds)
    after = any(norm in _ancestors(add, memo) for add, _, _ in adds)
    if after:
        return BETWEEN
    return FINAL if before else NONE


def _describe_axes(
    method: str, shape: tuple[int, ...] | None, module: nn.Module
) -> tuple[str, str]:
    """(pooled axes, kept axes) named in the registry's layout letters when the shape fits one."""
    if METHODS[method].kind == "elementwise":
        return "nothing (no statistics)", "every dim"
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
        graph = trace(model)
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
    skipless = skipless_blocks(graph, adds, memo, modules) if graph is not None else frozenset()
    state_keys = set(model.state_dict().keys())
    findings = []
    for n, m in norms.items():
        method = method_of(m)
        assert method is not None
        node = norm_nodes.get(n)
        placement = (
            _placement(node, adds, memo, list(norm_nodes.values()), skipless)
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
        modes = measure_modes(m, shapes.get(n))
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
                modes=modes,
                statistics=statistics_of(m, modes),
                buffers_in_state_dict=all(f"{n}.{b}" in state_keys for b in running),
                fed_by=fed_by,
                fed_by_bias=fed_bias,
                needless_bias=needless,
            )
        )
    groups = param_groups(model)
    return AuditReport(
        name, tuple(findings), len(adds), traced, groups, optimizer_checks(model, groups)
    )


NAIVE = "AdamW(model.parameters(), weight_decay=0.01)"
GROUPED = "AdamW with the two-group recipe"


def optimizer_checks(model: nn.Module, groups: ParamGroups) -> tuple[DecayCheck, ...]:
    """Build AdamW on the model twice, naively and with the recipe's two groups, and read
    what each gives the norm γ/β (building an optimizer allocates no state)."""
    if not any(True for _ in model.parameters()):
        return ()  # torch refuses an optimizer with nothing to optimize
    naive = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
    grouped = torch.optim.AdamW(groups.groups(model, 0.01), lr=3e-4)
    return decay_check(model, naive, NAIVE), decay_check(model, grouped, GROUPED)
