"""The method registry: every fact a page needs about a normalization method, in one entry.

Most methods compute y = γ · (x − μ) / sqrt(σ² + ε) + β and differ only in which
axes supply μ and σ² (RMSNorm: no μ, σ² is the mean square): their kind is
"statistics" and their entry holds that axis contract. An "elementwise" method
(Dynamic Tanh) pools nothing and has no contract. Each entry also holds its torch
factory (the `nn` module built for a layout and shape), its colour and marker, and
the page lists it is on (`lists`). Compute, figures, page text, generated code and
tests all read this registry; adding a method is adding one entry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

import torch
from torch import nn

from normviz.dyt import DyT
from normviz.layouts import LAYOUTS

Kind = Literal["statistics", "elementwise"]

# The page lists a method can be on (`Method.lists`); every page derives its list from them.
LISTS: dict[str, str] = {
    "training": "the training lab's norms (the CNN over (N, C, H, W))",
    "training-mlp": "the training lab's norms on the MLP ((B, C) activations: T = 1)",
    "training-residual": "the training lab's pre-norm residual MLP (DyT across learning rates)",
    "residual": "the norm in the residual stream on /residual",
    "practice": "the practice exercises that draw a method (name it; the exercises that need "
    "a statistic (cells, count, compute y, choose) take the list's methods with statistics)",
    "guide": "the guide's table of methods on /choose",
    "outliers": "the feature-dimension comparison on /distributions",
}


@dataclass(frozen=True)
class Torch:
    """A method's reference module in one layout: its class and constructor arguments."""

    cls: type[nn.Module]
    args: Callable[..., tuple]  # the sizes (C=, H=, W=, G=) -> positional arguments
    kw: Mapping[str, object] = field(default_factory=dict)  # fixed keyword arguments
    channel_first: bool = False  # wants (B, C, T) where the layout holds (B, T, C)
    name: str = ""  # how code spells the class ("nn.<class>" when empty)
    takes_eps: bool = True

    @property
    def spelled(self) -> str:
        return self.name or f"nn.{self.cls.__name__}"

    def _kwargs(self, eps: float | None) -> dict[str, object]:
        """The keyword arguments; eps=None leaves torch's own default."""
        return {**self.kw, **({"eps": eps} if self.takes_eps and eps is not None else {})}

    def build(self, sizes: Mapping[str, int], eps: float | None = 1e-5, **kw: object) -> nn.Module:
        """The module, e.g. nn.GroupNorm(2, 8, eps=1e-05); `kw`: more constructor flags."""
        return self.cls(*self.args(**sizes), **self._kwargs(eps), **kw)

    def text(self, sizes: Mapping[str, int], eps: float | None = 1e-5) -> str:
        """The constructor call as code shows it: `nn.GroupNorm(2, 8, eps=1e-05)`."""
        args = [repr(a) for a in self.args(**sizes)]
        args += [f"{k}={v!r}" for k, v in self._kwargs(eps).items()]
        return f"{self.spelled}({', '.join(args)})"


def _sizes(layout: str, shape: tuple[int, ...], groups: int | None) -> dict[str, int]:
    return {**dict(zip(LAYOUTS[layout].axes, shape, strict=True)), "G": groups or 1}


