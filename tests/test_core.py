"""normalize(), group_ids(), identify() against torch.nn: the oracle for every number."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

import normviz
import normviz.data
from normviz import METHODS, STANDARD_METHODS, NormConfigError, reference, style
from normviz.methods import LISTS


def torch_reference(
    method: str,
    layout: str,
    x: torch.Tensor,
    groups: int | None,
    eps: float,
    w: torch.Tensor | None,
    b: torch.Tensor | None,
) -> torch.Tensor:
    """What a user writes with torch.nn, written out here independently of the registry."""
    C = x.shape[2] if layout == "BTC" else x.shape[1]
    dt = x.dtype
    chw = tuple(x.shape[1:])  # (C, H, W) for NCHW
    if layout == "BTC":
        mods = {
            "batch": (nn.BatchNorm1d(C, eps=eps), True),
            "layer": (nn.LayerNorm(C, eps=eps), False),
            "instance": (nn.InstanceNorm1d(C, eps=eps, affine=True), True),
            "group": (nn.GroupNorm(groups or 1, C, eps=eps), True),
            "rms": (nn.RMSNorm(C, eps=eps), False),
        }
    else:
        mods = {
            "batch": (nn.BatchNorm2d(C, eps=eps), False),
            "layer": (nn.LayerNorm(chw, eps=eps), False),
            "instance": (nn.InstanceNorm2d(C, eps=eps, affine=True), False),
            "group": (nn.GroupNorm(groups or 1, C, eps=eps), False),
            "rms": (nn.RMSNorm(chw, eps=eps), False),
        }
    mod, transpose = mods[method]
    mod = mod.to(dt)
    with torch.no_grad():
        if w is not None or b is not None:
            wt = w if w is not None else torch.ones(C, dtype=dt)
            bt = b if b is not None else torch.zeros(C, dtype=dt)
            if layout == "NCHW" and method in ("layer", "rms"):  # (C,H,W) parameters
                wt = wt[:, None, None].expand(chw)
                bt = bt[:, None, None].expand(chw)
            mod.weight.copy_(wt)
            if getattr(mod, "bias", None) is not None:
                mod.bias.copy_(bt)
            elif b is not None:
                raise AssertionError("RMSNorm has no bias")
        if transpose:
            return mod(x.transpose(1, 2)).transpose(1, 2)
        return mod(x)


def reduce_dims(method: str, layout: str) -> tuple[int, ...]:
    """The method table of docs/architecture.md (Public API), stated independently
    (GroupNorm handled apart)."""
    table = {
        ("batch", "BTC"): (0, 1),
        ("layer", "BTC"): (2,),
        ("instance", "BTC"): (1,),
        ("rms", "BTC"): (2,),
        ("batch", "NCHW"): (0, 2, 3),
        ("layer", "NCHW"): (1, 2, 3),
        ("instance", "NCHW"): (2, 3),
        ("rms", "NCHW"): (1, 2, 3),
    }
    return table[(method, layout)]


SHAPES = {
    "BTC": [(4, 6, 8), (1, 5, 6), (3, 1, 4), (2, 3, 1), (1, 2, 2), (7, 13, 12)],
    "NCHW": [(4, 6, 3, 5), (1, 4, 2, 2), (3, 2, 1, 1), (2, 1, 3, 3), (1, 6, 1, 5), (5, 12, 7, 9)],
}


def _groups_for(C: int) -> list[int]:
    return sorted({1, C, *[g for g in (2, 3, 4) if C % g == 0]})


def _cases():
    for layout, shapes in SHAPES.items():
        for shape in shapes:
            for method in STANDARD_METHODS:
                C = shape[2] if layout == "BTC" else shape[1]
                for g in _groups_for(C) if method == "group" else [None]:
                    yield method, layout, shape, g


def _input(shape: tuple[int, ...], layout: str, dtype=torch.float32, seed: int = 0):
    return normviz.data.generate("channels", layout, shape, seed).to(dtype)


def _torch_refuses(method: str, layout: str, x: torch.Tensor, g: int | None) -> bool:
    try:
        torch_reference(method, layout, x, g, 1e-5, None, None)
    except ValueError:
        return True
    return False


@pytest.mark.parametrize(("method", "layout", "shape", "groups"), list(_cases()))
def test_output_matches_torch(method: str, layout: str, shape, groups) -> None:
    x = _input(shape, layout)
    if _torch_refuses(method, layout, x, groups):
        with pytest.raises(NormConfigError, match="more than 1"):
            normviz.normalize(x, method, layout, groups=groups)
        return
    C = shape[2] if layout == "BTC" else shape[1]
    gen = torch.Generator().manual_seed(1)
    w = torch.rand(C, generator=gen) + 0.5
    b = None if method == "rms" else torch.randn(C, generator=gen)
    # one value per group: torch's GroupNorm kernel leaves rounding noise of about
    # |x|·ulp/sqrt(ε) where the exact answer (ours) is 0
    single = normviz.contract(method, layout, shape, groups).group_size == 1
    atol = 3e-4 if single else 3e-5
    for wt, bt in ((None, None), (w, b)):
        res = normviz.normalize(x, method, layout, groups=groups, weight=wt, bias=bt)
        ref = torch_reference(method, layout, x, groups, 1e-5, wt, bt)
        torch.testing.assert_close(res.output, ref, atol=atol, rtol=1e-5)
        assert res.output.shape == x.shape and res.output.dtype == x.dtype


@pytest.mark.parametrize(("method", "layout", "shape", "groups"), list(_cases()))
def test_statistics_match_torch(method: str, layout: str, shape, groups) -> None:
    x = _input(shape, layout, torch.float64)
    if _torch_refuses(method, layout, x, groups):
        return  # covered by test_output_matches_torch
    res = normviz.normalize(x, method, layout, groups=groups)
    if method == "group":
        c = 2 if layout == "BTC" else 1
        xc = x.movedim(c, 1)  # (B, C, ...)
        xg = xc.reshape(xc.shape[0], groups, -1)
        mean = xg.mean(-1)
        var = xg.var(-1, unbiased=False)
        # broadcast back per channel: (B, G) -> (B, C) -> keepdim in x's layout
        Cg = xc.shape[1] // groups
        mean_c = mean.repeat_interleave(Cg, 1)
        var_c = var.repeat_interleave(Cg, 1)
        shape_k = [x.shape[0]] + [1] * (x.dim() - 1)
        shape_k[c] = xc.shape[1]
        full = x.shape  # keepdim statistics, compared as broadcast to x
        torch.testing.assert_close(res.mean.expand(full), mean_c.reshape(shape_k).expand(full))
        torch.testing.assert_close(res.var.expand(full), var_c.reshape(shape_k).expand(full))
        return
    dims = reduce_dims(method, layout)
    assert res.axes == tuple(normviz.LAYOUTS[layout].axes[d] for d in dims)
    if method == "rms":
        assert res.mean is None
        torch.testing.assert_close(res.var, x.pow(2).mean(dims, keepdim=True))
    else:
        torch.testing.assert_close(res.mean, x.mean(dims, keepdim=True))
        torch.testing.assert_close(res.var, x.var(dims, unbiased=False, keepdim=True))
        # the stats reproduce the output
        y = (x - res.mean) / torch.sqrt(res.var + 1e-5)
        torch.testing.assert_close(res.output, y)


# ---- the reference (normviz.reference) and exact statistics ------------------------


@pytest.mark.parametrize(("method", "layout", "shape", "groups"), list(_cases()))
def test_the_reference_matches_torch_and_normalize(method: str, layout: str, shape, groups):
    """normviz.reference, the formula written out, agrees with torch.nn; normalize()
    agrees with it in output, μ and σ² (two oracles, each checked against the other)."""
    x = _input(shape, layout, torch.float64)
    if _torch_refuses(method, layout, x, groups):
        return  # covered by test_output_matches_torch
    C = shape[normviz.LAYOUTS[layout].channel_axis]
    gen = torch.Generator().manual_seed(2)
    w = torch.rand(C, generator=gen, dtype=torch.float64) + 0.5
    b = None if method == "rms" else torch.randn(C, generator=gen, dtype=torch.float64)
    y, mean, var = reference.normalize(x, method, layout, groups=groups, weight=w, bias=b)
    torch.testing.assert_close(y, torch_reference(method, layout, x, groups, 1e-5, w, b))
    res = normviz.normalize(x, method, layout, groups=groups, weight=w, bias=b)
    torch.testing.assert_close(res.output, y)
    torch.testing.assert_close(res.var.expand(shape), var)
    assert (res.mean is None) == (mean is None) == (method == "rms")
    if mean is not None:
        torch.testing.assert_close(res.mean.expand(shape), mean)


def _near_constant(layout: str, level: float, seed: int) -> torch.Tensor:
    """float32 values level + 3e-5·noise: every group's σ² is about 1e-9, far below ε."""
    shape = (4, 6, 8) if layout == "BTC" else (4, 6, 3, 4)
    gen = torch.Generator().manual_seed(seed)
    return level + 3e-5 * torch.randn(shape, generator=gen)


