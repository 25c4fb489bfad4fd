"""normviz.distributions against torch.nn: group tables, moments left alone, γ/β, ε, cosine."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from normviz import LAYOUTS, METHODS, STANDARD_METHODS, NormConfigError
from normviz.core import contract
from normviz.data import generate
from normviz.distributions import affine as affine_section
from normviz.distributions import before_after
from normviz.distributions import rms_layer as rms_section
from normviz.distributions import sample_scale as scale_section
from normviz.distributions.affine import affine_demo, affine_params, landing_note, recover_input
from normviz.distributions.all_methods import compare_methods
from normviz.distributions.before_after import group_table
from normviz.distributions.downloads import csv_bytes, npy_bytes
from normviz.distributions.eps import eps_sweep
from normviz.distributions.histograms import histogram
from normviz.distributions.moments import channel_moments
from normviz.distributions.rms_layer import cosine_per_vector, cost_table, time_layer_vs_rms
from normviz.distributions.sample_scale import (
    affine_scale_note,
    layernorm_scale_with_affine,
    sample_rms,
    scale_invariance,
)
from normviz.distributions.setup import example_setup, leading_shape
from normviz.distributions.uncontrolled import uncontrolled
from normviz.io import load_tensor
from normviz.sections import no_progress
from ui.params import EPS_CHOICES

SHAPES = {"BTC": (3, 5, 8), "NCHW": (3, 4, 3, 5)}
G = 2


# ---- the oracle: torch.nn modules and hand-written groupings ----------------------------


def torch_norm(
    x: torch.Tensor,
    method: str,
    layout: str,
    eps: float = 1e-5,
    weight: np.ndarray | None = None,
    bias: np.ndarray | None = None,
) -> torch.Tensor:
    """The same normalization computed by the torch.nn module a user would write."""
    C = x.shape[LAYOUTS[layout].channel_axis]
    btc = layout == "BTC"
    rest = tuple(x.shape[2:]) if not btc else ()
    if method == "batch":
        mod: nn.Module = nn.BatchNorm1d(C, eps=eps) if btc else nn.BatchNorm2d(C, eps=eps)
    elif method == "instance":
        mod = (
            nn.InstanceNorm1d(C, eps=eps, affine=True)
            if btc
            else nn.InstanceNorm2d(C, eps=eps, affine=True)
        )
    elif method == "group":
        mod = nn.GroupNorm(G, C, eps=eps)
    elif method == "layer":
        mod = nn.LayerNorm((C, *rest), eps=eps)
    else:
        mod = nn.RMSNorm((C, *rest), eps=eps)
    mod = mod.to(x.dtype).train()  # before the copy, so float64 γ, β stay float64
    with torch.no_grad():
        for name, p in (("weight", weight), ("bias", bias)):
            if p is None or getattr(mod, name, None) is None:
                continue
            t = torch.as_tensor(p, dtype=x.dtype)
            if method in ("layer", "rms") and not btc and t.numel() == C:  # (C,) → (C, H, W)
                t = t.reshape(C, 1, 1).expand(C, *rest)
            getattr(mod, name).copy_(t)
    channel_first = METHODS[method].torch[layout].channel_first and btc
    inp = x.transpose(1, 2) if channel_first else x
    with torch.no_grad():
        out = mod(inp)
    out = out.transpose(1, 2) if channel_first else out
    if method == "rms" and bias is not None:  # nn.RMSNorm has no β: add it along C
        c = LAYOUTS[layout].channel_axis
        shape = [1] * x.ndim
        shape[c] = C
        b = torch.as_tensor(bias, dtype=x.dtype)
        out = out + (b.reshape(shape) if b.numel() == C else b)  # (C,) or (C, H, W)
    return out


def oracle_groups(t: torch.Tensor, method: str, layout: str) -> torch.Tensor:
    """(n_groups, m): each row one statistic group, rows in the kept axes' row-major order."""
    t = t.double()
    if layout == "BTC":
        B, T, C = t.shape
        return {
            "batch": lambda: t.permute(2, 0, 1).reshape(C, -1),
            "layer": lambda: t.reshape(B * T, C),
            "rms": lambda: t.reshape(B * T, C),
            "instance": lambda: t.permute(0, 2, 1).reshape(B * C, T),
            "group": lambda: t.permute(0, 2, 1).reshape(B * G, -1),
        }[method]()
    N, C = t.shape[:2]
    return {
        "batch": lambda: t.transpose(0, 1).reshape(C, -1),
        "layer": lambda: t.reshape(N, -1),
        "rms": lambda: t.reshape(N, -1),
        "instance": lambda: t.reshape(N * C, -1),
        "group": lambda: t.reshape(N * G, -1),
    }[method]()


def _kw(method: str) -> dict:
    return {"groups": G} if METHODS[method].grouped else {}


def con(x: torch.Tensor, method: str, layout: str, **kw) -> object:
    """The resolved contract the compute functions take."""
    return contract(method, layout, tuple(x.shape), **kw)


CASES = [(m, lay) for lay in LAYOUTS for m in STANDARD_METHODS]


