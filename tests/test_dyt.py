"""Dynamic Tanh: the reference module against its formula and autograd, and its sections.

y = γ ⊙ tanh(α·x) + β (Zhu et al. 2025), α one scalar, γ and β per channel. torch has no
DyT module, so the oracle is the formula written out in torch here, and its gradients
written out by hand against torch.autograd's.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from conftest import assert_clean, assert_no_exception, open_app, run_app

from normviz import METHODS, normalize
from normviz.axes import pointwise
from normviz.distributions import feature_dims, squash
from normviz.distributions.setup import Generated
from normviz.dyt import ALPHA0, DyT
from normviz.elementwise import ElementwiseSetup
from normviz.layouts import LAYOUTS

SHAPES = {"BTC": (3, 5, 6), "NCHW": (3, 6, 2, 4)}


def _along(p: torch.Tensor, layout: str, ndim: int) -> torch.Tensor:
    shape = [1] * ndim
    shape[LAYOUTS[layout].channel_axis] = -1
    return p.reshape(shape)


def _params(layout: str, seed: int = 0) -> tuple[torch.Tensor, DyT]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(SHAPES[layout], generator=g, dtype=torch.float64) * 3
    mod = METHODS["dyt"].build(layout, SHAPES[layout]).double()
    with torch.no_grad():  # non-trivial α, γ, β so every term of the formula counts
        mod.alpha.fill_(0.7)
        mod.weight.copy_(torch.linspace(0.5, 2.0, mod.weight.numel()))
        mod.bias.copy_(torch.linspace(-1.0, 1.0, mod.bias.numel()))
    return x, mod


def test_the_default_is_the_papers() -> None:
    mod = METHODS["dyt"].build("BTC", (2, 3, 4))
    assert isinstance(mod, DyT) and ALPHA0 == 0.5 and float(mod.alpha.detach()) == 0.5
    assert {n: tuple(p.shape) for n, p in mod.named_parameters()} == {
        "alpha": (1,),
        "weight": (4,),
        "bias": (4,),
    }
    assert METHODS["dyt"].param_shapes("NCHW", (2, 4, 3, 3)) == {
        "alpha": (1,),
        "weight": (4,),
        "bias": (4,),
    }


@pytest.mark.parametrize("layout", ["BTC", "NCHW"])
def test_dyt_is_its_formula(layout: str) -> None:
    x, mod = _params(layout)
    w, b = (_along(p.detach(), layout, x.dim()) for p in (mod.weight, mod.bias))
    want = w * torch.tanh(0.7 * x) + b
    with torch.no_grad():
        torch.testing.assert_close(mod(x), want)
        torch.testing.assert_close(METHODS["dyt"].apply(x, layout, module=mod), want)


@pytest.mark.parametrize("layout", ["BTC", "NCHW"])
def test_dyt_gradients_match_autograd(layout: str) -> None:
    """dL/dα, dL/dγ, dL/dβ and dL/dx written out, against torch.autograd on the module."""
    x, mod = _params(layout)
    x.requires_grad_(True)
    up = torch.randn(x.shape, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    (mod(x) * up).sum().backward()
    c = LAYOUTS[layout].channel_axis
    others = [d for d in range(x.dim()) if d != c]
    a, t = 0.7, torch.tanh(0.7 * x.detach())
    w = _along(mod.weight.detach(), layout, x.dim())
    sech2 = 1 - t**2
    torch.testing.assert_close(mod.bias.grad, up.sum(others))
    torch.testing.assert_close(mod.weight.grad, (up * t).sum(others))
    torch.testing.assert_close(mod.alpha.grad, (up * w * sech2 * x.detach()).sum().reshape(1))
    torch.testing.assert_close(x.grad, up * w * a * sech2)


def test_dyt_snippet_runs() -> None:
    """The constructor the app shows builds the module (the code must run)."""
    for layout, shape in SHAPES.items():
        text = METHODS["dyt"].torch_text(layout, shape)
        mod = eval(text, {"DyT": DyT})  # our registry's text, not a user's
        x = torch.randn(shape)
        torch.testing.assert_close(mod(x), METHODS["dyt"].apply(x, layout))


# ---- /axes: nothing pooled --------------------------------------------------------------


@pytest.mark.parametrize("layout", ["BTC", "NCHW"])
def test_moving_one_cell_moves_one_dyt_output_and_a_whole_group_otherwise(layout: str) -> None:
    shape = SHAPES[layout]
    res = pointwise.pooling(
        ElementwiseSetup("dyt", layout, Generated("channels", layout, shape, 0))
    )
    assert res.moved["dyt"] == 1
    # torch as the oracle for the others: the count of outputs a moved cell changes
    x = Generated("channels", layout, shape, 0).tensor().double()
    kicked = x.clone()
    kicked.view(-1)[0] += 100 * (float(x.abs().max()) + 1)
    for m in ("batch", "layer", "rms"):
        a, b = (normalize(t, m, layout).output for t in (x, kicked))
        assert res.moved[m] == int(((a - b).abs() > 1e-9).sum()) == res.group[m]
    text = " ".join(pointwise.notes(res))
    assert f"each of the {res.cells:,} cells" in text and "changed 1 output (its own)" in text
    assert f"LayerNorm {res.moved['layer']:,}" in text and "Why that is the point" in text


def test_every_bar_keeps_its_whole_number_in_view() -> None:
    """The counts stand beyond their bars, unclipped, in a range half a decade past the
    longest bar (plotly's own range cut BatchNorm's "24" to "2" on a phone)."""
    res = pointwise.pooling(
        ElementwiseSetup("dyt", "BTC", Generated("channels", "BTC", (4, 6, 8), 0))
    )
    (bars,) = pointwise.figure(res, False).data
    assert list(bars.text) == [f"{res.moved[k]:,}" for k in res.moved]
    assert bars.textposition == "outside" and bars.cliponaxis is False
    top = max(res.moved.values())
    assert pointwise.figure(res, True).layout.xaxis.range[1] == pytest.approx(math.log10(top) + 0.5)


# ---- /distributions: squashed, not rescaled ------------------------------------------------


def test_squash_numbers_follow_the_formula_on_the_outlier_data() -> None:
    setup = ElementwiseSetup("dyt", "BTC", Generated("outliers", "BTC", (4, 6, 16), 0))
    res = squash.squash(setup)
    x = setup.tensor()
    y = torch.tanh(0.5 * x)
    assert res.alpha == 0.5
    assert res.saturated == pytest.approx(float((0.5 * x).abs().gt(2).float().mean()))
    assert res.max_out == pytest.approx(float(y.abs().max()))
    rms = lambda t: t.reshape(-1, t.shape[-1]).square().mean(0).sqrt()  # noqa: E731
    r_in, r_out = rms(x), rms(y)
    d = int(r_in.argmax())
    assert res.channel == d
    med = lambda r: float(np.median(r.numpy()))  # noqa: E731  (the mean of the middle two)
    assert res.ratio_in == pytest.approx(float(r_in[d]) / med(r_in), rel=1e-4)
    assert res.ratio_out == pytest.approx(float(r_out[d]) / med(r_out), rel=1e-4)
    assert res.ratio_out < res.ratio_in / 1.1  # the outlier channel is squashed ...
    text = " ".join(squash.notes(res))
    assert "the squash shrinks it" in text and f"{res.ratio_out:.1f}×" in text
    assert res.ratio_compared is not None and f"{res.ratio_compared:.1f}×" in text


def test_feature_dims_shows_dyt_squashing_the_outlier_channel() -> None:
    x = Generated("outliers", "BTC", (8, 6, 16), 1).tensor()
    res = feature_dims.feature_dims(x.numpy(), "BTC")
    assert "dyt" in res.after
    y = torch.tanh(0.5 * x.double()).reshape(-1, 16)
    np.testing.assert_allclose(res.after["dyt"], y.square().mean(0).sqrt().numpy(), rtol=1e-5)
    note = next(n for n in feature_dims.notes(res) if n.startswith("**DyT**"))
    assert f"channel {res.found.top[0]} is squashed" in note


# ---- the pages ---------------------------------------------------------------------------


def test_axes_and_distributions_show_dyt_sections() -> None:
    at = run_app("axes", {"method": "dyt"})
    assert_clean(at)
    assert [s.value for s in at.subheader] == [pointwise.SECTION.label]
    at = run_app("distributions", {"method": "dyt", "data": "outliers"})
    assert_clean(at)
    assert [s.value for s in at.subheader] == ["Before and after: DyT"]
    assert any("the squash shrinks it" in m.value for m in at.markdown)


# ---- the guide ---------------------------------------------------------------------------


def test_the_guide_gives_the_dyt_claim_with_its_caveat_for_transformers() -> None:
    from normviz.choose import guide
    from normviz.sources import cite

    note = guide.dyt_note()
    for name, ln, dyt in guide.DYT_IMAGENET:
        assert f"{name} {ln:.1f} → {dyt:.1f}" in note
    best = max(d - ln for _, ln, d in guide.DYT_IMAGENET)
    assert f"by at most {best:.1f} points" in note and "matches or beats" in note
    assert cite("zhu2025") in note and cite("verma2026") in note and "regime-dependent" in note
    for arch, shown in (("transformer", True), ("cnn", False)):
        rec = guide.recommend(guide.Situation(arch, 32, frozenset()))
        assert (note in [e.body for e in guide.extras(rec)]) == shown


def test_dyt_sections_render_in_chromium(page, server) -> None:
    """The two DyT sections, drawn by a real browser: their charts' text, no exception."""
    for path, title in (
        ("axes?method=dyt", "one of 192 input cells moved"),  # the second line of its title
        ("distributions?method=dyt&data=outliers", "DyT: values before and after"),
    ):
        open_app(page, server, path)
        assert_no_exception(page)
        page.get_by_text(title).first.wait_for()  # plotly.js draws its SVG text after the run


def test_the_audit_recognises_dyt_modules_and_their_placement() -> None:
    from torch import nn

    from normviz.choose import engine

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm, self.fc = DyT(16), nn.Linear(16, 16)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + self.fc(self.norm(x))

    model = nn.Sequential(nn.Linear(8, 16), Block(), DyT(16), nn.Linear(16, 4))
    rep = engine.audit(model, torch.randn(2, 5, 8), "dyt")
    got = {f.name: (f.method, f.placement, f.axes) for f in rep.findings}
    assert got == {
        "1.norm": ("dyt", engine.PRE, "nothing (no statistics)"),
        "2": ("dyt", engine.FINAL, "nothing (no statistics)"),
    }
    assert not any(f.needless_bias or f.modes.batch_dependent for f in rep.findings)
