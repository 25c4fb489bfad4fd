"""The real network's running statistics (EfficientNet-Lite0): torch is the oracle."""

from __future__ import annotations

import copy
import json

import keys
import numpy as np
import pytest
import torch
from conftest import assert_clean, assert_no_exception, run_app, texts, wait_done
from signals import assert_within_budget
from torch import nn

from normviz import batchnorm as bn
from normviz.batchnorm import realnet as rn
from normviz.errors import NormConfigError
from normviz.pretrained import efficientnet as ef
from normviz.pretrained import photos
from normviz.sections import no_progress

SETUP = bn.LabSetup()


def _bn_io(net: nn.Module, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Every BatchNorm's input in one forward pass of `net` (a private copy)."""
    seen: dict[str, torch.Tensor] = {}
    hs = [
        net.get_submodule(n).register_forward_pre_hook(
            lambda m, a, n=n: seen.__setitem__(n, a[0].clone())
        )
        for n in ef.BN_LAYERS
    ]
    with torch.no_grad():
        net(x)
    for h in hs:
        h.remove()
    return seen


@pytest.fixture(scope="module")
def checkpoint() -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in ef.model().state_dict().items()}


@pytest.fixture(scope="module")
def result() -> rn.RealNet:
    return rn.SECTION.run(SETUP, {"bn_layer": 48}, no_progress)


def test_the_eight_images_are_eight_scenes() -> None:
    imgs = rn.images()
    assert imgs.shape == (8, 224, 224, 3) and not imgs.flags.writeable
    np.testing.assert_array_equal(imgs, photos.scene_photos())
    np.testing.assert_array_equal(imgs[:2], photos.sample_photos())
    assert len({i.tobytes() for i in imgs}) == rn.N_IMAGES == 8


def test_stored_and_image_statistics(result: rn.RealNet) -> None:
    layer = ef.BN_LAYERS[47]
    assert result.layer == layer == ef.DEFAULT_LAYER
    m = ef.model().get_submodule(layer)
    np.testing.assert_array_equal(result.stored_mean, m.running_mean.double().numpy())
    np.testing.assert_array_equal(result.stored_var, m.running_var.double().numpy())
    x = torch.from_numpy(ef.bn_inputs(rn.images(), layer)).double()
    np.testing.assert_allclose(result.image_mean, x.mean((0, 2, 3)).numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        result.image_var, x.var((0, 2, 3), correction=0).numpy(), rtol=1e-4, atol=1e-6
    )
    assert result.shape == (8, 320, 7, 7)


def test_training_mode_recomputed_with_torch(result: rn.RealNet) -> None:
    net = ef.build()  # a private network: the whole model in training mode but dropout
    x = ef.preprocess(rn.images())
    with torch.no_grad():
        ev = net(x)
        net.train()
        net._dropout.eval()
        for row, b in enumerate(rn.BATCHES):
            tr = torch.cat([net(x[i : i + b]) for i in range(0, 8, b)])
            np.testing.assert_array_equal(result.train_top1[row], tr.argmax(-1).numpy())
            drift = (torch.linalg.norm(tr - ev) / torch.linalg.norm(ev)).item()
            assert result.drift[row] == pytest.approx(drift, rel=1e-4)
    np.testing.assert_array_equal(result.eval_top1, ev.argmax(-1).numpy())
    assert result.min_values.tolist() == [49, 98, 392]  # the 7 × 7 maps of the last stage
    # measured with the eight scenes: training mode keeps no class at batch 1 or 2, four
    # at batch 8 (the notes read these counts, whatever they are)
    agree = [int((t == result.eval_top1).sum()) for t in result.train_top1]
    assert agree == [0, 0, 4]


def test_the_shared_model_is_never_changed(checkpoint: dict[str, torch.Tensor]) -> None:
    rn.SECTION.run(SETUP, {"bn_layer": 1}, no_progress)
    rn.SHIFTED.run(SETUP, {"bn_shift": "noise", "bn_strength": 1.0, "bn_prior": 4}, no_progress)
    net = ef.model()
    assert not net.training and not any(m.training for m in net.modules())
    for k, v in net.state_dict().items():
        assert torch.equal(v, checkpoint[k]), k


