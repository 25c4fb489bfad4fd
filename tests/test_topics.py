"""Every topic of the source texts (../shared/seeds/) has a home: a page and a section.

The table is the map a teacher reads to plan a lesson; the test fails when a listed
section disappears or moves, so the map cannot go stale.
"""

from __future__ import annotations

import importlib

import pytest

from ui.pages import PAGES

# topic -> (page URL path, section slug)
TOPICS: dict[str, tuple[str, str]] = {
    # the one formula and the axis contract
    "the formula y = γ·(x − μ)/√(σ² + ε) + β, and which axes supply μ, σ²": ("axes", "group"),
    "the axis contract: pooled axes vs axes that keep separate statistics": ("axes", "card"),
    "the same tensor under every method, side by side": ("axes", "methods"),
    "custom axes and the method they identify": ("axes", "custom"),
    "BatchNorm1d wants (N, C, L); channels-last LayerNorm is not GroupNorm(1, C)": (
        "axes",
        "confusions",
    ),
    "the torch.nn code for a setting, checked live": ("axes", "code"),
    "GroupNorm as a reshape (N, C, H, W) → (N, G, C//G, H, W), checked live": ("axes", "reshape"),
    # BatchNorm: statistics over the batch, training vs inference
    "BatchNorm over B and T (or N, H, W), worked by hand on a 2×3 matrix": (
        "worked-example",
        "steps",
    ),
    "LayerNorm over the features of one sample, worked by hand": ("worked-example", "steps"),
    "BatchNorm vs LayerNorm compared on the source's example": ("worked-example", "source"),
    "running statistics and the momentum update (PyTorch, Keras 3, cumulative)": (
        "batchnorm",
        "running",
    ),
    "the evaluation-mode formula; determinism; model.eval() is not torch.no_grad()": (
        "batchnorm",
        "eval",
    ),
    "biased variance to normalize, unbiased in the running update": ("batchnorm", "bessel"),
    "small batches: noisy statistics and the train/eval gap": ("batchnorm", "batch-size"),
    "BatchNorm as a regularizer: the noise of batch statistics": ("batchnorm", "noise"),
    "distribution shift makes running statistics stale": ("batchnorm", "shift"),
    "non-i.i.d. (sorted) batches": ("batchnorm", "order"),
    "gradient accumulation does not enlarge BatchNorm's batch": ("batchnorm", "accumulation"),
    "SyncBatchNorm across devices": ("batchnorm", "sync"),
    "frozen BatchNorm when fine-tuning": ("batchnorm", "freeze"),
    "running statistics in checkpoints (num_batches_tracked, _metadata)": (
        "batchnorm",
        "checkpoint",
    ),
    "where BatchNorm sits relative to the activation": ("batchnorm", "where"),
    "BatchNorm's indirect effect on vanishing/exploding gradients": ("batchnorm", "gradients"),
    "normalization is part of the model: gradients flow through μ and σ²": (
        "batchnorm",
        "coupling",
    ),
    "future tokens leak through BatchNorm's statistics in a causal model": ("batchnorm", "causal"),
    "BatchNorm vs a per-sample norm at tiny batches, in a small network": ("batchnorm", "model"),
    # what normalization does to the values
    "values before and after, per statistic group": ("distributions", "before-after"),
    "what each method does not control": ("distributions", "uncontrolled"),
    "γ and β: the scale and shift a layer learns; recovering the input": (
        "distributions",
        "gamma-beta",
    ),
    "γ and β of torch's shapes: per channel, or per element (LayerNorm over (C, H, W))": (
        "distributions",
        "gamma-beta",
    ),
    "ε: why it is there (constant data, 0/0)": ("distributions", "eps"),
    "RMSNorm vs LayerNorm: no centring, no β; direction kept only with γ = 1": (
        "distributions",
        "rms-vs-layer",
    ),
    "LayerNorm erases each sample's scale for good (LN(x) = LN(10x))": (
        "distributions",
        "sample-scale",
    ),
    # placement in residual networks
    "pre-norm vs post-norm in a residual block": ("residual", "placement"),
    "activation and gradient scale through depth at initialization": ("residual", "init"),
    "why post-norm needs learning-rate warm-up (Xiong et al. 2020)": ("residual", "warmup"),
    # why normalization helps training
    "higher learning rates (Ioffe & Szegedy 2015)": ("training", "lr"),
    "faster convergence: steps to a target accuracy (Ioffe & Szegedy 2015)": (
        "training",
        "converge",
    ),
    "GroupNorm vs BatchNorm against batch size (Wu & He 2018)": ("training", "batch"),
    "internal covariate shift, and the debate about it": ("training", "smooth"),
    "a smoother loss landscape, more predictive gradients (Santurkar et al. 2018)": (
        "training",
        "smooth",
    ),
    "BatchNorm's regularizing noise: the train/validation gap": ("training", "noise"),
    "population statistics and re-estimating them under shift (Wu & Johnson 2021)": (
        "training",
        "population",
    ),
    "LayerNorm at tiny batches (Ba et al. 2016)": ("training", "tiny"),
    "Dynamic Tanh in place of LayerNorm, across learning rates (Zhu et al. 2025)": (
        "training",
        "dyt",
    ),
    "Weight Standardization with GroupNorm at micro-batches (Qiao et al. 2019)": ("training", "ws"),
    # choosing a normalization
    "which normalization when: CNNs, transformers, RNNs, detection, style transfer": (
        "choose",
        "guide",
    ),
    "the methods compared: batch dependence, train ≠ eval, distributed training, leakage": (
        "choose",
        "tables",
    ),
    "train vs eval in torch (InstanceNorm's track_running_stats)": ("choose", "train-eval"),
    "torch's defaults: affine, track_running_stats, RMSNorm's eps=None": (
        "choose",
        "torch-defaults",
    ),
    "auditing a real model: placement, weight decay on γ and β, needless biases": (
        "choose",
        "inspect",
    ),
    "the source texts' questions and answers, as graded exercises": ("practice", "choose"),
    "predicting which values share μ and σ²": ("practice", "cells"),
}

SLUGS = {p.path: {s.slug for s in importlib.import_module(p.topic).SECTIONS} for p in PAGES}


@pytest.mark.parametrize("topic", sorted(TOPICS))
def test_every_topic_has_a_section(topic: str) -> None:
    page, slug = TOPICS[topic]
    assert page in SLUGS, f"{topic}: no page {page!r}"
    assert slug in SLUGS[page], f"{topic}: /{page} has no section {slug!r} ({SLUGS[page]})"


def test_every_page_teaches_something_listed() -> None:
    assert {page for page, _ in TOPICS.values()} == set(SLUGS)


def test_the_smoothness_section_names_the_debate() -> None:
    from normviz.training import smooth

    assert "internal covariate shift" in smooth.INTRO
    assert "Santurkar" in smooth.INTRO and "Ioffe" in smooth.INTRO
