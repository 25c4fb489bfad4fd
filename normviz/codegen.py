"""The torch code a user would write for the current settings, and a live check of it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from normviz.core import AxesArg, as_tensor, contract, normalize
from normviz.layouts import LAYOUTS


@dataclass(frozen=True)
class Verification:
    """The snippet, the torch.nn module it uses, and how far its output is from normalize()."""

    module: str  # "nn.BatchNorm1d", or "torch.mean/var" for custom axes
    max_abs_diff: float
    code: str


def torch_code(
    method: str,
    layout: str,
    shape: tuple[int, ...] | list[int],
    groups: int | None = None,
    eps: float = 1e-5,
    axes: AxesArg = None,
    centred: bool = True,
) -> str:
    """A snippet that reads a tensor `x` of `shape` and assigns the normalized `y`.

    Raises:
        NormConfigError: the settings are invalid (same checks as normalize()).
    """
    con = contract(method, layout, shape, groups, axes, centred)
    lay = LAYOUTS[layout]
    sizes = dict(zip(lay.axes, con.shape, strict=True))
    head = ["import torch", "from torch import nn", "", f"# x: {lay.shape_text(con.shape)}"]
    if method == "custom":
        dims = tuple(lay.axes.index(a) for a in con.reduced)
        body = [f"dims = {dims}  # {', '.join(con.reduced)}"]
        if con.centred:
            body += [
                "mean = x.mean(dim=dims, keepdim=True)",
                "var = x.var(dim=dims, unbiased=False, keepdim=True)  # biased, as every norm",
                f"y = (x - mean) / torch.sqrt(var + {eps!r})",
            ]
        else:
            body += [
                "ms = x.pow(2).mean(dim=dims, keepdim=True)  # mean square, no centring",
                f"y = x / torch.sqrt(ms + {eps!r})",
            ]
        return "\n".join(head + body) + "\n"
    m = con.method_obj
    ctor = m.torch_module[layout].format(G=con.groups, eps=repr(eps), **sizes)
    body = [f"norm = {ctor}"]
    if m.torch_channel_first and not lay.channel_first:
        t = lay.channel_axis
        body += [
            f"# {ctor.split('(')[0]} wants channels at dim 1: "
            f"({', '.join(lay.axes)}) -> ({lay.axes[0]}, {lay.channel}, "
            f"{', '.join(a for a in lay.axes[1:] if a != lay.channel)}) and back",
            f"y = norm(x.transpose(1, {t})).transpose(1, {t})",
        ]
    else:
        body.append("y = norm(x)")
    return "\n".join(head + body) + "\n"


def verify(
    x: torch.Tensor | np.ndarray,
    method: str,
    layout: str,
    groups: int | None = None,
    eps: float = 1e-5,
    axes: AxesArg = None,
    centred: bool = True,
) -> Verification:
    """Run the generated snippet on `x` and compare its `y` with normalize()."""
    x = as_tensor(x)
    kw = {"groups": groups, "axes": axes, "centred": centred}
    code = torch_code(method, layout, tuple(x.shape), eps=eps, **kw)  # type: ignore[arg-type]
    scope: dict[str, object] = {"x": x.clone()}
    with torch.no_grad():
        exec(compile(code, "<normviz torch_code>", "exec"), scope)  # our own snippet, not user text
        ours = normalize(x, method, layout, eps=eps, **kw).output  # type: ignore[arg-type]
    y = scope["y"]
    assert isinstance(y, torch.Tensor)
    diff = (y - ours).abs().max().item() if y.numel() else 0.0
    module = "torch.mean/var" if method == "custom" else code.split("norm = ")[1].split("(")[0]
    return Verification(module=module, max_abs_diff=float(diff), code=code)


__all__ = ["Verification", "torch_code", "verify"]
