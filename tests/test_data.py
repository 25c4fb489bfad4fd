"""normviz.data: every generator is seeded, works in both layouts, and has its property."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from normviz import LAYOUTS, STANDARD_METHODS, group_ids
from normviz.data import (
    DEFAULT_GENERATOR,
    GENERATORS,
    generate,
    n_outlier_channels,
    sample_scales,
)

SHAPES = {"BTC": (3, 5, 8), "NCHW": (2, 6, 5, 4)}


def test_registry_has_the_issue_generators() -> None:
    assert DEFAULT_GENERATOR == "channels"
    assert {"channels", "normal", "heavy", "outliers", "sample_scale", "smooth", "constant"} <= set(
        GENERATORS
    )
    for g in GENERATORS.values():
        assert g.label and g.description and "\n" not in g.description
        assert g.layouts == ("BTC", "NCHW")


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("name", list(GENERATORS))
def test_seeded_and_shaped(name: str, layout: str) -> None:
    shape = SHAPES[layout]
    a = generate(name, layout, shape, seed=3)
    b = generate(name, layout, shape, seed=3)
    c = generate(name, layout, shape, seed=4)
    assert a.shape == shape and a.dtype == torch.float32
    assert torch.equal(a, b)
    assert not torch.equal(a, c)
    assert torch.isfinite(a).all()


@pytest.mark.parametrize("name", list(GENERATORS))
def test_tiny_shapes(name: str) -> None:
    for layout, shape in (("BTC", (1, 1, 1)), ("NCHW", (1, 1, 1, 1)), ("BTC", (2, 1, 3))):
        assert generate(name, layout, shape, 0).shape == shape


def test_unknown_generator() -> None:
    with pytest.raises(ValueError, match="unknown data generator 'nope'"):
        generate("nope", "BTC", (2, 2, 2))


def _per_channel(x: torch.Tensor, layout: str) -> torch.Tensor:
    """(C, everything else): each row one channel's values."""
    c = LAYOUTS[layout].channel_axis
    return x.movedim(c, 0).reshape(x.shape[c], -1).double()


def test_normal_is_standard() -> None:
    x = generate("normal", "NCHW", (8, 8, 32, 32), 0).double()
    assert abs(float(x.mean())) < 0.01 and abs(float(x.std()) - 1) < 0.01


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_channels_differ_in_mean_and_spread(layout: str) -> None:
    shape = (64, 256, 16) if layout == "BTC" else (32, 16, 16, 16)
    rows = _per_channel(generate("channels", layout, shape, 1), layout)
    means, stds = rows.mean(1), rows.std(1)
    assert (means.abs() < 3.1).all() and float(means.max() - means.min()) > 1.5
    assert (stds > 0.28).all() and (stds < 3.1).all() and float(stds.max() / stds.min()) > 2


def test_heavy_tails() -> None:
    x = generate("heavy", "BTC", (64, 256, 64), 0).double()
    beyond = float((x.abs() > 4).double().mean())
    assert 0.022 < beyond < 0.034  # Student-t(3): 2.8%; a normal: 0.006%
    normal = generate("normal", "BTC", (64, 256, 64), 0)
    assert float((normal.abs() > 4).double().mean()) < 0.001


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("C", [2, 8, 40, 64])
def test_outlier_channels_are_tens_of_times_larger(layout: str, C: int) -> None:
    shape = (4, 32, C) if layout == "BTC" else (4, C, 6, 6)
    rms = _per_channel(generate("outliers", layout, shape, C), layout).square().mean(1).sqrt()
    big = rms > 10 * rms.median()
    assert int(big.sum()) == n_outlier_channels(C)
    assert float(rms[big].min()) > 15 * float(rms[~big].max())


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_sample_scale_is_one_pattern_at_many_volumes(layout: str) -> None:
    shape = (5, 6, 8) if layout == "BTC" else (5, 3, 4, 4)
    x = generate("sample_scale", layout, shape, 2).double()
    s = sample_scales(5)
    assert s[0] == pytest.approx(0.1) and s[-1] == pytest.approx(10.0)
    for b in range(5):
        torch.testing.assert_close(x[b] / s[b], x[0] / s[0], rtol=1e-6, atol=1e-6)
    rms = x.reshape(5, -1).square().mean(1).sqrt()
    assert float(rms[-1] / rms[0]) == pytest.approx(100, rel=1e-5)