# ---- group tables --------------------------------------------------------------------


@pytest.mark.parametrize(("method", "layout"), CASES)
def test_group_table_matches_torch(method: str, layout: str) -> None:
    x = generate("channels", layout, SHAPES[layout], 7)
    tab = group_table(x, con(x, method, layout, **_kw(method)))
    before = oracle_groups(x, method, layout)
    after = oracle_groups(torch_norm(x, method, layout), method, layout)
    df = tab.table
    assert tab.n_groups == len(df) == before.shape[0]
    assert tab.group_size == before.shape[1] and (df["count"] == before.shape[1]).all()
    np.testing.assert_allclose(df["mean before"], before.mean(1), atol=1e-6)
    np.testing.assert_allclose(df["variance before"], before.var(1, correction=0), rtol=1e-5)
    np.testing.assert_allclose(df["mean after"], after.mean(1), atol=1e-5)
    np.testing.assert_allclose(df["variance after"], after.var(1, correction=0), atol=1e-4)
    if METHODS[method].centred:
        assert "mean square after" not in df
        assert (df["mean after"].abs() < 1e-5).all()
        assert ((df["variance after"] - 1).abs() < 1e-3).all()
    else:
        np.testing.assert_allclose(df["mean square after"], after.square().mean(1), atol=1e-4)
        assert ((df["mean square after"] - 1).abs() < 1e-3).all()
    # the summary is the min/max over every group
    for col in tab.summary.columns:
        assert tab.summary.loc["min", col] == pytest.approx(df[col].min())
        assert tab.summary.loc["max", col] == pytest.approx(df[col].max())


def test_group_table_names_the_groups() -> None:
    x = generate("normal", "BTC", (2, 3, 4), 0)
    layer = group_table(x, con(x, "layer", "BTC")).table
    assert list(layer.columns[:2]) == ["B", "T"]
    assert list(zip(layer["B"], layer["T"], strict=True)) == [
        (b, t) for b in (0, 1) for t in (0, 1, 2)
    ]
    grp = group_table(x, con(x, "group", "BTC", groups=2))
    assert grp.axes == ("T", "C/G") and grp.kept == ("B", "G")
    assert list(grp.table.columns[:2]) == ["B", "G"]
    xn = generate("normal", "NCHW", (2, 3, 2, 2), 0)
    batch = group_table(xn, con(xn, "batch", "NCHW"))
    assert list(batch.table["C"]) == [0, 1, 2] and batch.axes == ("N", "H", "W")


def test_group_table_custom_axes() -> None:
    x = generate("channels", "BTC", (3, 4, 5), 1)
    tab = group_table(x, con(x, "custom", "BTC", axes=("B",), centred=False))
    rows = x.double().permute(1, 2, 0).reshape(20, 3)  # one group per (T, C), pooled over B
    y = rows / torch.sqrt(rows.square().mean(1, keepdim=True) + 1e-5)
    np.testing.assert_allclose(tab.table["mean square after"], y.square().mean(1), atol=1e-5)
    assert tab.kept == ("T", "C")


def test_group_table_caps_the_csv_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(before_after, "CSV_ROWS", 10)
    x = generate("normal", "BTC", (4, 6, 8), 0)
    tab = group_table(x, con(x, "layer", "BTC"))
    assert len(tab.table) == 10 and tab.n_groups == 24 and len(tab.head) == 10


def test_group_table_refuses_what_cannot_run() -> None:
    with pytest.raises(NormConfigError, match="divisible"):
        group_table(torch.zeros(2, 3, 8), con(torch.zeros(2, 3, 8), "group", "BTC", groups=3))


# ---- the moments a method leaves alone ------------------------------------------------


def test_after_layernorm_the_feature_means_over_the_batch_are_not_zero() -> None:
    x = generate("channels", "BTC", (4, 6, 8), 0)
    df = uncontrolled(x, con(x, "layer", "BTC"))
    y = torch_norm(x, "layer", "BTC").double()
    feature_means = y.mean(dim=(0, 1))  # BatchNorm's groups, computed by hand
    row = df.loc["BatchNorm"]
    assert row["largest |mean|"] == pytest.approx(float(feature_means.abs().max()), rel=1e-5)
    assert row["what holds"] == "neither" and row["this method"] == ""
    own = df.loc["LayerNorm / RMSNorm"]
    assert own["what holds"] == "mean 0 and variance 1" and own["this method"] == "◀"


def test_after_batchnorm_a_token_is_not_standardized() -> None:
    x = generate("channels", "BTC", (4, 6, 8), 0)
    df = uncontrolled(x, con(x, "batch", "BTC"))
    y = torch_norm(x, "batch", "BTC").double()
    tok = y.var(dim=2, correction=0)  # one token's features
    row = df.loc["LayerNorm / RMSNorm"]
    assert row["variance min"] == pytest.approx(float(tok.min()), rel=1e-5)
    assert row["variance max"] == pytest.approx(float(tok.max()), rel=1e-5)
    assert row["what holds"] == "neither"
    assert df.loc["BatchNorm", "what holds"] == "mean 0 and variance 1"