@dataclass(frozen=True)
class Method:
    """One normalization method: its kind, contract, torch factory, look and page lists."""

    key: str
    label: str  # "BatchNorm"
    summary: str  # one line, shown beside the label
    kind: Kind = "statistics"  # "elementwise": no statistic, no axis contract
    # Axes reduced entirely, per layout (statistics only). For "group" the channel axis
    # is split into G kept groups of C/G reduced channels on top of these.
    reduces: dict[str, tuple[str, ...]] = field(default_factory=dict)
    grouped: bool = False  # channel axis split into groups (GroupNorm)
    centred: bool = True  # subtracts the mean (RMSNorm does not)
    batch_dependent: bool = False  # a sample's output depends on the other samples
    train_eval_differ: bool = False  # training and evaluation use different statistics
    # The torch constructor flag the answer above hangs on (empty: none can change it).
    train_eval_note: str = ""
    stat_noun: str = "statistic"  # what one statistic belongs to: "channel", "token", ...
    # torch refuses training with a single value per statistic (BatchNorm, InstanceNorm)
    needs_two_in_training: bool = False
    torch: dict[str, Torch] = field(default_factory=dict)  # the reference module, per layout
    colour: str = "#56B4E9"  # one of style.PALETTE (Okabe-Ito)
    symbol: str = "cross"  # its plotly marker, so charts differ in shape as well as colour
    lists: frozenset[str] = frozenset()  # the page lists it is on (keys of LISTS)
    audit_types: tuple[type[nn.Module], ...] = ()  # torch classes the audit reads as it
    name_hint: str = ""  # a regex on a saved tensor's name that suggests it (state dicts)
    natural_setting: str = ""
    best_for: str = ""
    pitfall: str = ""

    def build(
        self,
        layout: str,
        shape: tuple[int, ...],
        groups: int | None = None,
        eps: float | None = 1e-5,
        **kw: object,
    ) -> nn.Module:
        """torch's module (or normviz's reference) for this method at `shape`."""
        return self.torch[layout].build(_sizes(layout, shape, groups), eps, **kw)

    def torch_text(
        self,
        layout: str,
        shape: tuple[int, ...],
        groups: int | None = None,
        eps: float | None = 1e-5,
    ) -> str:
        """The module's constructor call as code: `nn.LayerNorm(8, eps=1e-05)`."""
        return self.torch[layout].text(_sizes(layout, shape, groups), eps)

    def apply(
        self,
        x: torch.Tensor,
        layout: str,
        groups: int | None = None,
        eps: float = 1e-5,
        module: nn.Module | None = None,
    ) -> torch.Tensor:
        """x through the reference module (a fresh one unless given), in x's own layout."""
        mod = module if module is not None else self.build(layout, tuple(x.shape), groups, eps)
        if self.torch[layout].channel_first and not LAYOUTS[layout].channel_first:
            return mod(x.transpose(1, 2)).transpose(1, 2)
        return mod(x)

    def param_shapes(
        self, layout: str, shape: tuple[int, ...], groups: int | None = None
    ) -> dict[str, tuple[int, ...]]:
        """The learned tensors of the module at `shape`: {"weight": (C,), ...}."""
        mod = self.build(layout, shape, groups)
        return {n: tuple(p.shape) for n, p in mod.named_parameters(recurse=False)}