NEAR_CONSTANT = [
    (method, layout, level)
    for method in (*STANDARD_METHODS, "custom")
    for layout in ("BTC", "NCHW")
    for level in (0.0, 1.0, -3.0)
]


@pytest.mark.parametrize(("method", "layout", "level"), NEAR_CONSTANT)
def test_displayed_var_is_exact_on_near_constant_groups(method, layout, level) -> None:
    """σ² ≈ 1e-9 with ε = 1e-5: res.var and res.mean agree with a float64 reference on
    the same float32 values to 1e-6 relative (1/rstd² − ε from a fused kernel: ~3e-3)."""
    x = _near_constant(layout, level, seed=len(method))
    kw = {"groups": 2} if method == "group" else {}
    kw |= {"axes": ("T",) if layout == "BTC" else ("N", "W")} if method == "custom" else {}
    y64, mean64, var64 = reference.normalize(x, method, layout, **kw)
    res = normviz.normalize(x, method, layout, **kw)
    assert res.var.dtype == torch.float32
    # the case this test is about (RMSNorm's σ² is the mean square: tiny at level 0 only)
    assert float(var64.max()) < 1e-8 or (method == "rms" and level != 0)
    rel = ((res.var.double().expand(x.shape) - var64).abs() / var64).max()
    assert rel <= 1e-6, f"σ² off by {float(rel):.1e} relative"
    if mean64 is not None:
        torch.testing.assert_close(res.mean.double().expand(x.shape), mean64, atol=1e-9, rtol=1e-7)
    torch.testing.assert_close(res.output.double(), y64, atol=2e-4, rtol=1e-4)


