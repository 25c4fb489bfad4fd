"""The decision guide: the source texts' flowchart, reasons and pitfalls from the registry."""

from __future__ import annotations

import pytest

from normviz import METHODS, style
from normviz.choose import compare, guide
from normviz.methods import listed
from normviz.sources import SOURCES, cite
from normviz.text import reduces_text


def _rec(arch: str, batch: int = 32, *constraints: str) -> guide.Recommendation:
    return guide.recommend(guide.Situation(arch, batch, frozenset(constraints)))


@pytest.mark.parametrize(
    ("arch", "batch", "constraints", "method"),
    [
        ("transformer", 1, (), "layer"),
        ("transformer", 512, (), "layer"),
        ("transformer", 8, ("cost",), "rms"),
        ("rnn", 64, (), "layer"),
        ("rnn", 64, ("cost",), "layer"),  # RMSNorm is the transformer branch only
        ("cnn", 16, (), "batch"),  # the flowchart's threshold: >= 16
        ("cnn", 15, (), "group"),
        ("cnn", 256, ("same",), "group"),  # identical train and inference rules out BatchNorm
        ("detection", 2, (), "group"),
        ("detection", 32, (), "batch"),
        ("style", 1, (), "instance"),
        ("style", 64, (), "instance"),
    ],
)
def test_flowchart(arch: str, batch: int, constraints: tuple[str, ...], method: str) -> None:
    rec = _rec(arch, batch, *constraints)
    assert rec.method == method
    assert rec.label == METHODS[method].label
    assert rec.path[0] == "root" and rec.path[1] == arch and rec.path[-1] == method
    assert rec.reasons and rec.pitfalls


def test_pitfalls_come_from_the_registry() -> None:
    for arch, batch in (("transformer", 8), ("cnn", 64), ("cnn", 2), ("style", 4)):
        rec = _rec(arch, batch)
        assert rec.pitfalls[0] == f"{rec.label}: {METHODS[rec.method].pitfall}."


def test_batchnorm_pitfalls_follow_the_constraints() -> None:
    plain = " ".join(_rec("cnn", 64).pitfalls)
    assert "model.eval()" in plain and "bias=False" in plain
    assert "SyncBatchNorm" not in plain
    every = " ".join(_rec("cnn", 64, "online", "shift", "distributed").pitfalls)
    assert "SyncBatchNorm" in every and "stale" in every and "single sample" in every


def test_batch_independent_methods_need_no_care_at_inference() -> None:
    rec = _rec("cnn", 4, "online")
    assert rec.method == "group"
    assert any("current sample" in r for r in rec.reasons)
    assert not any("model.eval()" in p for p in rec.pitfalls)


def test_alternatives() -> None:
    assert _rec("transformer").alternative == "rms"
    assert _rec("transformer", 8, "cost").alternative == "layer"
    assert _rec("cnn", 4).alternative == "batch"
    assert _rec("cnn", 64).alt_label == "GroupNorm"
    assert _rec("style").alternative is None and _rec("style").alt_label == ""


@pytest.mark.parametrize(
    ("situation", "match"),
    [
        (guide.Situation("mlp", 8), "architecture"),
        (guide.Situation("cnn", 0), "batch size"),
        (guide.Situation("cnn", guide.MAX_BATCH + 1), "batch size"),
        (guide.Situation("cnn", True), "batch size"),  # type: ignore[arg-type]
        (guide.Situation("cnn", 8, frozenset({"fast"})), "constraint"),
    ],
)
def test_bad_answers_raise(situation: guide.Situation, match: str) -> None:
    with pytest.raises(guide.GuideError, match=match):
        guide.recommend(situation)
    assert issubclass(guide.GuideError, ValueError)


def test_flowchart_highlights_exactly_the_path() -> None:
    rec = _rec("detection", 2)
    dot = guide.flowchart_dot(rec)
    assert dot.startswith("digraph") and dot.rstrip().endswith("}")
    hot = {
        tuple(part.strip().strip('"') for part in line.split("[")[0].split("->"))
        for line in dot.splitlines()
        if "->" in line and f'color="{style.SELECTED}"' in line
    }
    assert hot == {("root", "detection"), ("detection", guide.QUESTION), (guide.QUESTION, "group")}
    for key in ("layer", "rms", "batch", "group", "instance"):
        assert f'label="{METHODS[key].label}"' in dot
    plain = guide.flowchart_dot()
    assert f'color="{style.SELECTED}"' not in plain


