"""EfficientNet-Lite0 from the installed package: strict offline load, top-5, BN inputs."""

from __future__ import annotations

import io
import socket

import numpy as np
import pytest
import torch
from hostile_payloads import png_bomb
from PIL import Image
from torch import nn

from normviz import normalize
from normviz.errors import NormConfigError
from normviz.pretrained import efficientnet as ef
from normviz.pretrained import photos as ph
from normviz.pretrained.photos import (
    MAGIC,
    MAX_BYTES,
    SAMPLE_PHOTOS,
    decode_upload,
    sample_photos,
    to_input,
)
from normviz.running import RunningStats

# ImageNet class indices, checked by hand against the standard 1000-class list and by
# looking at the photos (china.jpg: a tiered Chinese palace tower above a lake, the
# Summer Palace; flower.jpg: an orange dahlia close-up, ImageNet has no dahlia class).
# The measured top-5 (once, by hand): china → palace 698, bell cote 442, lakeside 975,
# monastery 663, castle 483; flower → daisy 985, mushroom 947, hen-of-the-woods 996,
# bee 309, pot 738. With torchvision's ImageNet mean/std instead of (x − 127)/128 the
# flower's top-1 probability halves (0.09 vs 0.20): the preprocessing here is the TF one.
# scikit-image's six (looked at, and top-5 measured once by hand, probability in brackets):
# chelsea (a tabby-like cat) → Egyptian cat 285 (0.39), tiger cat 282, tabby 281, lynx 287;
# coffee (a cup of coffee on a saucer) → espresso 967 (0.94), cup 968, consomme 925, coffee
# mug 504; rocket (on its launch pad) → missile 657 (0.31), projectile 744, drilling
# platform 540, space shuttle 812; motorcycle (stereo_motorcycle's left view) → moped 665
# (0.72), motor scooter 670, disk brake 535, crash helmet 518; camera (the cameraman, grey)
# → tripod 872 (0.94); clock (a wall clock, grey, blurred) → bubble 971 (0.68), spotlight
# 818, wall clock 892. (astronaut was left out: bobsled 450, football helmet 560, ….)
EXPECTED = {
    "china": (698, 975),  # palace, lakeside
    "flower": (985,),  # daisy
    "chelsea": (285, 281),  # Egyptian cat, tabby
    "coffee": (967, 968),  # espresso, cup
    "rocket": (657, 744),  # missile, projectile
    "motorcycle": (665, 670),  # moped, motor scooter
    "camera": (872,),  # tripod
    "clock": (892,),  # wall clock
}


class NoNetwork(OSError):
    pass


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to open a network connection fails loudly."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise NoNetwork("network disabled in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


def test_loads_strictly_offline(offline: None) -> None:
    with pytest.raises(NoNetwork):  # the fixture really blocks
        socket.create_connection(("example.com", 80))
    state = torch.load(ef.weights_path(), weights_only=True, map_location="cpu")
    keys = ef.EfficientNetLite0().load_state_dict(state, strict=False)
    assert keys.missing_keys == [] and keys.unexpected_keys == []
    net = ef.build()  # strict=True inside
    assert not net.training
    got = net.state_dict()
    assert set(got) == set(state)
    assert all(torch.equal(got[k], state[k]) for k in state)


def test_the_network_matches_the_checkpoint() -> None:
    net = ef.model()
    bns = [m for m in net.modules() if isinstance(m, nn.BatchNorm2d)]
    assert len(bns) == len(ef.BN_LAYERS) == 49
    assert all(m.eps == 1e-3 and m.momentum == 0.01 for m in bns)
    assert ef.BN_LAYERS[0] == "_bn0" and ef.BN_LAYERS[-1] == "_bn1"
    assert ef.model() is net  # loaded once per process
    assert not net.training