def test_instance_norm_also_standardizes_batchnorms_groups() -> None:
    """Equal-size groups with mean 0, variance 1 pool to mean 0, variance 1: read off numbers."""
    x = generate("channels", "NCHW", (3, 4, 5, 5), 0)
    df = uncontrolled(x, con(x, "instance", "NCHW"))
    assert df.loc["BatchNorm", "what holds"] == "mean 0 and variance 1"
    assert df.loc["BatchNorm", "this method"] == ""
    assert df.loc["InstanceNorm", "this method"] == "◀"


def test_rms_holds_the_mean_square_only() -> None:
    x = generate("channels", "BTC", (4, 6, 8), 0)
    df = uncontrolled(x, con(x, "rms", "BTC"))
    assert df.loc["LayerNorm / RMSNorm", "what holds"] == "mean square 1"


def test_views_follow_the_registry_and_show_an_impossible_groupnorm() -> None:
    x = generate("normal", "NCHW", (2, 6, 3, 3), 0)
    batch = con(x, "batch", "NCHW")
    assert "GroupNorm" in uncontrolled(x, batch, groups=3).index
    # a G that cannot split C: the GroupNorm view stays, showing the refusal and the divisors
    refused = uncontrolled(x, batch, groups=4).loc["GroupNorm", "what holds"]
    assert refused.startswith("cannot run") and "divisible" in refused and "1, 2, 3, 6" in refused
    # G = 1 groups exactly like LayerNorm in NCHW: one row, both names
    one = uncontrolled(x, batch, groups=1)
    assert "LayerNorm / GroupNorm / RMSNorm" in one.index


# ---- histograms and all methods -------------------------------------------------------


def test_histogram_counts_every_value_and_keeps_nan_apart() -> None:
    x = torch.randn(10_000, dtype=torch.float64)
    x[:7] = float("nan")
    h = histogram(x, bins=30)
    finite = x[7:].numpy()
    counts, edges = np.histogram(finite, bins=30, range=(finite.min(), finite.max()))
    np.testing.assert_array_equal(h.counts, counts)
    np.testing.assert_allclose(h.edges, edges)
    assert h.n == finite.size and h.n_nonfinite == 7
    assert h.mean == pytest.approx(finite.mean()) and h.std == pytest.approx(finite.std())
    const = histogram(torch.full((5,), 2.0))
    assert const.counts.sum() == 5 and const.edges[0] < 2 < const.edges[-1]


def test_histogram_matches_numpy_on_float32_and_a_given_range() -> None:
    x = (torch.randn(200_003, generator=torch.Generator().manual_seed(5)) * 3 + 1).float()
    a = x.numpy()
    for rng in [None, (-2.0, 2.5), (float(a.min()), float(a.max()))]:
        h = histogram(x, bins=37, value_range_=rng)
        counts, edges = np.histogram(a, bins=37, range=rng or (float(a.min()), float(a.max())))
        np.testing.assert_allclose(h.edges, edges)
        assert h.counts.sum() == counts.sum()  # outside the range: not counted, as numpy
        assert np.abs(h.counts - counts).sum() <= 4  # a value on an inner edge may move
    assert histogram(x, value_range_=(50.0, 60.0)).counts.sum() == 0
    h = histogram(torch.tensor([0.0, 1.0, 1.0]), bins=4)
    assert h.counts.tolist() == [1, 0, 0, 2]  # the last bin includes its right edge
    assert h.mean == pytest.approx(2 / 3) and h.std == pytest.approx(np.std([0, 1, 1]))
    wide = histogram(torch.arange(1000.0), bins=500)  # more bins than uint8 indexes
    assert wide.counts.tolist() == [2] * 500


def test_leading_shape_keeps_channels_and_bounds_the_values() -> None:
    assert leading_shape((4, 6, 8), "BTC", 2**20) == (4, 6, 8)  # small: unchanged
    assert leading_shape((64, 256, 128), "BTC", 2**20) == (32, 256, 128)  # samples first
    assert leading_shape((1, 4096, 1024), "BTC", 2**20) == (1, 1024, 1024)  # then T
    assert leading_shape((32, 32, 64, 64), "NCHW", 2**20) == (8, 32, 64, 64)
    assert leading_shape((1, 256, 128, 128), "NCHW", 2**20) == (1, 256, 32, 128)  # then H
    assert leading_shape((2, 4096, 1, 512), "NCHW", 2**20) == (1, 4096, 1, 512)  # C stays


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_compare_methods_matches_torch(layout: str) -> None:
    x = generate("outliers", layout, SHAPES[layout], 3)
    comp = compare_methods(x, layout, groups=G)
    assert set(comp.outputs) == set(STANDARD_METHODS) and not comp.refused
    edges = comp.outputs["batch"].edges
    for key, h in comp.outputs.items():
        np.testing.assert_allclose(h.edges, edges)  # one shared x-range
        ref = torch_norm(x, key, layout).numpy()
        counts, _ = np.histogram(ref, bins=edges)
        assert abs(counts - h.counts).sum() <= 2  # a value on a bin edge may fall either way
        assert h.n == x.numel()
    assert comp.input.n == x.numel()