def test_rebuilding_var_from_the_kernels_rstd_would_lose_digits() -> None:
    """Why the statistics are not taken from torch's fused kernel: its 1/sqrt(σ² + ε),
    squared back, misses σ² ≈ 1e-9 by far more than 1e-6 (what the test above would see)."""
    x = _near_constant("BTC", 1.0, seed=0)
    _, _, rstd = torch.native_layer_norm(x.reshape(-1, 8), [8], None, None, 1e-5)
    rebuilt = rstd.double().reciprocal().square() - 1e-5
    exact = x.reshape(-1, 8).double().var(-1, unbiased=False, keepdim=True)
    assert ((rebuilt - exact).abs() / exact).max() > 1e-4


def test_statistics_are_read_from_the_input_as_it_was() -> None:
    """μ and σ² are computed when first read: changing x in place before that is refused
    with a message, after that it changes nothing."""
    x = _input((3, 4, 5), "BTC")
    res = normviz.normalize(x, "layer", "BTC")
    x.add_(1.0)
    with pytest.raises(RuntimeError, match="changed in place after normalize"):
        _ = res.var
    x = _input((3, 4, 5), "BTC")
    res = normviz.normalize(x, "layer", "BTC")
    mean, var = res.mean.clone(), res.var.clone()
    x.mul_(2.0)
    assert torch.equal(res.var, var) and torch.equal(res.mean, mean)
    torch.testing.assert_close(var, (x / 2).var(-1, unbiased=False, keepdim=True))


def test_the_result_keeps_the_public_api() -> None:
    """The public API (docs/architecture.md): output, mean (None for rms), var, axes; frozen."""
    import dataclasses

    x = _input((2, 3, 4), "BTC")
    res = normviz.normalize(x, "batch", "BTC")
    assert res.output.shape == x.shape and res.axes == ("B", "T")
    assert res.mean.shape == res.var.shape == (1, 1, 4)
    assert normviz.normalize(x, "rms", "BTC").mean is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.output = x  # type: ignore[misc]


def test_float64_and_numpy_inputs() -> None:
    x = np.random.default_rng(0).normal(size=(3, 5, 4))
    res = normviz.normalize(x, "layer", "BTC")
    assert res.output.dtype == torch.float64
    ref = torch_reference("layer", "BTC", torch.from_numpy(x), None, 1e-5, None, None)
    torch.testing.assert_close(res.output, ref)
    res32 = normviz.normalize(x.astype(np.float32), "batch", "BTC")
    assert res32.output.dtype == torch.float32
    ints = np.arange(24).reshape(2, 3, 4)
    assert normviz.normalize(ints, "layer", "BTC").output.dtype == torch.float32