def test_top5_of_the_sample_photos() -> None:
    photos = sample_photos()
    assert photos.shape == (2, 224, 224, 3) and photos.dtype == np.uint8
    top = ef.top_k(ef.predict(photos), 5)
    for name, row in zip(SAMPLE_PHOTOS, top, strict=True):
        for cls in EXPECTED[name]:
            assert cls in row, (name, row.tolist())
    assert top[0, 0] == 698 and top[1, 0] == 985  # palace, daisy are top-1


def test_top5_of_the_eight_scenes() -> None:
    scenes = ph.scene_photos()
    assert scenes.shape == (8, 224, 224, 3) and scenes.dtype == np.uint8
    assert tuple(EXPECTED) == ph.SCENE_PHOTOS and ph.SCENE_PHOTOS[:2] == SAMPLE_PHOTOS
    np.testing.assert_array_equal(scenes[:2], sample_photos())
    assert len({s.tobytes() for s in scenes}) == 8  # eight different images
    top = ef.top_k(ef.predict(scenes), 5)
    for name, row in zip(ph.SCENE_PHOTOS, top, strict=True):
        for cls in EXPECTED[name]:
            assert cls in row, (name, row.tolist())
            assert ef.class_name(cls).startswith(f"{cls} (")  # a name checked by hand
    assert top[2:7, 0].tolist() == [285, 967, 657, 665, 872]  # cat, espresso, missile, …
    for grey in ("camera", "clock"):  # greyscale, repeated over R, G and B
        img = scenes[ph.SCENE_PHOTOS.index(grey)]
        assert (img[..., 0] == img[..., 1]).all() and (img[..., 1] == img[..., 2]).all()


def test_the_scikit_image_photos_load_offline(offline: None) -> None:
    for name in ph.SCENE_PHOTOS[2:]:
        a = ph.skimage_photo(name)
        assert a.ndim == 3 and a.shape[2] == 3 and a.dtype == np.uint8 and min(a.shape[:2]) >= 224


@pytest.mark.parametrize(
    ("layer", "label"),
    [
        ("_bn0", "stem BN (32 ch, 112×112)"),
        ("_blocks.0._bn1", "block 1 of 16, depthwise BN (32 ch, 112×112)"),
        ("_blocks.1._bn0", "block 2 of 16, expansion BN (96 ch, 112×112)"),
        ("_blocks.1._bn1", "block 2 of 16, depthwise BN (96 ch, 56×56)"),
        (ef.DEFAULT_LAYER, "block 16 of 16, projection BN (320 ch, 7×7)"),
        ("_bn1", "head BN (1280 ch, 7×7)"),
    ],
)
def test_layer_labels(layer: str, label: str) -> None:
    assert ef.layer_label(layer) == label


def test_every_layer_label_agrees_with_a_forward_pass() -> None:
    labels = [ef.layer_label(n) for n in ef.BN_LAYERS]
    assert len(set(labels)) == 49
    for n, text in zip(ef.BN_LAYERS, labels, strict=True):
        _, c, h, w = ef.input_shape(1, n)  # measured by hooks on a forward pass
        assert text.endswith(f"BN ({c} ch, {h}×{w})"), (n, text)
    with pytest.raises(NormConfigError, match="not a BatchNorm layer"):
        ef.layer_label("_fc")


def _hook_io(net: nn.Module, layers: tuple[str, ...], x: torch.Tensor) -> dict:
    io: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    hs = [
        net.get_submodule(n).register_forward_hook(
            lambda m, a, out, n=n: io.__setitem__(n, (a[0].clone(), out.clone()))
        )
        for n in layers
    ]
    with torch.no_grad():
        net(x)
    for h in hs:
        h.remove()
    return io


