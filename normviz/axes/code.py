"""The verified torch code: the snippet a user would write for the setting, run live.

The snippet is built from the registry's torch reference (`Method.torch_text`),
executed on the page's own tensor, and compared with `normalize()`: the page only
shows code that it has just seen match.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch

from normviz.axes.cells import AxesSetup
from normviz.core import Contract, Refusal, apply_contract, as_tensor
from normviz.knobs import Value
from normviz.sections import Extra, Progress, Section

INTRO = "The torch code for the current settings, run on this page's tensor:"
MATCH_TOL = 1e-4  # normalized outputs are O(1): float32 kernels agree far closer than this


@dataclass(frozen=True)
class Verification:
    """The snippet, the torch.nn module it uses, and how far its output is from normalize()."""

    module: str  # "nn.BatchNorm1d", or "torch.mean/var" for custom axes
    max_abs_diff: float
    code: str


def torch_code(con: Contract, eps: float = 1e-5) -> str:
    """A snippet that reads a tensor `x` of the contract's shape and assigns the normalized `y`."""
    lay = con.layout_obj
    head = ["import torch", "from torch import nn", "", f"# x: {lay.shape_text(con.shape)}"]
    if con.method == "custom":
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
    ctor = m.torch_text(con.layout, con.shape, con.groups if m.grouped else None, eps)
    body = [f"norm = {ctor}"]
    if m.torch[con.layout].channel_first and not lay.channel_first:
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


def verify(x: torch.Tensor | np.ndarray, con: Contract, eps: float = 1e-5) -> Verification:
    """Run the generated snippet on `x` and compare its `y` with normalize().

    Raises:
        Refusal: torch refuses the setting (one value per statistic in training, or a
            module's own check, e.g. BatchNorm's eps > 0).
    """
    x = as_tensor(x)
    code = torch_code(con, eps)
    with torch.no_grad():
        # normalize() first: it refuses what torch refuses, with the numbers to change
        ours = apply_contract(x, con, eps=eps).output
        scope: dict[str, object] = {"x": x.clone()}
        try:  # our own snippet, not user text
            exec(compile(code, "<normviz torch_code>", "exec"), scope)
        except (ValueError, RuntimeError) as e:  # e.g. BatchNorm with eps = 0 in training
            raise Refusal(f"torch refuses the snippet: {e}") from None
    y = scope["y"]
    assert isinstance(y, torch.Tensor)
    diff = (y - ours).abs().max().item() if y.numel() else 0.0
    module = "torch.mean/var" if con.method == "custom" else code.split("norm = ")[1].split("(")[0]
    return Verification(module=module, max_abs_diff=float(diff), code=code)


def verification_text(module: str, max_abs_diff: float) -> tuple[bool, str]:
    """(matches?, "matches torch.nn.X, max |Δ| = …") for a verify() result."""
    name = f"torch.{module}" if module.startswith("nn.") else module
    ok = math.isfinite(max_abs_diff) and max_abs_diff <= MATCH_TOL
    if ok:
        return True, f"matches {name}, max |Δ| = {max_abs_diff:.1e}"
    return False, f"differs from {name}: max |Δ| = {max_abs_diff:.1e} (tolerance {MATCH_TOL:.0e})"


# ---- the section --------------------------------------------------------------------


def run(setup: AxesSetup, knobs: Mapping[str, Value], progress: Progress) -> Verification:
    try:
        return verify(setup.tensor(), setup.contract, setup.eps)
    except Refusal as e:
        raise Refusal(f"no live check for this setting: {e}") from None


def notes(v: Verification) -> list[str]:
    ok, text = verification_text(v.module, v.max_abs_diff)
    return [] if ok else [f":orange[:material/warning:] {text}"]


def extras(v: Verification) -> list[Extra]:
    """The snippet first; below it, when it matches, the match as a highlighted answer."""
    ok, text = verification_text(v.module, v.max_abs_diff)
    return [Extra("code", v.code, top=True)] + ([Extra("callout", text)] if ok else [])


SECTION = Section(
    slug="code",
    label="Verified code",
    intro=INTRO,
    run=run,
    notes=notes,
    extras=extras,
)