def test_eps_is_used_and_rms_defaults_to_1e_5() -> None:
    x = torch.zeros(2, 3, 4)
    x[..., 0] = 1e-3
    for eps in (0.0, 1e-5, 1e-1):
        res = normviz.normalize(x, "rms", "BTC", eps=eps)
        ref = torch_reference("rms", "BTC", x, None, eps, None, None)
        torch.testing.assert_close(res.output, ref)
    d = normviz.normalize(x, "rms", "BTC").output
    torch.testing.assert_close(d, torch_reference("rms", "BTC", x, None, 1e-5, None, None))


def test_constant_groups_with_zero_eps_give_nan_like_torch() -> None:
    x = torch.ones(2, 3, 4)
    res = normviz.normalize(x, "layer", "BTC", eps=0.0)
    ref = nn.LayerNorm(4, eps=0.0)(x)
    assert torch.isnan(res.output).all() == torch.isnan(ref).all()
    assert (res.var == 0).all()


# ---- custom axes ----------------------------------------------------------------


def _all_subsets(axes: tuple[str, ...]):
    for r in range(1, len(axes) + 1):
        for mask in range(2 ** len(axes)):
            sub = tuple(a for i, a in enumerate(axes) if mask >> i & 1)
            if len(sub) == r:
                yield sub


@pytest.mark.parametrize("layout", ["BTC", "NCHW"])
def test_custom_axes_match_direct_reduction_and_named_methods(layout: str) -> None:
    lay = normviz.LAYOUTS[layout]
    shape = (3, 4, 5) if layout == "BTC" else (3, 4, 2, 5)
    x = _input(shape, layout, torch.float64)
    for sub in _all_subsets(lay.axes):
        dims = tuple(lay.axes.index(a) for a in sub)
        for centred in (True, False):
            res = normviz.normalize(x, "custom", layout, axes=",".join(sub), centred=centred)
            if centred:
                mean = x.mean(dims, keepdim=True)
                var = x.var(dims, unbiased=False, keepdim=True)
                y = (x - mean) / torch.sqrt(var + 1e-5)
            else:
                var = x.pow(2).mean(dims, keepdim=True)
                y = x / torch.sqrt(var + 1e-5)
            torch.testing.assert_close(res.output, y)
            torch.testing.assert_close(res.var, var)
            assert res.axes == sub
        named = normviz.identify(layout, sub)
        if named is not None:
            a = normviz.normalize(x, "custom", layout, axes=list(reversed(sub)))
            b = normviz.normalize(x, named, layout)
            torch.testing.assert_close(a.output, b.output)
            assert METHODS[named].reduces[layout] == sub


def test_identify() -> None:
    assert normviz.identify("BTC", ("T", "B")) == "batch"
    assert normviz.identify("BTC", "C") == "layer"  # layer wins over rms
    assert normviz.identify("BTC", ["T"]) == "instance"
    assert normviz.identify("NCHW", "W,H,C") == "layer"
    assert normviz.identify("NCHW", "H,W") == "instance"
    assert normviz.identify("NCHW", "N,H,W") == "batch"
    assert normviz.identify("NCHW", "C") is None  # channels-last LayerNorm: no standard layer
    assert normviz.identify("BTC", "B,T,C") is None
    with pytest.raises(NormConfigError, match="unknown axis 'H'"):
        normviz.identify("BTC", "H")


# ---- group_ids ----------------------------------------------------------------------


@pytest.mark.parametrize(("method", "layout", "shape", "groups"), list(_cases()))
def test_group_ids_partition(method: str, layout: str, shape, groups) -> None:
    ids = normviz.group_ids(method, layout, shape, groups=groups)
    assert ids.shape == shape
    con = normviz.contract(method, layout, shape, groups)
    counts = np.bincount(ids.ravel())
    assert len(counts) == con.n_stats and set(counts) == {con.group_size}
    # membership: each id's elements give exactly the statistic normalize() reports
    x = _input(shape, layout, torch.float64)
    if _torch_refuses(method, layout, x, groups):
        return
    res = normviz.normalize(x, method, layout, groups=groups)
    var_full = res.var.expand(shape).numpy()
    xs = x.numpy()
    for i in range(min(con.n_stats, 6)):
        vals = xs[ids == i]
        expect = (vals**2).mean() if method == "rms" else vals.var()
        assert np.allclose(var_full[ids == i], expect)


