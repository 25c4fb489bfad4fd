"""Tensor layouts: the axis names of a (B, T, C) or (N, C, H, W) tensor."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Layout:
    """A tensor layout: named axes, which one holds channels, which one holds samples."""

    key: str  # "BTC" or "NCHW"
    axes: tuple[str, ...]  # axis names, in memory order
    channel: str  # the axis γ and β act along
    sample: str  # the axis that indexes examples in a batch
    names: dict[str, str]  # axis name -> what it means, for labels
    defaults: dict[str, int]  # a classroom-sized default shape
    channel_first: bool  # torch's BatchNorm/InstanceNorm/GroupNorm want channels at dim 1
    description: str

    @property
    def rank(self) -> int:
        return len(self.axes)

    @property
    def channel_axis(self) -> int:
        return self.axes.index(self.channel)

    def shape_text(self, shape: tuple[int, ...]) -> str:
        """`(B, T, C) = (4, 6, 8)`, the form every message uses."""
        return f"({', '.join(self.axes)}) = {tuple(shape)}"


LAYOUTS: dict[str, Layout] = {
    "BTC": Layout(
        key="BTC",
        axes=("B", "T", "C"),
        channel="C",
        sample="B",
        names={"B": "batch", "T": "tokens", "C": "features"},
        defaults={"B": 4, "T": 6, "C": 8},
        channel_first=False,
        description="a batch of B sequences of T tokens, each a C-dimensional embedding "
        "(transformers, RNNs, MLPs)",
    ),
    "NCHW": Layout(
        key="NCHW",
        axes=("N", "C", "H", "W"),
        channel="C",
        sample="N",
        names={"N": "batch", "C": "channels", "H": "height", "W": "width"},
        defaults={"N": 4, "C": 6, "H": 4, "W": 4},
        channel_first=True,
        description="a batch of N images with C channels of H×W feature maps (CNNs)",
    ),
}