def _lag1(x: torch.Tensor, dim: int) -> float:
    """Correlation of neighbours along `dim`, per-channel means removed."""
    a, b = x.narrow(dim, 0, x.shape[dim] - 1), x.narrow(dim, 1, x.shape[dim] - 1)
    return float(torch.corrcoef(torch.stack([a.flatten(), b.flatten()]))[0, 1])


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_smooth_along_positions_not_channels(layout: str) -> None:
    lay = LAYOUTS[layout]
    shape = (4, 48, 16) if layout == "BTC" else (4, 8, 32, 32)
    x = generate("smooth", layout, shape, 0).double()
    x = x - x.mean(dim=[d for d in range(x.ndim) if d != lay.channel_axis], keepdim=True)
    positional = [i for i, a in enumerate(lay.axes) if a not in (lay.channel, lay.sample)]
    for d in positional:  # T for BTC, H and W for NCHW
        assert _lag1(x, d) > 0.8
    assert abs(_lag1(x, lay.channel_axis)) < 0.3
    noise = generate("normal", layout, shape, 0).double()
    assert abs(_lag1(noise, positional[0])) < 0.1


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_constant_gives_every_method_a_zero_variance_group(layout: str) -> None:
    lay = LAYOUTS[layout]
    shape = tuple(lay.defaults[a] for a in lay.axes)
    x = generate("constant", layout, shape, 0).double().numpy()
    for method in STANDARD_METHODS:
        groups = 2 if method == "group" else None
        ids = group_ids(method, layout, shape, groups=groups).ravel()
        n = np.bincount(ids)
        mean = np.bincount(ids, x.ravel()) / n
        var = np.bincount(ids, (x.ravel() - mean[ids]) ** 2) / n
        assert (var == 0).any(), method


def test_constant_is_why_eps_exists() -> None:
    """torch's own LayerNorm with ε = 0 turns the blank sample into NaN; ε = 1e-5 does not."""
    x = generate("constant", "BTC", (3, 4, 8), 0)
    assert torch.isnan(torch.nn.LayerNorm(8, eps=0.0)(x)[-1]).all()
    assert torch.isfinite(torch.nn.LayerNorm(8, eps=1e-5)(x)).all()
    rms = torch.nn.RMSNorm(8, eps=0.0)(x)
    assert torch.isnan(rms[-1]).all() and torch.isfinite(rms[:-1]).all()


@pytest.mark.parametrize(("layout", "C"), [("BTC", 8), ("NCHW", 8), ("BTC", 64), ("BTC", 4)])
def test_the_outliers_caption_says_what_the_generator_draws(layout: str, C: int) -> None:
    """Issue 24 item 15: at C = 8 one channel of 8 (not "one in 16"), and its spread is 5."""
    import re

    from normviz.distributions import input_caption
    from normviz.distributions.setup import Generated

    shape = (64, 32, C) if layout == "BTC" else (16, C, 8, 8)
    x = generate("outliers", layout, shape, seed=3).double()
    c = LAYOUTS[layout].channel_axis
    per = x.movedim(c, 0).reshape(C, -1)
    mean, std = per.mean(1), per.std(1)
    big = mean.abs() > 10
    caption = input_caption(Generated("outliers", layout, shape, 3))
    words = re.search(r"except (one|\d+) of the (\d+) channels", caption)
    assert words, caption
    assert (1 if words.group(1) == "one" else int(words.group(1)), int(words.group(2))) == (
        int(big.sum()),
        C,
    )
    lo, hi, spread = (
        float(v) for v in re.search(r"mean ±(\d+)…(\d+) and spread (\d+)", caption).groups()
    )
    assert ((mean[big].abs() >= lo) & (mean[big].abs() <= hi)).all()
    assert std[big].tolist() == pytest.approx([spread] * int(big.sum()), rel=0.05)
    assert std[~big].tolist() == pytest.approx([1.0] * int((~big).sum()), rel=0.05)
