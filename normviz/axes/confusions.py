"""The classic confusions: mix-ups of axes that papers and code make, with this shape's numbers.

Channels-last LayerNorm is not GroupNorm(1, C); BatchNorm1d wants (N, C, L), not
(N, L, C); InstanceNorm is LayerNorm over one feature map. Each applies only to
some contracts, and each is checked against torch.nn in the tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from normviz.axes.cells import AxesSetup
from normviz.core import Contract
from normviz.knobs import Value
from normviz.sections import Progress, Section

INTRO = "Mix-ups of axes that apply to the current setting, with this shape's numbers."


@dataclass(frozen=True)
class Confusion:
    """A classic mix-up of axes, explained with the current shape's numbers."""

    key: str  # "channels_last", "batchnorm1d", "instance_as_layer"
    title: str
    text: str


def confusions(con: Contract) -> tuple[Confusion, ...]:
    """The classic mix-ups that apply to the contract `con`, with its shape's numbers."""
    layout = con.layout
    lay = con.layout_obj
    sizes = dict(zip(lay.axes, con.shape, strict=True))
    reduced = set(con.reduced)
    grouped = con.method_obj.grouped
    out: list[Confusion] = []
    if layout == "NCHW":
        N, C, H, W = (sizes[a] for a in lay.axes)
        if (not grouped and reduced == {"C"}) or (grouped and con.groups == 1):
            out.append(
                Confusion(
                    "channels_last",
                    "Channels-last LayerNorm is not GroupNorm(1, C)",
                    f"LayerNorm over C alone, as ConvNeXt applies it to a channels-last "
                    f"tensor, gives every pixel its own statistics: {N * H * W:,} of them, "
                    f"each from the C = {C} channel values at that pixel. GroupNorm(1, {C}) "
                    f"pools the whole image instead: {N:,} statistics, each from "
                    f"C·H·W = {C * H * W:,} values (the same as LayerNorm(({C}, {H}, {W}))). "
                    "Both are called LayerNorm in papers; they give different outputs.",
                )
            )
        if not grouped and reduced == {"H", "W"}:
            out.append(
                Confusion(
                    "instance_as_layer",
                    "InstanceNorm is LayerNorm over one feature map",
                    f"Treat each of the N·C = {N * C:,} feature maps as one embedding of "
                    f"H·W = {H * W:,} values: LayerNorm over that embedding computes exactly "
                    "InstanceNorm's statistics. In code, nn.LayerNorm(H*W) applied to "
                    "x.reshape(N, C, H*W) matches nn.InstanceNorm2d(C) (without affine "
                    "parameters, which act per channel in one and per position in the other).",
                )
            )
    else:
        B, T, C = (sizes[a] for a in lay.axes)
        if not grouped and reduced == {"B", "T"}:
            out.append(
                Confusion(
                    "batchnorm1d",
                    "BatchNorm1d expects (N, C, L), not (N, L, C)",
                    f"torch's BatchNorm1d wants channels at dim 1. A (B, T, C) = ({B}, {T}, "
                    f"{C}) tensor must be transposed, norm(x.transpose(1, 2)).transpose(1, 2), "
                    f"to get one statistic per feature from B·T = {B * T:,} values. Passed "
                    f"as it is, dim 1 holds the T = {T} tokens: BatchNorm1d({C}) refuses it"
                    + (
                        f" unless T = C (here T = C = {C}, so it runs and silently keeps "
                        "one statistic per token position instead)."
                        if T == C
                        else f", and BatchNorm1d({T}) would pool B and C: one statistic "
                        "per token position, a different method."
                    ),
                )
            )
        if not grouped and reduced == {"B", "C"}:
            out.append(
                Confusion(
                    "batchnorm1d",
                    "This is BatchNorm1d on an untransposed (B, T, C) tensor",
                    f"Pooling B and C keeps one statistic per token position ({T} of them, "
                    f"each from B·C = {B * C:,} values). That is what nn.BatchNorm1d({T}) "
                    "computes when handed x without x.transpose(1, 2): it takes dim 1 as "
                    "the channels. BatchNorm1d expects (N, C, L).",
                )
            )
        if not grouped and reduced == {"T"}:
            out.append(
                Confusion(
                    "instance_as_layer",
                    "InstanceNorm is LayerNorm over one feature's sequence",
                    f"Treat each feature's sequence of T = {T} values as one embedding: "
                    f"LayerNorm over it computes InstanceNorm's statistics ({B * C:,} of "
                    "them). nn.InstanceNorm1d wants (N, C, L): transpose (B, T, C) first.",
                )
            )
    return tuple(out)


# ---- the section --------------------------------------------------------------------


@dataclass(frozen=True)
class Confusions:
    label: str  # the method
    items: tuple[Confusion, ...]


def run(setup: AxesSetup, knobs: Mapping[str, Value], progress: Progress) -> Confusions:
    return Confusions(setup.contract.method_obj.label, confusions(setup.contract))


def notes(res: Confusions) -> list[str]:
    if not res.items:
        return [f"None of the classic mix-ups applies to {res.label} at this shape."]
    return [f":material/warning: **{c.title}.** {c.text}" for c in res.items]


SECTION = Section(
    slug="confusions",
    label="Classic confusions",
    intro=INTRO,
    run=run,
    notes=notes,
)