def test_compare_methods_reports_what_cannot_run() -> None:
    comp = compare_methods(torch.randn(2, 1, 6), "BTC", groups=4)
    assert set(comp.refused) == {"instance", "group"}
    assert "divisible" in comp.refused["group"] and "more than 1" in comp.refused["instance"]


# ---- γ and β -------------------------------------------------------------------------


def test_affine_params() -> None:
    w, b = affine_params("scalar", 4, 2.0, -1.0)
    assert (w == 2).all() and (b == -1).all()
    w, b = affine_params("per-channel", 5, 2.0, 1.0)
    np.testing.assert_allclose(w, [1, 1.5, 2, 2.5, 3])
    np.testing.assert_allclose(b, [0, 0.5, 1, 1.5, 2])
    assert affine_params("per-channel", 1, 2.0, 1.0)[0].tolist() == [2.0]
    with pytest.raises(ValueError, match="unknown"):
        affine_params("matrix", 3, 1.0, 0.0)  # type: ignore[arg-type]


@pytest.mark.parametrize(("method", "layout"), CASES)
def test_affine_demo_matches_torch(method: str, layout: str) -> None:
    x = generate("channels", layout, SHAPES[layout], 2)
    demo = affine_demo(x, con(x, method, layout, **_kw(method)), "per-channel", 2.0, 0.5)
    ref = torch_norm(x, method, layout, weight=demo.weight, bias=demo.bias)
    moments = channel_moments(ref, layout)
    np.testing.assert_allclose(demo.channels["mean"], moments["mean"], atol=1e-5)
    np.testing.assert_allclose(demo.channels["std"], moments["std"], atol=1e-4)
    np.testing.assert_allclose(demo.channels["γ"], demo.weight.reshape(len(demo.weight), -1)[:, 0])
    assert demo.after.n == demo.before.n == x.numel()
    if method == "batch":  # per-channel groups: each channel lands exactly on its β, γ
        np.testing.assert_allclose(demo.channels["mean"], demo.bias, atol=1e-5)
        np.testing.assert_allclose(demo.channels["std"], demo.weight, rtol=1e-3)


def _module_shapes(layout: str, shape: tuple[int, ...]) -> dict[str, tuple]:
    """γ and β shapes read off the torch modules a user would write (None: no parameter)."""
    C = shape[LAYOUTS[layout].channel_axis]
    btc = layout == "BTC"
    rest = () if btc else tuple(shape[2:])
    mods = {
        "BatchNorm": nn.BatchNorm1d(C) if btc else nn.BatchNorm2d(C),
        "LayerNorm": nn.LayerNorm([C, *rest]),
        "InstanceNorm": nn.InstanceNorm1d(C) if btc else nn.InstanceNorm2d(C),
        "GroupNorm": nn.GroupNorm(G, C),
        "RMSNorm": nn.RMSNorm([C, *rest]),
    }
    params = {k: (m.weight, getattr(m, "bias", None)) for k, m in mods.items()}
    return {k: tuple(None if p is None else tuple(p.shape) for p in ps) for k, ps in params.items()}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_torch_shapes_are_read_off_the_modules(layout: str) -> None:
    shape = SHAPES[layout]
    table = affine_section.torch_shapes(layout, shape, G).set_index("method")
    for label, (w, b) in _module_shapes(layout, shape).items():
        row = table.loc[label]
        assert row["γ: .weight.shape"] == ("none (affine=False)" if w is None else str(w)), label
        assert (
            row["β: .bias.shape"].startswith("none")
            if b is None
            else row["β: .bias.shape"] == str(b)
        )
    if layout == "NCHW":  # LayerNorm over (C, H, W): elementwise, not per channel
        assert table.loc["LayerNorm", "γ: .weight.shape"] == str(shape[1:])
        assert table.loc["GroupNorm", "γ: .weight.shape"] == f"({shape[1]},)"
    refused = affine_section.torch_shapes(layout, shape, 3).set_index("method")  # 3 ∤ C
    assert refused.loc["GroupNorm", "γ: .weight.shape"].startswith("refused:")


@pytest.mark.parametrize(("method", "layout"), CASES)
@pytest.mark.parametrize("kind", ["scalar", "per-channel", "per-element"])
def test_gamma_has_torchs_shape_and_output_matches_the_module(
    method: str, layout: str, kind: str
) -> None:
    x = generate("channels", layout, SHAPES[layout], 3)
    demo = affine_demo(x, con(x, method, layout, **_kw(method)), kind, 2.0, 0.5)  # type: ignore[arg-type]
    w, _ = _module_shapes(layout, SHAPES[layout])[METHODS[method].label]
    C = SHAPES[layout][LAYOUTS[layout].channel_axis]
    assert demo.weight.shape == (w or (C,)) and demo.bias.shape == demo.weight.shape
    assert demo.torch_default == (w is not None)
    elementwise = method in ("layer", "rms") and layout == "NCHW"
    assert demo.per_element == (kind == "per-element" and elementwise)
    # the module itself, γ and β copied in, gives the same per-channel moments
    ref = torch_norm(x, method, layout, weight=demo.weight, bias=demo.bias)
    moments = channel_moments(ref, layout)
    np.testing.assert_allclose(demo.channels["mean"], moments["mean"], atol=1e-5)
    np.testing.assert_allclose(demo.channels["std"], moments["std"], atol=1e-4)
    text = affine_section.shape_note(demo, method, kind)
    assert str(demo.weight.shape) in text
    assert ("one per element of a sample" in text) == elementwise
    if method == "instance":
        assert "no γ by default (affine=False)" in text


