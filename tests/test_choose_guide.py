"""The decision guide: the source texts' flowchart, reasons and pitfalls from the registry."""

from __future__ import annotations

import pytest

from normviz import METHODS, STANDARD_METHODS, style
from normviz.choose import compare, guide
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
    assert list(t.index) == [METHODS[k].label for k in STANDARD_METHODS]
    for k in STANDARD_METHODS:
        row = t.loc[METHODS[k].label]
        assert row["normalizes over (NCHW)"] == reduces_text(k, "NCHW")
        assert row["best for"] == METHODS[k].best_for
        assert row["depends on batch size"] == ("yes" if METHODS[k].batch_dependent else "no")
    assert t.loc["GroupNorm", "normalizes over (NCHW)"] == "C/G, H, W"