@pytest.mark.parametrize(
    "layer", ["_bn0", "_blocks.0._bn1", "_blocks.7._bn0", ef.DEFAULT_LAYER, "_bn1"]
)
def test_bn_inputs_normalized_with_running_stats_equal_the_bn_outputs(layer: str) -> None:
    photos = sample_photos()
    net = ef.model()
    io = _hook_io(net, (layer,), ef.preprocess(photos))
    x = ef.bn_inputs(photos, layer)
    assert x.dtype == np.float32 and x.shape == ef.input_shape(2, layer)
    torch.testing.assert_close(torch.from_numpy(x), io[layer][0], rtol=0, atol=0)
    bn = net.get_submodule(layer)
    running = RunningStats(bn.num_features)
    running.mean, running.var = bn.running_mean.clone(), bn.running_var.clone()
    y = normalize(
        x, "batch", "NCHW", eps=bn.eps, weight=bn.weight, bias=bn.bias,
        training=False, running=running,
    ).output  # fmt: skip
    torch.testing.assert_close(y, io[layer][1], rtol=1e-5, atol=1e-5)


def test_input_shapes_without_a_forward() -> None:
    assert ef.input_shape(2, ef.DEFAULT_LAYER) == (2, 320, 7, 7)
    assert ef.input_shape(3, "_bn0") == (3, 32, 112, 112)
    assert ef.input_shape(1, "_bn1") == (1, 1280, 7, 7)
    from normviz.limits import max_elements

    assert all(np.prod(ef.input_shape(2, n)) <= max_elements() for n in ef.BN_LAYERS)


def test_bad_layers_and_images_are_refused() -> None:
    with pytest.raises(NormConfigError, match="not a BatchNorm layer"):
        ef.bn_inputs(sample_photos(), "_fc")
    with pytest.raises(NormConfigError, match="not a BatchNorm layer"):
        ef.input_shape(2, "nope")
    with pytest.raises(NormConfigError, match="224"):
        ef.preprocess(np.zeros((1, 100, 100, 3), np.uint8))
    with pytest.raises(NormConfigError, match="at least one"):
        ef.preprocess(np.zeros((0, 224, 224, 3), np.uint8))


def test_the_architecture_traces_with_fx() -> None:
    graph = torch.fx.symbolic_trace(ef.build()).graph
    called = {str(n.target) for n in graph.nodes if n.op == "call_module"}
    assert set(ef.BN_LAYERS) <= called


# ---- photos: resizing, and uploads that are broken, huge or hostile ----------------------


def _encode(img: Image.Image, fmt: str, **kw: object) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format=fmt, **kw)
    return buf.getvalue()


def test_to_input_resizes_the_short_side_and_crops_the_centre() -> None:
    a = np.zeros((100, 300, 3), np.uint8)
    a[:, 100:200] = 255  # the centre third is white
    out = to_input(a)
    assert out.shape == (224, 224, 3) and out.dtype == np.uint8
    assert out[:, 5:-5].min() == 255  # only the centre survives the crop
    assert to_input(np.full((1, 1, 3), 7, np.uint8)).shape == (224, 224, 3)
    with pytest.raises(NormConfigError, match="uint8"):
        to_input(np.zeros((10, 10), np.uint8))


# every mode each format stores (JPEG has no alpha or palette; PNG has no CMYK)
MODES = [("PNG", m) for m in ("RGB", "L", "RGBA", "LA", "P", "I;16")] + [
    ("JPEG", m) for m in ("RGB", "L", "CMYK")
]


@pytest.mark.parametrize("fmt, mode", MODES)
def test_uploads_in_any_mode_decode_to_rgb(fmt: str, mode: str) -> None:
    img = Image.new("RGB", (40, 30), (200, 100, 50)).convert(mode)
    out = decode_upload(_encode(img, fmt))
    assert out.shape == (30, 40, 3) and out.dtype == np.uint8


def test_a_transparent_png_is_flattened_onto_white() -> None:
    out = decode_upload(_encode(Image.new("RGBA", (5, 5), (0, 0, 0, 0)), "PNG"))
    assert out.min() == 255


def test_a_1x1_png_decodes() -> None:
    out = decode_upload(_encode(Image.new("RGB", (1, 1), (1, 2, 3)), "PNG"))
    assert out.tolist() == [[[1, 2, 3]]]


