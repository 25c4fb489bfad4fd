"""The method registry: every normalization is one axis contract.

All methods compute y = γ · (x − μ) / sqrt(σ² + ε) + β and differ only in which
axes supply μ and σ² (RMSNorm: no μ, σ² is the mean square). Compute, figures,
page text, generated code and tests all read this registry; adding a method is
adding one entry.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Method:
    """One normalization method, described by its axis contract."""

    key: str
    label: str  # "BatchNorm"
    summary: str  # one line, shown beside the label
    # Axes reduced entirely, per layout. For "group" the channel axis is split
    # into G kept groups of C/G reduced channels on top of these.
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
    # torch.nn reference, per layout, as a constructor template; channel-first
    # modules need a (B, T, C) tensor transposed to (B, C, T).
    torch_module: dict[str, str] = field(default_factory=dict)
    torch_channel_first: bool = False
    natural_setting: str = ""
    best_for: str = ""
    pitfall: str = ""


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
            torch_module={
                "BTC": "nn.BatchNorm1d({C}, eps={eps})",
                "NCHW": "nn.BatchNorm2d({C}, eps={eps})",
            },
            torch_channel_first=True,
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
            torch_module={
                "BTC": "nn.LayerNorm({C}, eps={eps})",
                "NCHW": "nn.LayerNorm(({C}, {H}, {W}), eps={eps})",
            },
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
            torch_module={
                "BTC": "nn.InstanceNorm1d({C}, eps={eps})",
                "NCHW": "nn.InstanceNorm2d({C}, eps={eps})",
            },
            torch_channel_first=True,
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
            torch_module={
                "BTC": "nn.GroupNorm({G}, {C}, eps={eps})",
                "NCHW": "nn.GroupNorm({G}, {C}, eps={eps})",
            },
            torch_channel_first=True,
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
            torch_module={
                "BTC": "nn.RMSNorm({C}, eps={eps})",
                "NCHW": "nn.RMSNorm(({C}, {H}, {W}), eps={eps})",
            },
            natural_setting="large language models",
            best_for="large transformer language models (cheaper than LayerNorm)",
            pitfall="does not centre: a shared offset in the features survives",
        ),
        Method(
            key="custom",
            label="Custom axes",
            summary="statistics over the axes you choose",
            stat_noun="statistic",
        ),
    )
}

# The five named layers, in teaching order (everything but "custom").
STANDARD_METHODS: tuple[str, ...] = tuple(k for k in METHODS if k != "custom")