@pytest.fixture(scope="module")
def blurred() -> tuple[torch.Tensor, nn.Module]:
    """The eight photos blurred (s = 0.5) and a copy re-estimated on them, once: one test
    checks its statistics, the blend test mixes them (any shift's statistics serve)."""
    x = ef.preprocess(photos.shifted(rn.images(), "blur", 0.5))
    return x, ef.reestimate(x)


def test_reestimated_statistics_are_the_shifted_batch_statistics(
    blurred: tuple[torch.Tensor, nn.Module],
) -> None:
    x, re = blurred
    assert not re.training
    oracle = copy.deepcopy(ef.model())
    oracle.train()  # batch statistics everywhere, as during the re-estimating pass
    inputs = _bn_io(oracle, x)
    for n in ef.BN_LAYERS:
        m = re.get_submodule(n)
        t = inputs[n].double()
        torch.testing.assert_close(m.running_mean.double(), t.mean((0, 2, 3)), rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(
            m.running_var.double(), t.var((0, 2, 3), correction=1), rtol=1e-4, atol=1e-5
        )
        assert m.num_batches_tracked.item() == 1 and m.momentum is None


def test_blend_is_schneiders_weighted_mix(blurred: tuple[torch.Tensor, nn.Module]) -> None:
    re = blurred[1]
    mixed = ef.blend(re, 24, 8)  # N = 24, n = 8: weight 0.75 on the stored statistics
    for n in ef.BN_LAYERS[::7]:
        old, new, got = (net.get_submodule(n) for net in (ef.model(), re, mixed))
        torch.testing.assert_close(
            got.running_mean, 0.75 * old.running_mean + 0.25 * new.running_mean
        )
        torch.testing.assert_close(got.running_var, 0.75 * old.running_var + 0.25 * new.running_var)
    zero = ef.blend(re, 0, 8)
    assert all(
        torch.equal(a, b)
        for a, b in zip(zero.state_dict().values(), re.state_dict().values(), strict=True)
    )


@pytest.fixture(scope="module")
def oracle() -> tuple[nn.Module, np.ndarray]:
    """torch's own network, built once, and its top-1 classes of the clean images: the same
    for every shift (each case re-estimates a private copy)."""
    net = ef.build()
    with torch.no_grad():
        return net, net(ef.preprocess(rn.images())).argmax(-1).numpy()


@pytest.mark.parametrize(("kind", "strength"), [("contrast", 0.5), ("none", 0.7)])
def test_agreements_recomputed_independently(
    kind: str, strength: float, oracle: tuple[nn.Module, np.ndarray]
) -> None:
    res = rn.SHIFTED.run(
        SETUP, {"bn_shift": kind, "bn_strength": strength, "bn_prior": 16}, no_progress
    )
    x = ef.preprocess(photos.shifted(rn.images(), kind, strength, seed=SETUP.seed))
    built, clean = oracle
    net = copy.deepcopy(built)
    with torch.no_grad():
        before = net(x).argmax(-1).numpy()
        for m in net.modules():  # re-estimate by hand: reset, cumulative average, one pass
            if isinstance(m, nn.BatchNorm2d):
                m.reset_running_stats()
                m.momentum = None
        net.train()
        net(x)
        net.eval()
        after = net(x).argmax(-1).numpy()
    np.testing.assert_array_equal(res.clean_top1, clean)
    np.testing.assert_array_equal(res.stored_top1, before)
    np.testing.assert_array_equal(res.reest_top1, after)
    n_before, n_after = int((before == clean).sum()), int((after == clean).sum())
    notes = " ".join(rn.SHIFTED.notes(res))
    assert f"{n_before} of 8 shifted images keep their clean top-1 class" in notes
    assert f"re-estimated on the shifted batch alone, {n_after} of 8" in notes
    if kind == "none":  # no shift: the stored statistics give every clean class back
        assert n_before == 8
    if n_after < n_before:
        assert "Re-estimating *hurt* here" in notes


def test_shifts() -> None:
    imgs = rn.images()[:2]
    for kind in photos.SHIFTS:
        np.testing.assert_array_equal(photos.shifted(imgs, kind, 0.0), imgs)
    a = imgs.astype(float)
    assert photos.shifted(imgs, "brightness", 0.5).mean() > a.mean() + 40
    low = photos.shifted(imgs, "contrast", 1.0).astype(float)  # × 0.1 around each image's mean
    for lo, orig in zip(low, a, strict=True):
        assert lo.std() == pytest.approx(0.1 * orig.std(), abs=0.5)
        assert lo.mean() == pytest.approx(orig.mean(), abs=0.5)
    blurred = photos.shifted(imgs, "blur", 1.0).astype(float)
    assert np.abs(np.diff(blurred, axis=1)).mean() < 0.5 * np.abs(np.diff(a, axis=1)).mean()
    noisy = photos.shifted(imgs, "noise", 0.5, seed=3)
    np.testing.assert_array_equal(noisy, photos.shifted(imgs, "noise", 0.5, seed=3))  # seeded
    assert not np.array_equal(noisy, photos.shifted(imgs, "noise", 0.5, seed=4))
    with pytest.raises(NormConfigError, match="unknown shift"):
        photos.shifted(imgs, "fog", 0.5)
    with pytest.raises(NormConfigError, match="between 0 and 1"):
        photos.shifted(imgs, "blur", 2.0)


def test_figures_tables_notes(result: rn.RealNet) -> None:
    fig = rn.SECTION.figure(result, False)
    assert fig is not None
    assert_within_budget(fig)
    table = rn.SECTION.table(result)
    assert table is not None and len(table) == 3
    notes = " ".join(rn.SECTION.notes(result))
    agree = [int((t == result.eval_top1).sum()) for t in result.train_top1]
    assert f"{agree[0]} of 8 images at batch 1" in notes
    assert "at least 49 values per channel" in notes
    assert "More agree at batch 8 than at batch 1, but 8 photos are a poor stand-in" in notes
    assert "block 16 of 16, projection BN (320 ch, 7×7)" in notes
    ratio = (result.image_var + 1e-3) / (result.stored_var + 1e-3)
    assert f"{np.median(ratio):#.2g}× the stored one" in notes
    assert rn.SECTION.alt_text(result, fig)[0].startswith("Two scatter plots for layer 48")
    assert fig.layout.title.text == "Layer 48 (_blocks.15._bn2): " + ef.layer_label(
        ef.DEFAULT_LAYER
    )
    with pytest.raises(NormConfigError, match="from 1 to 49"):
        rn.SECTION.run(SETUP, {"bn_layer": 50}, no_progress)


# ---- the page -------------------------------------------------------------------------------


def test_the_page_shows_the_real_network() -> None:
    query = {"sim": "realnet", "bn_layer": "49", "bn_shift": "blur", "bn_strength": "0.3"}
    at = run_app("batchnorm", query, timeout=600)
    assert_clean(at)
    page = texts(at)
    assert "Layer 49 (head BN (1280 ch, 7×7))" in page
    assert "Shift: a Gaussian blur of radius 4·s pixels (s = 0.3)" in page
    charts = [json.loads(e.proto.spec) for e in at.get("plotly_chart")]
    assert len(charts) == 2
    assert charts[0]["layout"]["title"]["text"] == "Layer 49 (_bn1): head BN (1280 ch, 7×7)"
    # the layer knob shows readable labels
    slider = at.select_slider(key=keys.key("batchnorm", "bn_layer"))
    assert slider.value == 49 and "49 · head BN (1280 ch, 7×7)" in slider.options


@pytest.mark.browser
def test_the_real_network_in_browser(page, server) -> None:
    slow = 300_000  # ms: a busy two-core machine, a first visit loads torch and the model
    page.goto(f"{server}/batchnorm?sim=realnet&bn_shift=brightness&bn_strength=0.4")
    wait_done(page, timeout=slow)
    page.get_by_text("Shifted images (brightness 0.4)").first.wait_for(timeout=slow)
    assert_no_exception(page)
    assert page.locator(".js-plotly-plot").count() == 2  # the section and its shift part
    body = page.inner_text("body")
    assert "EfficientNet-Lite0" in body and "keep their clean top-1 class" in body
    # the layer slider moves with the keyboard, and the URL follows
    slider = page.get_by_role("slider", name="BatchNorm layer (1 = first)")
    assert "48 · block 16 of 16, projection BN (320 ch, 7×7)" in body  # the slider's value
    slider.focus()
    slider.press("ArrowRight")
    page.wait_for_url("**bn_layer=49**", timeout=slow)
    wait_done(page, timeout=slow)
    page.locator("svg text", has_text="Layer 49 (_bn1): head BN").first.wait_for(timeout=slow)
    assert "49 · head BN (1280 ch, 7×7)" in page.inner_text("body")
    assert_no_exception(page)