def test_layernorm_over_chw_gets_an_elementwise_gamma() -> None:
    """nn.LayerNorm([C, H, W]) has a (C, H, W) γ; the demo applies it as torch does."""
    x = generate("channels", "NCHW", SHAPES["NCHW"], 4)
    _, C, H, W = x.shape
    demo = affine_demo(x, con(x, "layer", "NCHW"), "per-element", 2.0, 1.0)
    ln = nn.LayerNorm([C, H, W])
    with torch.no_grad():
        ln.weight.copy_(torch.as_tensor(demo.weight))
        ln.bias.copy_(torch.as_tensor(demo.bias))
        y = ln(x)
    assert ln.weight.shape == demo.weight.shape == (C, H, W)
    np.testing.assert_allclose(channel_moments(y, "NCHW")["std"], demo.channels["std"], atol=1e-4)
    assert demo.weight.reshape(C, -1).std(1).min() > 0  # γ varies inside each channel
    assert float(demo.weight.min()) == pytest.approx(1.0)  # 0.5γ … 1.5γ with γ = 2
    assert float(demo.weight.max()) == pytest.approx(3.0)


def test_under_layernorm_channels_do_not_land_on_beta_and_the_note_says_so() -> None:
    x = generate("channels", "BTC", SHAPES["BTC"], 2)
    demo = affine_demo(x, con(x, "layer", "BTC"), "per-channel", 2.0, 1.0)
    ref = channel_moments(torch_norm(x, "layer", "BTC", weight=demo.weight, bias=demo.bias), "BTC")
    miss = float((ref["mean"] - demo.bias).abs().max())
    assert miss > 0.5  # far from β, not "near" it
    note = landing_note(demo, "layer")
    assert f"{ref['mean'].min():.3g} … {ref['mean'].max():.3g}" in note
    assert f"largest miss {miss:.3g}" in note and "not onto β and γ" in note
    bn = affine_demo(x, con(x, "batch", "BTC"), "per-channel", 2.0, 1.0)
    assert "lands on its β_c" in landing_note(bn, "batch")


def test_channel_moments_against_torch() -> None:
    x = generate("channels", "NCHW", (3, 4, 2, 2), 0).double()
    df = channel_moments(x, "NCHW")
    np.testing.assert_allclose(df["mean"], x.mean(dim=(0, 2, 3)), atol=1e-9)
    np.testing.assert_allclose(df["std"], x.std(dim=(0, 2, 3), correction=0), atol=1e-9)


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_recover_input_with_torch_batchnorm(layout: str) -> None:
    x = generate("channels", layout, SHAPES[layout], 5)
    rec = recover_input(x, layout, eps=1e-5)
    assert rec.max_abs_diff < 1e-9 * max(1.0, rec.max_abs_x)
    assert rec.max_abs_diff < rec.max_abs_diff_sigma  # leaving ε out costs a little
    ref = torch_norm(x.double(), "batch", layout, weight=rec.gamma, bias=rec.beta)
    assert float((ref - x.double()).abs().max()) < 1e-9 * rec.max_abs_x


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_recovery_needs_sqrt_var_plus_eps_and_the_same_batch(layout: str) -> None:
    """BN(x; γ = √(σ² + ε), β = μ) = x with nn.BatchNorm; another batch is not given back."""
    x = generate("channels", layout, SHAPES[layout], 5).double()
    x2 = generate("channels", layout, SHAPES[layout], 6).double()
    dims = (0, 1) if layout == "BTC" else (0, 2, 3)
    mu, var = x.mean(dims), x.var(dims, correction=0)
    eps = 1e-2  # a large ε makes γ = σ visibly wrong
    rec = recover_input(x, layout, eps=eps, other=x2)
    np.testing.assert_allclose(rec.gamma, torch.sqrt(var + eps), rtol=1e-12)
    np.testing.assert_allclose(rec.beta, mu, rtol=1e-12)
    back = torch_norm(x, "batch", layout, eps=eps, weight=rec.gamma, bias=rec.beta)
    assert float((back - x).abs().max()) < 1e-9 * rec.max_abs_x  # the identity, in torch
    sigma_only = torch_norm(x, "batch", layout, eps=eps, weight=var.sqrt().numpy(), bias=mu)
    assert float((sigma_only - x).abs().max()) == pytest.approx(rec.max_abs_diff_sigma)
    assert rec.max_abs_diff_sigma > 1e-4  # γ = σ leaves ε's part out
    other = torch_norm(x2, "batch", layout, eps=eps, weight=rec.gamma, bias=rec.beta)
    assert rec.max_abs_diff_other == pytest.approx(float((other - x2).abs().max()))
    assert rec.max_abs_diff_other > 0.1  # training mode: x2 brings its own statistics


