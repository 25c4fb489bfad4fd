"""Which adds in a traced model are residual connections: x + F(x), α·x + F(x), and a
projection shortcut's downsample(x) + F(x). Each is reported as (add, skip, branch).
"""

from __future__ import annotations

import operator

import torch
from torch import fx

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


def _unscaled(node: fx.Node) -> fx.Node:
    """x for a skip operand `α * x` with a constant α (DeepNorm's up-weighted skip), else node."""
    if node.op == "call_function" and node.target in (operator.mul, torch.mul):
        args = [a for a in node.args if isinstance(a, fx.Node)]
        if len(args) == 1 and all(isinstance(a, fx.Node | int | float) for a in node.args):
            return args[0]
    return node


def _scaled_skip(u: fx.Node, v: fx.Node, memo: dict[fx.Node, frozenset[fx.Node]]) -> bool:
    """True for α·x + F(x): u is a constant times x, and v computes from x through a layer
    (so that a sum of two rescaled copies of one tensor is not taken for a residual)."""
    x = _unscaled(u)
    if x is u or x not in _ancestors(v, memo):
        return False
    own = (_ancestors(v, memo) - _ancestors(x, memo) - {x}) | {v}
    return any(n.op == "call_module" for n in own)


SHORTCUT_NODES = 4  # a projection shortcut: at most this many nodes (1×1 conv, BN, pool)


def _projection(
    u: fx.Node, v: fx.Node, memo: dict[fx.Node, frozenset[fx.Node]]
) -> tuple[fx.Node, fx.Node] | None:
    """(skip, branch) when u + v is a block with a projection shortcut (ResNet's
    downsample): both come from a shared input, and one of them by a short path
    through at least one module."""
    shared = _ancestors(u, memo) & _ancestors(v, memo)
    if not any(n.op != "get_attr" for n in shared):
        return None
    own = {w: (_ancestors(w, memo) - shared) | {w} for w in (u, v)}
    skip, branch = sorted((u, v), key=lambda w: len(own[w]))
    short = len(own[skip]) <= SHORTCUT_NODES < len(own[branch])
    if short and any(n.op == "call_module" for n in own[skip]):
        return skip, branch
    return None


def residual_adds(graph: fx.Graph) -> list[tuple[fx.Node, fx.Node, fx.Node]]:
    """(add, skip, branch) for every add whose one operand is computed from the other,
    or from the same input by a projection shortcut."""
    memo: dict[fx.Node, frozenset[fx.Node]] = {}
    out = []
    for node in graph.nodes:
        if not _is_add(node) or len(node.args) < 2:
            continue
        u, v = node.args[0], node.args[1]
        if not (isinstance(u, fx.Node) and isinstance(v, fx.Node)):
            continue
        if u in _ancestors(v, memo) or _scaled_skip(u, v, memo):
            out.append((node, u, v))
        elif v in _ancestors(u, memo) or _scaled_skip(v, u, memo):
            out.append((node, v, u))
        elif (pair := _projection(u, v, memo)) is not None:
            out.append((node, *pair))
    return out