def test_comparison_table_reads_the_registry() -> None:
    t = compare.comparison_table()
    assert list(t.index) == [METHODS[k].label for k in listed("guide")]
    for k in listed("guide"):
        row = t.loc[METHODS[k].label]
        assert row["normalizes over (NCHW)"] == reduces_text(k, "NCHW")
        assert row["best for"] == METHODS[k].best_for
        assert row["depends on batch size"] == ("yes" if METHODS[k].batch_dependent else "no")
    assert t.loc["GroupNorm", "normalizes over (NCHW)"] == "C/G, H, W"
    assert t.loc["DyT", "normalizes over (NCHW)"] == "nothing: no statistics"


# ---- what the guide says, checked against the sources (issue 13) -------------------------


def _all_text(rec: guide.Recommendation) -> str:
    return " ".join((*rec.reasons, *rec.pitfalls))


def test_mask_rcnn_used_frozen_batchnorm_and_groupnorm_came_later() -> None:
    text = _all_text(_rec("detection", 2))
    assert "classic GroupNorm user" not in text
    assert "frozen" in text and cite("he2017") in text and cite("wu2018") in text
    assert "Mask R-CNN" not in METHODS["group"].best_for


def test_groupnorm_vs_batchnorm_at_large_and_small_batches_cites_wu_and_he() -> None:
    big = _all_text(_rec("cnn", 64))
    assert "23.6 %" in big and "24.1 %" in big and cite("wu2018") in big
    small = _all_text(_rec("cnn", 2))
    assert "10.6" in small and cite("wu2018") in small


def test_weight_decay_is_a_recipe_choice_not_most_recipes() -> None:
    for arch in guide.ARCHITECTURES:
        text = _all_text(_rec(arch, 32))
        assert "transformer recipes usually exempt" in text
        assert "ResNet/ImageNet recipes decay every parameter" in text
        assert "calibration" in text and "stability" in text
    from normviz.choose.model_audit import DECAY_WHY

    assert "most recipes" not in DECAY_WHY and "ResNet" in DECAY_WHY


def test_transformers_avoid_batch_statistics_for_generation_long_context_and_leakage() -> None:
    text = _all_text(_rec("transformer", 8))
    for phrase in ("one token at a time", "long contexts", "leak"):
        assert phrase in text
    dist = _all_text(_rec("transformer", 8, "distributed"))
    assert "needs no synchronized statistics" in dist


def test_layernorm_pitfall_says_the_scale_is_gone_for_good() -> None:
    p = METHODS["layer"].pitfall
    assert "unless" not in p and "shared by every sample" in p and "for good" in p
    assert compare.comparison_table().loc["LayerNorm", "watch out"] == p
    assert _rec("transformer").pitfalls[0] == f"LayerNorm: {p}."


def test_every_citation_points_into_the_bibliography() -> None:
    import re

    keys = set(SOURCES)
    shorts = {s.short for s in SOURCES.values()}
    texts = [
        _all_text(_rec(a, b, *c))
        for a in guide.ARCHITECTURES
        for b in (2, 64)
        for c in ((), ("shift",))
    ]
    cited = {
        m.group(0)
        for t in texts
        for m in re.finditer(r"[A-Z][a-z]+ (?:& [A-Z][a-z]+|et al\.) \d{4}", t)
    }
    assert cited and cited <= shorts, cited - shorts
    assert keys >= {"ioffe2015", "ba2016", "ulyanov2016", "wu2018", "zhang2019"}


def test_rnn_advice_is_not_the_transformer_advice() -> None:
    """Issue 24 item 7: pre-norm, the final norm and Xiong et al. are transformer advice."""
    for batch, constraints in ((64, ()), (2, ("cost",))):
        rnn = " ".join(_rec("rnn", batch, *constraints).pitfalls)
        assert cite("xiong2020") not in rnn and "final norm" not in rnn and "sublayer" not in rnn
        assert cite("ba2016") in rnn
    trans = " ".join(_rec("transformer", 8).pitfalls)
    assert cite("xiong2020") in trans and "pre-norm" in trans
    # "torch's nn.LSTM and nn.GRU have no built-in normalization": read off the modules
    import torch.nn as nn

    norms = (nn.LayerNorm, nn.RMSNorm, nn.GroupNorm, nn.modules.batchnorm._NormBase)
    for mod in (nn.LSTM(4, 8, num_layers=2), nn.GRU(4, 8, num_layers=2)):
        assert not any(isinstance(m, norms) for m in mod.modules())
        assert all(n.split("_")[0] in ("weight", "bias") for n, _ in mod.named_parameters())