def test_the_section_reads_the_shapes_at_the_shared_groups() -> None:
    setup = example_setup()  # BatchNorm on (4, 6, 8), the shared G = 2
    res = affine_section.SECTION.run(
        setup, {"affine": "per-element", "gamma": 2.0, "beta": 1.0}, no_progress
    )
    table = affine_section.SECTION.table(res).set_index("method")
    assert table.loc["GroupNorm", "torch module"] == "nn.GroupNorm(2, 8, eps=1e-05)"
    assert table.loc["LayerNorm", "γ: .weight.shape"] == "(8,)"  # LayerNorm(C) in (B, T, C)
    notes = affine_section.SECTION.notes(res)
    assert notes[0].startswith("BatchNorm's γ has torch's shape (8,): 8 values, one per channel.")
    assert "per-element is per-channel" in notes[0]


def test_recovery_notes_come_from_the_numbers() -> None:
    res = affine_section.SECTION.run(
        example_setup(), {"affine": "scalar", "gamma": 2.0, "beta": 1.0}, no_progress
    )
    text = " ".join(affine_section.SECTION.notes(res))
    assert "√(σ_c² + ε)" in text and "γ_c = σ_c and" not in text
    assert f"{res.recovery.max_abs_diff_other:.3g}" in text and "does not come back" in text


def test_only_per_channel_statistics_can_be_undone() -> None:
    with pytest.raises(NormConfigError, match="one value per channel"):
        recover_input(torch.randn(2, 3, 4), "BTC", method="layer")


# ---- ε -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "layout"), [("layer", "BTC"), ("group", "NCHW"), ("rms", "BTC")]
)
def test_eps_sweep_matches_torch_at_every_eps(method: str, layout: str) -> None:
    lay = LAYOUTS[layout]
    x = generate("constant", layout, tuple(lay.defaults[a] for a in lay.axes), 0)
    sweep = eps_sweep(x, con(x, method, layout, **_kw(method)))
    assert list(sweep.eps) == sorted(EPS_CHOICES)
    assert sweep.zero_groups >= 1
    for i, eps in enumerate(sweep.eps):
        y = torch_norm(x, method, layout, eps=float(eps))
        assert int(torch.isnan(y).sum()) == sweep.nan_values[i]
        rows = oracle_groups(y, method, layout)
        live = oracle_groups(x, method, layout).var(1) > 0
        m = rows[live].var(1, correction=0) if METHODS[method].centred else None
        if m is None:
            m = rows[live].square().mean(1)
        assert float(m.min()) == pytest.approx(sweep.var_after_min[i], abs=1e-4)
        assert float(m.max()) == pytest.approx(sweep.var_after_max[i], abs=1e-4)
    assert sweep.nan_values[0] == sweep.zero_groups * sweep.group_size


def test_eps_sweep_without_constant_groups_has_no_nan() -> None:
    x = generate("channels", "BTC", (4, 6, 8), 0)
    sweep = eps_sweep(x, con(x, "batch", "BTC"))
    assert sweep.zero_groups == 0 and (sweep.nan_values == 0).all()
    assert sweep.var_after_max[-1] < 1  # ε = 1 shrinks even the widest group


# ---- RMSNorm vs LayerNorm ------------------------------------------------------------


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_cosine_per_vector_against_torch(layout: str) -> None:
    x = generate("channels", layout, SHAPES[layout], 4)
    cmp = cosine_per_vector(x, layout)
    flat = x.reshape(-1, x.shape[-1]) if layout == "BTC" else x.reshape(x.shape[0], -1)
    for key, got in (("layer", cmp.layer), ("rms", cmp.rms)):
        y = torch_norm(x, key, layout)
        y = y.reshape(-1, y.shape[-1]) if layout == "BTC" else y.reshape(y.shape[0], -1)
        want = nn.functional.cosine_similarity(flat.double(), y.double(), dim=1)
        np.testing.assert_allclose(got, want, atol=1e-5)
    np.testing.assert_allclose(cmp.rms, 1.0, atol=1e-5)
    assert (cmp.layer < 1 - 1e-4).any()
    # LayerNorm's cosine is σ / sqrt(σ² + μ²) = 1 / sqrt(1 + (μ/σ)²)
    mu, var = flat.double().mean(1), flat.double().var(1, correction=0)
    np.testing.assert_allclose(cmp.layer, torch.sqrt(var / (var + mu**2)), atol=1e-4)
    assert cmp.vector_axes == (("C",) if layout == "BTC" else ("C", "H", "W"))


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_a_learned_gamma_turns_rmsnorms_vector(layout: str) -> None:
    """cos(x, RMSNorm(x)) is 1 only with γ = 1: torch's nn.RMSNorm with a per-feature γ."""
    x = generate("channels", layout, SHAPES[layout], 4)
    cmp = cosine_per_vector(x, layout, seed=3)
    y = torch_norm(x, "rms", layout, weight=cmp.gamma)
    flat = x.reshape(-1, x.shape[-1]) if layout == "BTC" else x.reshape(x.shape[0], -1)
    y = y.reshape(flat.shape)
    want = nn.functional.cosine_similarity(flat.double(), y.double(), dim=1)
    np.testing.assert_allclose(cmp.rms_gamma, want, atol=1e-5)
    assert float(cmp.rms_gamma.min()) < 1 - 1e-3
    lo, hi = rms_section.GAMMA_RANGE
    assert lo <= cmp.gamma.min() and cmp.gamma.max() <= hi
    res = rms_section.SECTION.run(example_setup(), {}, no_progress)
    note = rms_section.SECTION.notes(res)[0]
    assert f"**{float(res.cosine.rms_gamma.min()):.4f}**" in note and "only when γ" in note