METHODS: dict[str, Method] = {
    m.key: m
    for m in (
        Method(
            key="batch",
            label="BatchNorm",
            summary="one mean and variance per channel, pooled over every sample in the batch",
            reduces={"BTC": ("B", "T"), "NCHW": ("N", "H", "W")},
            batch_dependent=True,
            train_eval_differ=True,
            train_eval_note="with torch's default track_running_stats=True; with False, "
            "evaluation uses batch statistics too",
            stat_noun="channel",
            needs_two_in_training=True,
            torch={
                "BTC": Torch(nn.BatchNorm1d, lambda C, **_: (C,), channel_first=True),
                "NCHW": Torch(nn.BatchNorm2d, lambda C, **_: (C,), channel_first=True),
            },
            colour="#0072B2",
            symbol="square",
            lists=frozenset({"training", "training-mlp", "practice", "guide", "outliers"}),
            audit_types=(nn.modules.batchnorm._BatchNorm,),  # 1d/2d/3d, SyncBatchNorm
            name_hint=r"(^|[._])(bn|batchnorm|batch_norm)\d*($|[._])",
            natural_setting="convolutional networks with batches of 16 or more",
            best_for="CNNs trained with large batches",
            pitfall="needs model.eval() at inference; noisy with tiny batches; running "
            "statistics go stale under distribution shift",
        ),
        Method(
            key="layer",
            label="LayerNorm",
            summary="one mean and variance per sample (per token in a sequence), over its features",
            reduces={"BTC": ("C",), "NCHW": ("C", "H", "W")},
            stat_noun="token",
            torch={
                "BTC": Torch(nn.LayerNorm, lambda C, **_: (C,)),
                "NCHW": Torch(nn.LayerNorm, lambda C, H, W, **_: ((C, H, W),)),
            },
            colour="#E69F00",
            symbol="diamond",
            lists=frozenset(
                {
                    "training",
                    "training-mlp",
                    "training-residual",
                    "residual",
                    "practice",
                    "guide",
                    "outliers",
                }
            ),
            audit_types=(nn.LayerNorm,),
            name_hint=r"(^|[._])(ln|layernorm|layer_norm|ln_f|ln_\d+)\d*($|[._])",
            natural_setting="transformers and RNNs",
            best_for="transformers, RNNs, small or variable batches",
            pitfall="erases each sample's overall scale for good: γ and β are shared by every "
            "sample, so LN(10·x) equals LN(x) up to ε; a model that needs the magnitude must "
            "carry it past the norm (the pre-norm residual stream does)",
        ),
        Method(
            key="instance",
            label="InstanceNorm",
            summary="one mean and variance per sample and channel, over positions only",
            reduces={"BTC": ("T",), "NCHW": ("H", "W")},
            stat_noun="instance",
            train_eval_note="with torch's default track_running_stats=False; with True, "
            "evaluation uses running statistics and differs from training",
            needs_two_in_training=True,
            torch={
                "BTC": Torch(nn.InstanceNorm1d, lambda C, **_: (C,), channel_first=True),
                "NCHW": Torch(nn.InstanceNorm2d, lambda C, **_: (C,), channel_first=True),
            },
            colour="#009E73",
            symbol="triangle-up",
            lists=frozenset({"training", "practice", "guide"}),  # T = 1: one value per statistic
            audit_types=(nn.modules.instancenorm._InstanceNorm,),
            name_hint=r"(^|[._])(in|instancenorm|instance_norm)\d*($|[._])",
            natural_setting="style transfer",
            best_for="style transfer: removes each image's per-channel contrast",
            pitfall="throws away each channel's mean and spread, which may be the signal",
        ),
        Method(
            key="group",
            label="GroupNorm",
            summary="one mean and variance per sample and group of C/G channels",
            reduces={"BTC": ("T",), "NCHW": ("H", "W")},
            grouped=True,
            stat_noun="group",
            torch={
                lay: Torch(nn.GroupNorm, lambda C, G, **_: (G, C), channel_first=True)
                for lay in ("BTC", "NCHW")
            },
            colour="#CC79A7",
            symbol="triangle-down",
            lists=frozenset({"training", "training-mlp", "practice", "guide"}),
            audit_types=(nn.GroupNorm,),
            name_hint=r"(^|[._])(gn|groupnorm|group_norm)\d*($|[._])",
            natural_setting="detection and segmentation with batches of 1 or 2",
            best_for="CNNs with small batches (detection, segmentation, U-Nets)",
            pitfall="C must be divisible by the number of groups",
        ),
        Method(
            key="rms",
            label="RMSNorm",
            summary="divides each token by its root mean square; no mean is subtracted",
            reduces={"BTC": ("C",), "NCHW": ("C", "H", "W")},
            centred=False,
            stat_noun="token",
            torch={
                "BTC": Torch(nn.RMSNorm, lambda C, **_: (C,)),
                "NCHW": Torch(nn.RMSNorm, lambda C, H, W, **_: ((C, H, W),)),
            },
            colour="#D55E00",
            symbol="x",
            lists=frozenset(
                {
                    "training",
                    "training-mlp",
                    "training-residual",
                    "residual",
                    "practice",
                    "guide",
                    "outliers",
                }
            ),
            audit_types=(nn.RMSNorm,),
            name_hint=r"rms",
            natural_setting="large language models",
            best_for="large transformer language models (cheaper than LayerNorm)",
            pitfall="does not centre: a shared offset in the features survives",
        ),
        Method(
            key="custom",
            label="Custom axes",
            summary="statistics over the axes you choose",
            stat_noun="statistic",
            colour="#56B4E9",
            symbol="cross",
        ),
        Method(
            key="dyt",
            label="DyT",
            summary="no statistics at all: each value goes through γ·tanh(α·x) + β on its own, "
            "so tanh squashes outliers instead of rescaling by a statistic",
            kind="elementwise",
            centred=False,  # nothing is subtracted
            torch={
                "BTC": Torch(DyT, lambda C, **_: (C,), name="DyT", takes_eps=False),
                "NCHW": Torch(
                    DyT, lambda C, **_: (C,), {"channel_dim": 1}, name="DyT", takes_eps=False
                ),
            },
            colour="#000000",
            symbol="star",
            # practice: "name the method" shows its pattern, every cell a group of its own
            lists=frozenset({"training-residual", "guide", "outliers", "practice"}),
            audit_types=(DyT,),
            # a DyT written elsewhere (the authors' DynamicTanh): its class name, or in a
            # state dict its prefix; its saved signature is a scalar alpha beside γ and β
            name_hint=r"(^|[._])(dyt|dynamic_?tanh)\d*($|[._])",
            natural_setting="transformers, as a drop-in for LayerNorm (Zhu et al. 2025)",
            best_for="transformers where a norm's reductions cost time; one scalar α per layer",
            pitfall="nothing adapts to the input's scale: α must be learned to fit it, values "
            "far beyond 1/α all come out near ±γ, and the gains reported are regime-dependent",
        ),
        # (a new method: one more entry here)
    )
}

# The named layers with an axis contract, in teaching order (not "custom", not elementwise).
STANDARD_METHODS: tuple[str, ...] = tuple(k for k, m in METHODS.items() if m.reduces)
# The methods with no statistics at all (Dynamic Tanh).
ELEMENTWISE: tuple[str, ...] = tuple(k for k, m in METHODS.items() if m.kind == "elementwise")
# Every method with a reference module: the standard ones and the elementwise ones.
NAMED_METHODS: tuple[str, ...] = tuple(k for k, m in METHODS.items() if m.torch)


def listed(name: str) -> tuple[str, ...]:
    """The methods on page list `name` (a key of LISTS), in registry order."""
    if name not in LISTS:
        raise ValueError(f"no page list {name!r}: the lists are {', '.join(LISTS)}")
    return tuple(k for k, m in METHODS.items() if name in m.lists)