def test_group_ids_examples() -> None:
    ids = normviz.group_ids("group", "NCHW", (2, 6, 1, 1), groups=3)[:, :, 0, 0]
    assert ids.tolist() == [[0, 0, 1, 1, 2, 2], [3, 3, 4, 4, 5, 5]]
    ids = normviz.group_ids("batch", "BTC", (2, 2, 3))
    assert (ids == np.array([0, 1, 2])).all()
    ids = normviz.group_ids("custom", "BTC", (2, 3, 2), axes="B")
    assert ids.max() == 5 and (ids[0] == ids[1]).all()


# ---- errors --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "pattern"),
    [
        (
            lambda: normviz.normalize(torch.randn(2, 3, 6), "group", "BTC", groups=4),
            r"C divisible by groups: C=6, groups=4",
        ),
        (
            lambda: normviz.normalize(torch.randn(1, 1, 4), "batch", "BTC"),
            r"BatchNorm in training needs more than 1 value per channel: B·T = 1",
        ),
        (
            lambda: normviz.normalize(torch.randn(1, 3, 1, 1), "batch", "NCHW"),
            r"more than 1 value per channel: N·H·W = 1",
        ),
        (
            lambda: normviz.normalize(torch.randn(2, 1, 4), "instance", "BTC"),
            r"InstanceNorm needs more than 1 value per instance: T = 1",
        ),
        (
            lambda: normviz.normalize(torch.randn(2, 3, 4), "whiten", "BTC"),
            r"unknown method 'whiten'",
        ),
        (
            lambda: normviz.normalize(torch.randn(2, 3, 4), "batch", "NHWC"),
            r"unknown layout 'NHWC'",
        ),
        (
            lambda: normviz.normalize(torch.randn(2, 3, 4), "custom", "BTC", axes="B,Q"),
            r"unknown axis 'Q'",
        ),
        (
            lambda: normviz.normalize(torch.randn(2, 3, 4), "custom", "BTC", axes=""),
            r"at least one axis",
        ),
        (
            lambda: normviz.normalize(torch.randn(2, 3), "layer", "BTC"),
            r"3-D tensor \(B, T, C\); got shape \(2, 3\) \(2-D\)",
        ),
        (lambda: normviz.normalize(torch.randn(2, 0, 4), "layer", "BTC"), r"axis T has size 0"),
        (
            lambda: normviz.normalize(torch.randn(2, 3, 4), "layer", "BTC", eps=-1e-3),
            r"eps must be a finite number ≥ 0, got -0.001",
        ),
        (
            lambda: normviz.normalize(torch.randn(2, 3, 4), "layer", "BTC", eps=float("nan")),
            r"eps must be",
        ),
        (
            lambda: normviz.normalize(torch.randn(2, 3, 4), "layer", "BTC", weight=torch.ones(3)),
            r"weight \(γ\) must have shape \(C,\) = \(4,\).*got \(3,\)",
        ),
        (
            lambda: normviz.normalize(torch.randn(2, 3, 4), "batch", "BTC", bias=torch.ones(4, 1)),
            r"bias \(β\) must have shape",
        ),
        (
            lambda: normviz.normalize(torch.randn(2, 3, 4), "group", "BTC"),
            r"GroupNorm needs a number of groups",
        ),
        (
            lambda: normviz.normalize(torch.randn(2, 3, 4), "layer", "BTC", groups=2),
            r"groups= only applies to GroupNorm",
        ),
        (
            lambda: normviz.normalize(torch.randn(2, 3, 4), "layer", "BTC", axes="C"),
            r"axes= goes with method='custom'",
        ),
        (lambda: normviz.normalize(np.array(["a"]), "layer", "BTC"), r"real numbers"),
        (
            lambda: normviz.normalize(
                torch.randn(2, 3, 4), "layer", "BTC", running=normviz.RunningStats(4)
            ),
            r"running statistics hold one value per channel",
        ),
        (
            lambda: normviz.normalize(
                torch.randn(2, 3, 4), "batch", "BTC", running=normviz.RunningStats(5)
            ),
            r"5 channels but x has C=4",
        ),
        (
            lambda: normviz.normalize(
                torch.randn(2, 3, 4),
                "custom",
                "BTC",
                axes="B,T",
                centred=False,
                running=normviz.RunningStats(4),
            ),
            r"running statistics hold a mean and a variance; this contract is not centred",
        ),
        (lambda: normviz.RunningStats(4, momentum=1.5), r"momentum must be between 0 and 1"),
        (lambda: normviz.RunningStats(4, convention="tf"), r"unknown convention 'tf'"),
    ],
)
def test_errors_are_actionable(call, pattern: str) -> None:
    with pytest.raises(NormConfigError, match=pattern):
        call()
    assert issubclass(NormConfigError, ValueError)