def test_cosine_leaves_out_zero_vectors() -> None:
    x = generate("constant", "BTC", (3, 4, 8), 0)  # the last sample is all zeros
    cmp = cosine_per_vector(x, "BTC")
    assert cmp.zero_vectors == 4 and cmp.layer.size == cmp.rms.size == 8
    assert np.isfinite(cmp.layer).all()


def test_cost_table_and_timing() -> None:
    costs = cost_table("BTC", (4, 6, 8))
    assert list(costs.index) == ["LayerNorm", "RMSNorm"]
    assert costs.loc["RMSNorm", "learned parameters"] == "γ only"
    t = time_layer_vs_rms(torch.randn(2, 3, 8), "BTC", repeats=1)
    assert t.layer > 0 and t.rms > 0 and t.ratio > 0
    assert time_layer_vs_rms(torch.randn(2, 3, 4, 4), "NCHW", repeats=1).layer > 0


# ---- per-sample scale ----------------------------------------------------------------


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_scale_invariance_against_torch(layout: str) -> None:
    x = generate("channels", layout, SHAPES[layout], 6)
    df = scale_invariance(x, layout, groups=G, factor=10.0)
    scaled = x.clone()
    scaled[0] *= 10
    for key in STANDARD_METHODS:
        d = (torch_norm(scaled, key, layout) - torch_norm(x, key, layout)).abs()
        row = df.loc[METHODS[key].label]
        assert row["scaled sample: max |Δy|"] == pytest.approx(float(d[0].max()), abs=2e-5)
        assert row["other samples: max |Δy|"] == pytest.approx(float(d[1:].max()), abs=2e-5)
        # the registry's flag and the numbers agree
        assert row["uses other samples"] == ("yes" if METHODS[key].batch_dependent else "no")
        moved = row["other samples: max |Δy|"] > 1e-3
        assert moved == METHODS[key].batch_dependent
        if not METHODS[key].batch_dependent:
            assert row["scaled sample: max |Δy|"] < 1e-2  # only ε tells ×1 from ×10


def test_scale_invariance_with_one_sample_and_refusals() -> None:
    df = scale_invariance(torch.randn(1, 1, 6), "BTC", groups=4)
    assert "cannot run" in df.loc["GroupNorm", "note"]
    assert "cannot run" in df.loc["BatchNorm", "note"]  # one value per channel
    assert df.loc["LayerNorm", "note"] == "only one sample"


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_layernorm_of_x_and_10x_agree_whatever_gamma_and_beta(layout: str) -> None:
    """nn.LayerNorm with random γ, β: LN(10·x) = LN(x) up to ε; γ, β cannot keep the scale."""
    x = generate("channels", layout, SHAPES[layout], 7).double()
    C = x.shape[LAYOUTS[layout].channel_axis]
    rest = () if layout == "BTC" else tuple(x.shape[2:])
    for seed in range(3):
        a = layernorm_scale_with_affine(x, layout, seed=seed)
        g = torch.Generator().manual_seed(seed)
        gamma = 1 + torch.randn(C, generator=g, dtype=torch.float64)
        beta = torch.randn(C, generator=g, dtype=torch.float64)
        ln = nn.LayerNorm((C, *rest)).double()
        with torch.no_grad():
            shape = (C, 1, 1) if rest else (C,)
            ln.weight.copy_(gamma.reshape(shape).expand(C, *rest))
            ln.bias.copy_(beta.reshape(shape).expand(C, *rest))
            d = float((ln(10 * x) - ln(x)).abs().max())
            big = float(ln(x).abs().max())
        assert a.max_abs_diff == pytest.approx(d, rel=1e-6, abs=1e-12)
        assert a.max_abs_out == pytest.approx(big)
        assert d < 1e-4 * big  # only ε tells x from 10·x
        with torch.no_grad():  # and with ε = 0 nothing does
            ln.eps = 0.0
            assert float((ln(10 * x) - ln(x)).abs().max()) < 1e-12 * big
    assert "gone for good" in affine_scale_note(a)
    assert f"**{a.max_abs_diff:.1e}**" in affine_scale_note(a)


