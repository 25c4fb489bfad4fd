"""Axis Explorer words and numbers (cells, the selected group, the contract card, custom
axes, the classic confusions), with torch.nn as the oracle."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from normviz import (
    METHODS,
    STANDARD_METHODS,
    NormConfigError,
    Refusal,
    contract,
    group_ids,
    normalize,
)
from normviz import axes as axes_page
from normviz.axes import card, cells, code, confusions, custom, group

torch.set_num_threads(2)
SHAPES = {"BTC": (3, 5, 6), "NCHW": (2, 6, 3, 4)}
G = 3


def _g(method: str) -> int | None:
    return G if METHODS[method].grouped else None


def torch_module(method: str, layout: str, shape: tuple[int, ...]):
    """The registry's torch.nn layer for `method` (torch's defaults but ε), and how to apply it."""
    m = METHODS[method]
    mod = m.build(layout, shape, _g(method), eps=None)

    def apply(x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return m.apply(x, layout, module=mod)

    return mod, apply


def _x(shape: tuple[int, ...], seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g) * 2 + torch.arange(shape[-1]) * 0.5


CASES = [(m, lay) for lay in SHAPES for m in STANDARD_METHODS]


@pytest.mark.parametrize(("method", "layout"), [*CASES, ("custom", "BTC"), ("custom", "NCHW")])
def test_group_slices_is_the_group_of_group_ids(method: str, layout: str) -> None:
    shape = SHAPES[layout]
    axes = {"BTC": "B,C", "NCHW": "N,H"}[layout] if method == "custom" else None
    con = contract(method, layout, shape, _g(method), axes)
    ids = group_ids(method, layout, shape, _g(method), axes)
    for cell in np.ndindex(*shape):
        mask = np.zeros(shape, dtype=bool)
        mask[cells.group_slices(con, cell)] = True
        np.testing.assert_array_equal(mask, ids == ids[cell])


@pytest.mark.parametrize(("method", "layout"), CASES)
def test_selected_group_numbers_match_torch(method: str, layout: str) -> None:
    shape = SHAPES[layout]
    x = _x(shape)
    _, apply = torch_module(method, layout, shape)
    y_torch = apply(x)
    ids = group_ids(method, layout, shape, _g(method))
    for cell in [(0,) * len(shape), tuple(n - 1 for n in shape), (1, 2, 1, 3)[: len(shape)]]:
        d = group.selected_group(x, contract(method, layout, shape, _g(method)), cell, eps=1e-5)
        members = x.numpy()[ids == ids[cell]].astype(np.float64)
        assert d.m == members.size
        np.testing.assert_allclose(d.values, members[: len(d.values)], rtol=1e-6)
        if METHODS[method].centred:
            assert d.mean == pytest.approx(members.mean(), abs=1e-5)
            assert d.var == pytest.approx(members.var(), rel=1e-4)
        else:
            assert d.mean is None
            assert d.var == pytest.approx((members**2).mean(), rel=1e-4)
        assert d.x == float(x[cell])
        assert d.y == pytest.approx(float(y_torch[cell]), abs=1e-5)  # torch.nn, the oracle
        # the numbers shown substitute back into the formula
        centre = d.mean if d.mean is not None else 0.0
        assert (d.x - centre) / math.sqrt(d.var + d.eps) == pytest.approx(d.y, abs=1e-4)
        latex = d.computation_latex()
        assert latex.startswith("y = \\frac{") and latex.endswith(group._num(d.y))
        assert group._num(d.var, d.digits) in latex and group._num(d.x, d.digits) in latex
        assert f"m = {d.m}" in d.stats_latex()
        assert ("\\mu" in d.formula_latex()) == METHODS[method].centred
        # issue 24 item 18: the listed values are the group's, not the cell's, and are its first
        first = group.notes(d)[0]
        listed = first.split("row-major order: ")[1].split(", …")[0].rstrip(".")
        shown = [float(v) for v in listed.split(", ")]
        assert f"The group's first {len(shown)} values" in first and "Its first" not in first
        np.testing.assert_allclose(shown, members[: len(shown)], atol=5e-4)


def test_values_text_and_numbers() -> None:
    x = torch.arange(24.0).reshape(2, 3, 4)
    d = group.selected_group(x, contract("batch", "BTC", (2, 3, 4)), (0, 0, 1))
    assert d.values == (1.0, 5.0, 9.0, 13.0, 17.0, 21.0)
    assert d.values_text().startswith("1.000, 5.000") and "(6 values)" not in d.values_text()
    x = torch.arange(64.0).reshape(1, 8, 8)
    d = group.selected_group(x, contract("batch", "BTC", (1, 8, 8)), (0, 0, 0))
    assert d.values_text().endswith("… (8 values)")
    assert group._num(12345.6) == "1.235\\times 10^{4}"
    assert group._num(-0.25) == "-0.25"
    assert group._eps(1e-5) == "10^{-5}" and group._eps(0.0) == "0"


def test_cell_outside_the_tensor_is_refused() -> None:
    with pytest.raises(NormConfigError, match="outside"):
        group.selected_group(torch.zeros(2, 3, 4), contract("layer", "BTC", (2, 3, 4)), (2, 0, 0))


@pytest.mark.parametrize(
    ("method", "layout", "shape", "grow"),
    [
        ("batch", "BTC", (1, 1, 4), "B or T"),
        ("batch", "NCHW", (1, 3, 1, 1), "N or H or W"),
        ("instance", "BTC", (2, 1, 4), "T"),
        ("instance", "NCHW", (2, 3, 1, 1), "H or W"),
    ],
)
def test_refused_settings_match_torch_and_get_a_hint(method, layout, shape, grow) -> None:
    x = _x(shape)
    _, apply = torch_module(method, layout, shape)
    with pytest.raises(ValueError, match="more than 1"):  # torch refuses it too
        apply(x)
    con = contract(method, layout, shape)
    with pytest.raises(Refusal, match="more than 1 value") as refused:  # a lesson, with the hint
        group.selected_group(x, con, (0,) * len(shape))
    assert f"Make {grow} larger than 1" in str(refused.value)
    hint = group.refusal_hint(con)
    assert f"Make {grow} larger than 1" in hint
    assert ("evaluation mode" in hint) == METHODS[method].train_eval_differ
    assert group.refusal_hint(contract(method, layout, SHAPES[layout])) == ""


def test_clamp_cell() -> None:
    assert cells.clamp_cell((4, 6, 8), (9, -2, 7)) == (3, 0, 7)
    assert cells.clamp_cell((4, 6, 8), None) == (0, 0, 0)
    assert cells.clamp_cell((4, 6, 8), ("a", 1, 2)) == (0, 0, 0)
    assert cells.clamp_cell((4, 6, 8, 2), (1, 2, 3)) == (0, 0, 0, 0)


# ---- contract card -------------------------------------------------------------------


@pytest.mark.parametrize(("method", "layout"), CASES)
def test_contract_card_agrees_with_torch_behaviour(method: str, layout: str) -> None:
    shape = SHAPES[layout]
    c = card.contract_card(contract(method, layout, shape, _g(method)))
    assert c.n_stats * c.per_stat == math.prod(shape)
    assert c.uses_other_samples == METHODS[method].batch_dependent
    assert c.train_eval_differ == METHODS[method].train_eval_differ
    mod, apply = torch_module(method, layout, shape)
    x = _x(shape)
    # depends on other samples: change sample 1, watch sample 0's output in torch
    x2 = x.clone()
    x2[1] = x2[1] * 3 + 1
    changed = not torch.allclose(apply(x)[0], apply(x2)[0], atol=1e-6)
    assert c.uses_other_samples == changed
    # issue 24 item 6: a layer whose output ignores a shift keeps means and variances;
    # one that does not (RMSNorm) keeps mean squares
    centres = torch.allclose(apply(x), apply(x + 5.0), atol=1e-4)
    stat_words = "means and variances" if centres else "mean squares"
    assert dict(c.rows())["number of statistics"] == f"{c.n_stats:,} {stat_words}"
    assert stat_words in card.notes(c)[0] and ("variance" in card.notes(c)[0]) == centres
    if not centres:
        for intro in (group.INTRO, axes_page.INTRO):
            assert "mean square" in intro and METHODS[method].label in intro
    # differs between training and evaluation: the same input in both modes
    train = apply(x)
    mod.eval()
    assert c.train_eval_differ == (not torch.allclose(train, apply(x), atol=1e-6))
    rows = dict(c.rows())
    assert rows["reduces over"] == ", ".join(c.reduces)
    assert rows["values per statistic"].endswith(f"= {c.per_stat}")
    assert rows["subtracts the mean"] == ("yes" if METHODS[method].centred else "no")


def test_contract_card_for_custom_axes() -> None:
    c = card.contract_card(contract("custom", "NCHW", (2, 3, 4, 5), axes="N,H", centred=False))
    assert c.reduces == ("N", "H") and c.keeps == ("C", "W")
    assert c.uses_other_samples and c.train_eval_differ and not c.centred
    assert c.n_stats == 15 and c.per_stat == 8
    c = card.contract_card(contract("custom", "BTC", (2, 3, 4), axes="T,C"))
    assert not c.uses_other_samples and not c.train_eval_differ


# ---- custom axes -----------------------------------------------------------------------


def test_explain_axes_names_the_method() -> None:
    v = custom.explain_axes("BTC", "T,B")
    assert v.method == "batch" and v.axes == ("B", "T") and "BatchNorm" in v.text
    assert custom.explain_axes("NCHW", "C,H,W").method == "layer"
    rms = custom.explain_axes("NCHW", "C,H,W", centred=False)
    assert rms.method == "rms" and "RMSNorm" in rms.text
    none = custom.explain_axes("NCHW", "C")
    assert none.method is None and "No standard layer" in none.text
    assert "Tick at least one" in custom.explain_axes("BTC", "").text
    with pytest.raises(NormConfigError, match="unknown axis"):
        custom.explain_axes("BTC", "H")


def _confusions(*args, **kw) -> tuple[confusions.Confusion, ...]:
    return confusions.confusions(contract(*args, **kw))


def _keys(*args, **kw) -> list[str]:
    return [c.key for c in _confusions(*args, **kw)]


def test_channels_last_layernorm_is_not_groupnorm_1() -> None:
    shape = (2, 6, 3, 4)
    x = _x(shape)
    C = shape[1]
    with torch.no_grad():
        channels_last = nn.LayerNorm(C)(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        gn1 = nn.GroupNorm(1, C)(x)
    ours = normalize(x, "custom", "NCHW", axes="C").output
    torch.testing.assert_close(ours, channels_last, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(normalize(x, "custom", "NCHW", axes="C,H,W").output, gn1)
    assert not torch.allclose(channels_last, gn1, atol=1e-3)
    (c,) = _confusions("custom", "NCHW", shape, axes="C")
    assert c.key == "channels_last" and "GroupNorm(1, C)" in c.title and "GroupNorm(1, 6)" in c.text
    assert f"{2 * 3 * 4}" in c.text and f"{6 * 3 * 4}" in c.text
    assert _keys("group", "NCHW", shape, groups=1) == ["channels_last"]
    assert _keys("group", "NCHW", shape, groups=3) == []
    assert _keys("layer", "NCHW", shape) == []


def test_batchnorm1d_wants_channels_first() -> None:
    B, T, C = 3, 5, 6
    x = _x((B, T, C))
    with pytest.raises(RuntimeError):  # channels-last input: torch refuses (T != C)
        nn.BatchNorm1d(C)(x)
    with torch.no_grad():
        untransposed = nn.BatchNorm1d(T)(x)  # takes T as the channels: pools B and C
        right = nn.BatchNorm1d(C)(x.transpose(1, 2)).transpose(1, 2)
    torch.testing.assert_close(normalize(x, "custom", "BTC", axes="B,C").output, untransposed)
    torch.testing.assert_close(normalize(x, "batch", "BTC").output, right)
    (c,) = _confusions("batch", "BTC", (B, T, C))
    assert c.key == "batchnorm1d" and "(N, C, L)" in c.title and f"BatchNorm1d({T})" in c.text
    assert "T = C" in _confusions("batch", "BTC", (2, 4, 4))[0].text
    (c,) = _confusions("custom", "BTC", (B, T, C), axes="B,C")
    assert c.key == "batchnorm1d" and f"BatchNorm1d({T})" in c.text
    assert _keys("custom", "BTC", (B, T, C), axes="B,T") == ["batchnorm1d"]
    assert _keys("layer", "BTC", (B, T, C)) == []


def test_instancenorm_is_layernorm_over_one_feature_map() -> None:
    N, C, H, W = 2, 3, 4, 5
    x = _x((N, C, H, W))
    with torch.no_grad():
        inst = nn.InstanceNorm2d(C)(x)
        as_layer = nn.LayerNorm(H * W, elementwise_affine=False)(x.reshape(N, C, H * W))
    torch.testing.assert_close(inst, as_layer.reshape(N, C, H, W), atol=1e-5, rtol=1e-5)
    (c,) = _confusions("instance", "NCHW", (N, C, H, W))
    assert c.key == "instance_as_layer" and f"H·W = {H * W}" in c.text
    assert _keys("custom", "NCHW", (N, C, H, W), axes="H,W") == ["instance_as_layer"]
    xs = _x((2, 5, 3))  # (B, T, C): each feature's sequence is the embedding
    with torch.no_grad():
        inst1 = nn.InstanceNorm1d(3)(xs.transpose(1, 2))
        seq = nn.LayerNorm(5, elementwise_affine=False)(xs.transpose(1, 2))
    torch.testing.assert_close(inst1, seq, atol=1e-5, rtol=1e-5)
    assert _keys("instance", "BTC", (2, 5, 3)) == ["instance_as_layer"]


def test_verification_text() -> None:
    ok, text = code.verification_text("nn.BatchNorm1d", 4.8e-7)
    assert ok and text == "matches torch.nn.BatchNorm1d, max |Δ| = 4.8e-07"
    ok, text = code.verification_text("torch.mean/var", 0.5)
    assert not ok and "differs from torch.mean/var" in text
    assert not code.verification_text("nn.LayerNorm", float("nan"))[0]


@pytest.mark.parametrize("method", ["batch", "layer", "instance", "group", "rms"])
@pytest.mark.parametrize("seed", range(5))
def test_the_substituted_numbers_reproduce_y_on_a_calculator(method: str, seed: int) -> None:
    """The digits shown for x, μ and σ² give the shown y when typed into a calculator."""
    import math
    import re

    from normviz.axes.group import selected_group

    g = torch.Generator().manual_seed(seed)
    x = torch.randn(4, 6, 8, generator=g) * 3 + 1
    con = contract(method, "BTC", (4, 6, 8), groups=2 if method == "group" else None)
    d = selected_group(x, con, (1, 2, 3))
    nums = [float(v) for v in re.findall(r"-?\d+\.?\d*(?:e-?\d+)?", d.computation_latex())]
    # y = (x − μ)/√(σ² + ε) with the numbers as printed (x, [μ], σ², ε written as 10^{-5})
    shown_x, *rest = nums
    mean = rest[0] if d.mean is not None else 0.0
    var = rest[1] if d.mean is not None else rest[0]
    y = (shown_x - mean) / math.sqrt(var + d.eps)
    assert math.isclose(y, d.y, rel_tol=1e-3, abs_tol=1e-3), d.computation_latex()


def test_rmsnorm_has_no_beta_in_its_computation() -> None:
    from normviz.axes.group import selected_group

    d = selected_group(torch.randn(4, 6, 8), contract("rms", "BTC", (4, 6, 8)), (0, 0, 0))
    assert r"\beta" not in d.formula_latex()
    assert "+ 0" not in d.computation_latex()
    assert "no β" in " ".join(notes_of(d))


def notes_of(d):
    from normviz.axes.group import notes

    return notes(d)