def test_a_png_bomb_is_refused_from_its_header() -> None:
    """A small file declaring 100k × 100k pixels: refused before any pixel is decoded."""
    data = png_bomb(100_000)
    assert len(data) < 200 and data.startswith(MAGIC["PNG"])
    with pytest.raises(NormConfigError, match="pixels"):
        decode_upload(data)


def test_a_big_declared_size_under_the_bomb_limit_is_still_refused() -> None:
    img = Image.new("L", (5000, 4000))  # 20 M pixels: over the app's cap, a small PNG
    data = _encode(img, "PNG")
    assert len(data) < MAX_BYTES
    with pytest.raises(NormConfigError, match="4096 × 4096"):
        decode_upload(data)


@pytest.mark.parametrize("fmt", ["PNG", "JPEG"])
def test_truncated_files_are_refused(fmt: str) -> None:
    rng = np.random.default_rng(0)
    img = Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8))
    data = _encode(img, fmt)
    for cut in (len(data) // 2, 20):
        with pytest.raises(NormConfigError, match="broken or truncated"):
            decode_upload(data[:cut])


@pytest.mark.parametrize(
    "data, match",
    [
        (b"", "empty"),
        (b"GIF89a" + b"\0" * 100, "not a PNG or JPEG"),
        (b"<svg xmlns='http://www.w3.org/2000/svg'/>", "not a PNG or JPEG"),
        (b"\x89PNG\r\n\x1a\n" + b"\0" * 64, "broken or truncated"),
        (b"\xff\xd8\xff" + b"garbage" * 10, "broken or truncated"),
    ],
)
def test_wrong_or_lying_bytes_are_refused(data: bytes, match: str) -> None:
    with pytest.raises(NormConfigError, match=match):
        decode_upload(data)


def test_a_real_gif_is_refused() -> None:
    with pytest.raises(NormConfigError, match="not a PNG or JPEG"):
        decode_upload(_encode(Image.new("RGB", (4, 4)), "GIF"))


def test_a_huge_byte_count_is_refused_before_decoding() -> None:
    data = MAGIC["PNG"] + b"\0" * (MAX_BYTES + 1)
    with pytest.raises(NormConfigError, match="8 MB"):
        decode_upload(data)
    with pytest.raises(NormConfigError, match="bytes"):
        decode_upload("not bytes")  # type: ignore[arg-type]


# ---- /choose: the audit engine on the real network ---------------------------------------


def test_the_choose_audit_of_efficientnet_lite0() -> None:
    from normviz.choose.findings import BRANCH
    from normviz.choose.zoo import PRETRAINED, ZOO, audit_zoo_model

    assert "efficientnet_lite0" in ZOO and "efficientnet_lite0" in PRETRAINED
    report = audit_zoo_model("efficientnet_lite0")
    assert report.traced  # torch.fx traces the architecture
    assert len(report.findings) == 49
    assert {f.module_type for f in report.findings} == {"BatchNorm2d"}
    for f in report.findings:  # running statistics, saved in the state dict
        assert f.running_buffers == ("running_mean", "running_var", "num_batches_tracked")
        assert f.buffers_in_state_dict and f.has_gamma and f.has_beta
        assert f.fed_by is not None and not f.fed_by_bias and not f.needless_bias
    # the checkpoint agrees: no conv keeps a bias (only the classifier has one)
    state = torch.load(ef.weights_path(), weights_only=True, map_location="cpu")
    assert [k for k in state if k.endswith(".bias") and "_bn" not in k] == ["_fc.bias"]
    assert report.needless_biases == ()
    # 9 blocks keep their input's shape and add the skip; each one's three BNs sit inside it
    assert report.residual_adds == 9
    assert sum(f.placement == BRANCH for f in report.findings) == 27
    # weight decay: the 50 weight matrices (49 convs and the classifier) decay; γ, β and
    # the classifier's bias do not
    g = report.param_groups
    assert len(g.decay) == 50 and len(g.no_decay) == 99
    assert "_fc.bias" in g.no_decay and "_bn1.weight" in g.no_decay