def test_the_per_sample_scale_sections_say_gamma_beta_cannot_help() -> None:
    setup = example_setup()
    for sec in (scale_section.SECTION, scale_section.RMS_SECTION):
        text = " ".join(sec.notes(sec.run(setup, {}, no_progress)))
        assert "unless γ and β" not in text
        assert "cannot bring it back" in text or "gone for good" in text


def test_layernorm_forgets_the_per_sample_scale() -> None:
    x = generate("sample_scale", "BTC", (5, 6, 8), 0)
    y = torch_norm(x, "layer", "BTC")
    df = sample_rms(x, y, "BTC")
    assert df["RMS before"].iloc[-1] / df["RMS before"].iloc[0] == pytest.approx(100, rel=1e-4)
    np.testing.assert_allclose(df["RMS after"], 1.0, atol=1e-3)  # ε: σ²/(σ² + ε)
    np.testing.assert_allclose(y[0].numpy(), y[-1].numpy(), atol=1e-3)  # same output, up to ε


# ---- downloads -----------------------------------------------------------------------


def test_downloads_round_trip() -> None:
    y = torch.randn(2, 3, 4)
    np.testing.assert_array_equal(load_tensor(npy_bytes(y), "out.npy").numpy(), y.numpy())
    x = generate("normal", "BTC", (2, 3, 4), 0)
    tab = group_table(x, con(x, "layer", "BTC"))
    back = pd.read_csv(io.BytesIO(csv_bytes(tab.table)))
    assert list(back.columns) == list(tab.table.columns)
    np.testing.assert_allclose(back["variance after"], tab.table["variance after"])


@pytest.mark.parametrize("layout", ["BTC", "NCHW"])
def test_feature_dims_batchnorm_note_follows_torch(layout: str) -> None:
    """Issue 24 items 10 and 21: BatchNorm's per-channel γ (and β) can restore the outliers'
    size (numbers from nn.BatchNorm); an all-equal range is not printed "1.00 and 1.00"."""
    import re

    from normviz.distributions import feature_dims as fd

    shape = (8, 6, 16) if layout == "BTC" else (8, 16, 4, 4)
    x = generate("outliers", layout, shape, seed=1).double()
    res = fd.feature_dims(x.numpy(), layout)
    assert "batch" not in res.refused
    note = next(n for n in fd.notes(res) if n.startswith("**BatchNorm**"))
    d = res.found.top[0]
    # torch: BatchNorm with γ_c = √(σ_c² + ε) (and β_c = μ_c), in training mode
    xt = x.transpose(1, 2) if layout == "BTC" else x
    dims = [0, 2] if layout == "BTC" else [0, 2, 3]
    mu, var = xt.mean(dims), xt.var(dims, unbiased=False)
    C = shape[LAYOUTS[layout].channel_axis]
    bn = (nn.BatchNorm1d if layout == "BTC" else nn.BatchNorm2d)(C).double()
    ratios = []
    for beta in (torch.zeros_like(mu), mu):
        with torch.no_grad():
            bn.weight.copy_((var + 1e-5).sqrt())
            bn.bias.copy_(beta)
            y = bn.train()(xt)
        rms = y.transpose(0, 1).reshape(y.shape[1], -1).square().mean(1).sqrt()
        ratios.append(float(rms[d]) / float(np.median(rms.numpy())))  # against the median
    said = re.search(r"returns to (\d+)× the median; .* to (\d+)×", note)
    assert said, note
    assert [int(v) for v in said.groups()] == [round(r) for r in ratios]
    assert "γ" in note and "per channel" in note
    assert not re.search(r"between (\S+) and \1\b", note), note


@pytest.mark.parametrize("data", ["outliers", "channels"])
def test_the_gamma_turn_claim_follows_the_chart(data: str) -> None:
    """Issue 24 item 16: on step 4's data (outliers, the default shape) the random-γ bars
    sit on the γ = 1 bar (smallest cosine 0.9991): the note must not say the chart shows
    a turn. The bars are read off the figure; the cosines come from torch's nn.RMSNorm."""
    from normviz.distributions.setup import Generated, Setup

    src = Generated(data, "BTC", (4, 6, 8), 0)
    setup = Setup(src, contract("layer", "BTC", src.shape), 1e-5, 2, 0)
    res = rms_section.SECTION.run(setup, {}, no_progress)
    x = src.tensor()
    y = torch_norm(x, "rms", "BTC", weight=res.cosine.gamma)
    cos = nn.functional.cosine_similarity(x.reshape(-1, 8).double(), y.reshape(-1, 8).double())
    np.testing.assert_allclose(res.cosine.rms_gamma, cos, atol=1e-5)
    fig = rms_section.SECTION.figure(res, False)
    ys = {t.name: list(t.y) for t in fig.data}
    apart = ys["RMSNorm, γ = 1"] != ys["RMSNorm, random γ"]
    note = rms_section.SECTION.notes(res)[0]
    assert f"**{float(cos.min()):.4f}**" in note
    assert ("sit apart" in note) == apart and ("sit on the γ = 1 bar" in note) == (not apart)
    assert apart == (data == "channels")  # the two cases this test is about
    assert "third histogram" not in rms_section.INTRO and "third series" in rms_section.INTRO
