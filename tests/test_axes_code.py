"""The Axis Explorer's torch code: executed, and compared with normalize() and with torch itself."""

from __future__ import annotations

import pytest
import torch

import normviz
import normviz.data
from normviz import STANDARD_METHODS, contract
from normviz.axes.code import torch_code, verify

SHAPES = {"BTC": [(4, 6, 8), (1, 3, 6), (2, 1, 4)], "NCHW": [(4, 6, 3, 5), (1, 4, 2, 2)]}


def _cases():
    for layout, shapes in SHAPES.items():
        for shape in shapes:
            C = shape[normviz.LAYOUTS[layout].channel_axis]
            for method in STANDARD_METHODS:
                for g in [g for g in (1, 2, 3, C) if C % g == 0] if method == "group" else [None]:
                    yield method, layout, shape, g


@pytest.mark.parametrize(("method", "layout", "shape", "groups"), list(_cases()))
@pytest.mark.parametrize("eps", [1e-5, 1e-2])
def test_snippet_runs_and_matches(method, layout, shape, groups, eps) -> None:
    x = normviz.data.generate("channels", layout, shape, 3)
    con = contract(method, layout, shape, groups)
    try:
        expected = normviz.normalize(x, method, layout, groups=groups, eps=eps).output
    except normviz.NormConfigError:
        # what we refuse, the snippet's torch module refuses too
        code = torch_code(con, eps=eps)
        with pytest.raises(ValueError, match="more than 1"):
            exec(code, {"x": x})
        with pytest.raises(normviz.Refusal, match="more than 1"):  # the live check says so
            verify(x, con, eps=eps)
        return
    v = verify(x, con, eps=eps)
    assert v.max_abs_diff < 1e-4
    scope: dict[str, object] = {"x": x.clone()}
    exec(v.code, scope)
    torch.testing.assert_close(scope["y"], expected, atol=3e-4, rtol=1e-5)
    assert v.module.startswith("nn.") and v.module in v.code
    assert f"eps={eps!r}" in v.code


def test_snippet_reads_like_what_a_user_writes() -> None:
    code = torch_code(contract("batch", "BTC", (4, 6, 8)))
    assert "nn.BatchNorm1d(8, eps=1e-05)" in code
    assert "y = norm(x.transpose(1, 2)).transpose(1, 2)" in code
    assert "(B, T, C) -> (B, C, T)" in code
    assert "nn.GroupNorm(3, 6, eps=1e-05)" in torch_code(contract("group", "NCHW", (2, 6, 4, 4), 3))
    assert "nn.LayerNorm((6, 4, 5)" in torch_code(contract("layer", "NCHW", (2, 6, 4, 5)))
    assert "y = norm(x)" in torch_code(contract("rms", "BTC", (2, 3, 4)))


@pytest.mark.parametrize("centred", [True, False])
@pytest.mark.parametrize(
    ("layout", "axes"), [("BTC", "B"), ("BTC", "T,C"), ("NCHW", "C"), ("NCHW", "N,C,H,W")]
)
def test_custom_snippet(layout, axes, centred) -> None:
    shape = (3, 4, 5) if layout == "BTC" else (2, 3, 4, 5)
    x = normviz.data.generate("normal", layout, shape, 1)
    v = verify(x, contract("custom", layout, shape, axes=axes, centred=centred))
    assert v.max_abs_diff < 1e-5
    assert ("mean = " in v.code) == centred


def test_invalid_settings_raise_before_code() -> None:
    with pytest.raises(normviz.NormConfigError, match="C=6, groups=4"):
        torch_code(contract("group", "BTC", (2, 3, 6), groups=4))


def test_what_torch_refuses_is_a_refusal() -> None:
    x = normviz.data.generate("normal", "BTC", (2, 3, 4), 0)
    with pytest.raises(ValueError, match="eps must be positive"):  # torch's own check
        exec(torch_code(contract("batch", "BTC", (2, 3, 4)), eps=0.0), {"x": x})
    with pytest.raises(normviz.Refusal, match="eps must be positive"):
        verify(x, contract("batch", "BTC", (2, 3, 4)), eps=0.0)