def test_eval_with_one_value_per_channel_works() -> None:
    """torch refuses to *train* BatchNorm on one value per channel; evaluation is fine."""
    rs = normviz.RunningStats(4)
    x = torch.randn(1, 1, 4)
    res = normviz.normalize(x, "batch", "BTC", training=False, running=rs)
    bn = nn.BatchNorm1d(4).eval()
    torch.testing.assert_close(res.output, bn(x.transpose(1, 2)).transpose(1, 2))


# ---- running statistics --------------------------------------------------------------


@pytest.mark.parametrize("momentum", [0.1, 0.5, 1.0, None])
@pytest.mark.parametrize("layout", ["BTC", "NCHW"])
def test_running_stats_stream_matches_batchnorm(momentum, layout: str) -> None:
    C = 5
    shape = (6, 7, C) if layout == "BTC" else (6, C, 3, 4)
    bn = (nn.BatchNorm1d if layout == "BTC" else nn.BatchNorm2d)(C, momentum=momentum)
    rs = normviz.RunningStats(C, momentum=momentum)
    to_torch = (lambda t: t.transpose(1, 2)) if layout == "BTC" else (lambda t: t)
    for step in range(12):
        x = _input(shape, layout, seed=step) * (1 + step / 4) + step
        ours = normviz.normalize(x, "batch", layout, running=rs, training=True)
        theirs = bn.train()(to_torch(x))
        torch.testing.assert_close(ours.output, to_torch(theirs), atol=3e-5, rtol=1e-5)
        torch.testing.assert_close(rs.mean, bn.running_mean, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(rs.var, bn.running_var, atol=1e-5, rtol=1e-5)
        assert rs.num_batches_tracked == int(bn.num_batches_tracked)
    x = _input(shape, layout, seed=99) * 3 - 1
    ours = normviz.normalize(x, "batch", layout, running=rs, training=False)
    with torch.no_grad():
        theirs = bn.eval()(to_torch(x))
    torch.testing.assert_close(ours.output, to_torch(theirs), atol=3e-5, rtol=1e-5)
    assert ours.mean.flatten().tolist() == pytest.approx(rs.mean.tolist())
    assert rs.num_batches_tracked == 12  # evaluation does not count


def test_eval_without_running_uses_batch_stats_like_torch() -> None:
    x = _input((4, 5, 3), "BTC")
    bn = nn.BatchNorm1d(3, track_running_stats=False).eval()
    res = normviz.normalize(x, "batch", "BTC", training=False)
    torch.testing.assert_close(res.output, bn(x.transpose(1, 2)).transpose(1, 2))


def test_keras_convention() -> None:
    """Keras 3: new = m·old + (1 − m)·batch, with the biased batch variance."""
    rs = normviz.RunningStats(3, momentum=0.9, convention="keras")
    mean, var = torch.zeros(3), torch.ones(3)
    for step in range(5):
        x = _input((4, 5, 3), "BTC", seed=step) + step
        normviz.normalize(x, "batch", "BTC", running=rs)
        bm = x.mean((0, 1))
        bv = x.var((0, 1), unbiased=False)
        mean = 0.9 * mean + 0.1 * bm
        var = 0.9 * var + 0.1 * bv
        torch.testing.assert_close(rs.mean, mean)
        torch.testing.assert_close(rs.var, var)
    # PyTorch m = 0.1 traces the same mean as Keras momentum = 0.9
    pt = normviz.RunningStats(3, momentum=0.1)
    for step in range(5):
        normviz.normalize(_input((4, 5, 3), "BTC", seed=step) + step, "batch", "BTC", running=pt)
    torch.testing.assert_close(pt.mean, rs.mean)
    assert not torch.allclose(pt.var, rs.var)  # Bessel's correction differs


# ---- property-based --------------------------------------------------------------


@st.composite
def configs(draw):
    layout = draw(st.sampled_from(["BTC", "NCHW"]))
    shape = tuple(draw(st.integers(1, 5)) for _ in normviz.LAYOUTS[layout].axes)
    method = draw(st.sampled_from(STANDARD_METHODS))
    C = shape[normviz.LAYOUTS[layout].channel_axis]
    groups = (
        draw(st.sampled_from([g for g in range(1, C + 1) if C % g == 0]))
        if method == "group"
        else None
    )
    eps = draw(st.sampled_from([1e-5, 1e-3, 0.5]))
    affine = draw(st.booleans())
    seed = draw(st.integers(0, 2**16))
    return layout, shape, method, groups, eps, affine, seed


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs())
def test_random_shapes_match_torch(cfg) -> None:
    layout, shape, method, groups, eps, affine, seed = cfg
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=gen, dtype=torch.float64) * 2 + 1
    C = shape[normviz.LAYOUTS[layout].channel_axis]
    w = torch.rand(C, generator=gen, dtype=torch.float64) + 0.5 if affine else None
    b = torch.randn(C, generator=gen, dtype=torch.float64) if affine and method != "rms" else None
    try:
        ref = torch_reference(method, layout, x, groups, eps, w, b)
    except ValueError:
        with pytest.raises(NormConfigError):
            normviz.normalize(x, method, layout, groups=groups, eps=eps, weight=w, bias=b)
        return
    res = normviz.normalize(x, method, layout, groups=groups, eps=eps, weight=w, bias=b)
    torch.testing.assert_close(res.output, ref, atol=1e-10, rtol=1e-9)
    con = res.contract
    assert con.n_stats * con.group_size == math.prod(shape)


