"""GroupNorm as a reshape: (N, C, H, W) → (N, G, C//G, H, W), statistics over (2, 3, 4).

The snippet is written for the page's shape and G (the sidebar's groups), run on the
page's own tensor and compared with `nn.GroupNorm` and `normalize()`: GroupNorm is
LayerNorm over each group of C//G consecutive channels, nothing more.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
import torch

from normviz import style
from normviz.axes.cells import AxesSetup
from normviz.axes.code import MATCH_TOL
from normviz.core import Refusal, as_tensor, normalize
from normviz.figures.spec import Spec, trace
from normviz.knobs import Value
from normviz.sections import Extra, Progress, Section

INTRO = (
    "GroupNorm written out: split the channel axis into G groups of C//G consecutive "
    "channels with a reshape, take one mean and variance per sample and group, and reshape "
    "back. The code uses the page's shape and G, and runs on the page's tensor:"
)


def reshape_code(layout: str, shape: tuple[int, ...], groups: int, eps: float) -> str:
    """A snippet that reads `x` of `shape` and assigns GroupNorm by hand (`y`) and by torch."""
    head = ["import torch", "from torch import nn", ""]
    C = shape[1 if layout == "NCHW" else 2]
    gs = f"G = {groups} group{'s' if groups > 1 else ''} of C//G = {C // groups}"
    if layout == "NCHW":
        body = [
            f"# x: (N, C, H, W) = {tuple(shape)}; {gs}",
            "N, C, H, W = x.shape",
            f"G = {groups}",
            "xg = x.reshape(N, G, C // G, H, W)  # (N, G, C//G, H, W)",
            "dims = (2, 3, 4)  # C//G, H, W: one statistic per (sample, group)",
        ]
        back = "y = ((xg - mean) / torch.sqrt(var + eps)).reshape(N, C, H, W)"
        torch_in, torch_out = "x", ""
    else:
        body = [
            f"# x: (B, T, C) = {tuple(shape)}; {gs}",
            "B, T, C = x.shape",
            f"G = {groups}",
            "xc = x.transpose(1, 2)  # (B, C, T): GroupNorm wants channels at dim 1",
            "xg = xc.reshape(B, G, C // G, T)  # (B, G, C//G, T)",
            "dims = (2, 3)  # C//G, T: one statistic per (sample, group)",
        ]
        back = "y = ((xg - mean) / torch.sqrt(var + eps)).reshape(B, C, T).transpose(1, 2)"
        torch_in, torch_out = "x.transpose(1, 2)", ".transpose(1, 2)"
    body += [
        f"eps = {eps!r}",
        "mean = xg.mean(dim=dims, keepdim=True)",
        "var = xg.var(dim=dims, unbiased=False, keepdim=True)  # biased, as GroupNorm",
        back,
        "",
        "gn = nn.GroupNorm(G, C, eps=eps, affine=False)",
        f"y_torch = gn({torch_in}){torch_out}",
    ]
    return "\n".join(head + body) + "\n"


@dataclass(frozen=True, eq=False)
class ReshapeCheck:
    """The snippet, what it computed, and how far it is from nn.GroupNorm and normalize()."""

    layout: str
    shape: tuple[int, ...]
    groups: int
    code: str
    means: np.ndarray  # (samples, G): the reshape's μ
    diff_torch: float  # max |y − nn.GroupNorm(x)|
    diff_normalize: float  # max |y − normalize(x, "group")|

    @property
    def per_group(self) -> int:
        """C//G: channels in one group."""
        return self.shape[-1 if self.layout == "BTC" else 1] // self.groups

    @property
    def pooled(self) -> int:
        """Values behind one statistic: C//G times the positions."""
        return int(np.prod(self.shape)) // (self.shape[0] * self.groups)

    @property
    def matches(self) -> bool:
        return all(
            math.isfinite(d) and d <= MATCH_TOL for d in (self.diff_torch, self.diff_normalize)
        )


def check(x: torch.Tensor, layout: str, groups: int, eps: float = 1e-5) -> ReshapeCheck:
    """Run the reshape snippet on `x`; compare with nn.GroupNorm and normalize().

    Raises:
        Refusal: G does not divide C (nn.GroupNorm refuses it too).
    """
    x = as_tensor(x)
    shape = tuple(x.shape)
    C = shape[-1 if layout == "BTC" else 1]
    if groups < 1 or C % groups:
        raise Refusal(
            f"the reshape needs C divisible by G: C = {C}, G = {groups} (nn.GroupNorm refuses "
            f"it too); choose G in {', '.join(str(g) for g in range(1, C + 1) if C % g == 0)}"
        )
    code = reshape_code(layout, shape, groups, eps)
    scope: dict[str, object] = {"x": x.clone()}
    with torch.no_grad():
        exec(compile(code, "<normviz reshape_code>", "exec"), scope)  # our snippet, not user text
        ours = normalize(x, "group", layout, groups=groups, eps=eps).output
    y, y_torch, mean = (scope[k] for k in ("y", "y_torch", "mean"))
    assert isinstance(y, torch.Tensor) and isinstance(y_torch, torch.Tensor)
    assert isinstance(mean, torch.Tensor)
    return ReshapeCheck(
        layout,
        shape,
        groups,
        code,
        mean.reshape(shape[0], groups).numpy(),
        _diff(y, y_torch),
        _diff(y, ours),
    )