def test_gradients_flow_like_torch() -> None:
    x = _input((3, 4, 6), "BTC", torch.float64).requires_grad_()
    y = normviz.normalize(x, "group", "BTC", groups=3).output
    (y * torch.arange(6.0, dtype=torch.float64)).sum().backward()
    x2 = x.detach().clone().requires_grad_()
    ref = nn.GroupNorm(3, 6).double()(x2.transpose(1, 2)).transpose(1, 2)
    (ref * torch.arange(6.0, dtype=torch.float64)).sum().backward()
    torch.testing.assert_close(x.grad, x2.grad)


def test_registry_has_every_method_once() -> None:
    assert set(STANDARD_METHODS) == {"batch", "layer", "instance", "group", "rms"}
    assert set(METHODS) == {*STANDARD_METHODS, "dyt", "custom"}
    assert {k for k, m in METHODS.items() if m.kind == "elementwise"} == {"dyt"}
    for k in (*STANDARD_METHODS, "dyt"):
        m = METHODS[k]
        assert m.label and m.summary and set(m.torch) == {"BTC", "NCHW"}
        assert m.colour in style.PALETTE and m.lists <= set(LISTS)
    colours = [m.colour for m in METHODS.values()]
    assert len(set(colours)) == len(colours)  # every method its own colour


def test_a_method_without_a_contract_is_refused_with_a_message() -> None:
    with pytest.raises(NormConfigError, match="DyT has no axis contract"):
        normviz.contract("dyt", "BTC", (2, 3, 4))
    with pytest.raises(NormConfigError, match="DyT has no axis contract"):
        normviz.normalize(torch.randn(2, 3, 4), "dyt", "BTC")
    with pytest.raises(NormConfigError, match="unknown method"):
        normviz.contract("dyt2", "BTC", (2, 3, 4))


@pytest.mark.parametrize("layout", ["BTC", "NCHW"])
@pytest.mark.parametrize("method", STANDARD_METHODS)
def test_every_factory_is_the_torch_module_normalize_matches(method: str, layout: str) -> None:
    """The registry's factory builds the torch module whose output normalize() reproduces."""
    shape = (3, 5, 8) if layout == "BTC" else (3, 8, 4, 4)
    x = torch.randn(shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    m = METHODS[method]
    g = 2 if m.grouped else None
    mod = m.build(layout, shape, g).double()
    assert m.torch_text(layout, shape, g).startswith(m.torch[layout].spelled + "(")
    with torch.no_grad():
        want = m.apply(x, layout, module=mod)
    got = normviz.normalize(x, method, layout, groups=g).output
    torch.testing.assert_close(got, want)