def _diff(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a − b|, where NaN in both (ε = 0 on a constant group) counts as equal."""
    d = (a - b).abs().masked_fill(a.isnan() & b.isnan(), 0.0)
    return float(d.max()) if d.numel() else 0.0


def run(setup: AxesSetup, knobs: Mapping[str, Value], progress: Progress) -> ReshapeCheck:
    con = setup.contract
    groups = con.groups if con.method_obj.grouped else setup.groups
    return check(setup.tensor(), con.layout, groups, setup.eps)


MAX_ROWS, MAX_COLS = 16, 64  # samples and channels drawn in the figure (the first ones)


def figure(res: ReshapeCheck, presenter: bool = False) -> go.Figure:
    """Each sample's channels coloured by their group's μ: blocks of C//G share one."""
    n, C = min(res.shape[0], MAX_ROWS), min(res.per_group * res.groups, MAX_COLS)
    z = np.repeat(res.means[:n], res.per_group, axis=1)[:, :C]  # (samples, C): each channel's μ
    group = np.repeat(np.arange(res.groups), res.per_group)[:C]
    s = "B" if res.layout == "BTC" else "N"
    fig = Spec().add_trace(
        trace(
            "heatmap",
            z=np.round(z, 4).tolist(),
            x=list(range(C)),
            y=list(range(n)),
            text=[[f"g{g}" for g in group] for _ in range(n)],
            texttemplate="%{text}",
            colorscale=style.DIVERGING,
            zmid=0,
            name="μ of the channel's group",
            hovertemplate=f"{s}=%{{y}}, channel %{{x}}: group μ = %{{z}}<extra></extra>",
            # the title beside the bar, not above it: the bar keeps the plot's whole height
            # for its ticks (above, two samples' rows left it too short for −2, 0, 2)
            colorbar={"title": {"text": "μ", "side": "right"}},
        )
    )
    fig.update_xaxes(
        title=f"channel c (group g = c // {res.per_group})", dtick=1 if C <= 16 else None
    )
    fig.update_yaxes(title=f"sample {s}", dtick=1, autorange="reversed")
    cut = [
        f"first {k} {what}"
        for k, m, what in (
            (n, res.shape[0], "samples"),
            (C, res.per_group * res.groups, "channels"),
        )
        if k < m
    ]
    shown = f"<br>({', '.join(cut)})" if cut else ""
    # short lines: one line ran past a phone's column
    fig.update_layout(
        title=f"GroupNorm's {res.groups} groups:<br>one μ per sample and group{shown}"
    )
    style.apply(fig, presenter)
    style.top_room(fig, presenter)
    # the plot keeps its height (a colour bar's ticks need it); the title's lines add theirs
    plot = min(480, 160 + 28 * n) - 50
    return fig.update_layout(height=plot + fig.layout["margin"]["t"]).figure()


def _channels(g: int, per: int) -> str:
    lo, hi = g * per, (g + 1) * per - 1
    return f"channel {lo}" if lo == hi else f"channels {lo}–{hi}"


def notes(res: ReshapeCheck) -> Sequence[str]:
    per, G = res.per_group, res.groups
    groups = "; ".join(f"group {g}: {_channels(g, per)}" for g in range(min(G, 4)))
    more = f"; … group {G - 1}: {_channels(G - 1, per)}" if G > 4 else ""
    out = [
        f"The reshape gives {res.shape[0]} × {G} = {res.means.size} means and variances, each "
        f"over C//G × positions = {res.pooled} values; groups are consecutive channels "
        f"({groups}{more}).",
    ]
    verdict = "matches" if res.matches else "differs from"
    out.append(
        f"The hand-written reshape {verdict} torch.nn.GroupNorm (max |Δ| = {res.diff_torch:.1e}) "
        f"and normviz.normalize (max |Δ| = {res.diff_normalize:.1e}); tolerance {MATCH_TOL:.0e}."
    )
    whole = "(C, H, W)" if res.layout == "NCHW" else "(T, C)"
    if G == 1:
        out.append(f"G = 1: one group of every channel, the values LayerNorm over {whole} pools.")
    elif per == 1:
        out.append("G = C: each group is one channel, the values InstanceNorm pools.")
    return out


def extras(res: ReshapeCheck) -> Sequence[Extra]:
    return [Extra("code", res.code, top=True)]


SECTION = Section(
    slug="reshape",
    label="GroupNorm as a reshape",
    intro=INTRO,
    run=run,
    figure=figure,
    notes=notes,
    extras=extras,
)
