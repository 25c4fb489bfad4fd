"""GroupNorm as a reshape (issue 24): the shown code runs, and equals nn.GroupNorm and normalize."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from normviz import normalize
from normviz.axes import REST, reshape
from normviz.axes.cells import AxesSetup
from normviz.core import Refusal, contract
from normviz.data import generate
from normviz.sections import no_progress

CASES = [
    ("NCHW", (2, 6, 4, 4), 3),
    ("NCHW", (3, 8, 2, 5), 1),
    ("NCHW", (1, 4, 3, 3), 4),
    ("BTC", (4, 6, 8), 2),
    ("BTC", (2, 5, 6), 6),
]


@pytest.mark.parametrize(("layout", "shape", "groups"), CASES)
def test_the_shown_code_runs_and_equals_groupnorm(layout: str, shape: tuple, groups: int) -> None:
    x = generate("channels", layout, shape, 1)
    res = reshape.check(x, layout, groups)
    # the code exactly as shown, run on its own
    scope: dict[str, object] = {"x": x.clone()}
    exec(compile(res.code, "<shown>", "exec"), scope)
    y = scope["y"]
    # the oracle: torch's own module, channels at dim 1
    gn = nn.GroupNorm(groups, shape[1 if layout == "NCHW" else 2], affine=False)
    with torch.no_grad():
        ref = gn(x) if layout == "NCHW" else gn(x.transpose(1, 2)).transpose(1, 2)
    torch.testing.assert_close(y, ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(
        y, normalize(x, "group", layout, groups=groups).output, atol=1e-5, rtol=1e-5
    )
    assert res.diff_torch < 1e-5 and res.diff_normalize < 1e-5 and res.matches
    # the reshape's means: one per (sample, group) of consecutive channels
    xc = x if layout == "NCHW" else x.transpose(1, 2)
    np.testing.assert_allclose(res.means, xc.reshape(shape[0], groups, -1).mean(-1), atol=1e-6)
    assert res.pooled == xc[0].numel() // groups
    if layout == "NCHW":
        assert "x.reshape(N, G, C // G, H, W)" in res.code and "dims = (2, 3, 4)" in res.code
    else:
        assert "xc.reshape(B, G, C // G, T)" in res.code and "x.transpose(1, 2)" in res.code


def test_notes_and_figure_follow_the_numbers() -> None:
    x = generate("channels", "NCHW", (2, 6, 4, 4), 0)
    res = reshape.check(x, "NCHW", 3)
    text = "\n".join(reshape.notes(res))
    assert "2 × 3 = 6 means and variances, each over C//G × positions = 32 values" in text
    assert "group 0: channels 0–1; group 1: channels 2–3; group 2: channels 4–5" in text
    assert f"matches torch.nn.GroupNorm (max |Δ| = {res.diff_torch:.1e})" in text
    fig = reshape.figure(res)
    (heat,) = fig.data
    assert np.asarray(heat.z).shape == (2, 6)
    np.testing.assert_allclose(np.asarray(heat.z)[:, ::2], res.means, atol=1e-4)
    # the colour bar's title beside it: above, it took the room of two rows' short bar
    # and its ticks met in presenter mode
    assert heat.colorbar.title.side == "right"
    one = reshape.check(x, "NCHW", 1)
    assert "LayerNorm over (C, H, W)" in "\n".join(reshape.notes(one))
    assert "G = 1 group of C//G = 6" in one.code


def test_a_mismatch_is_said() -> None:
    res = reshape.check(generate("channels", "BTC", (2, 3, 4), 0), "BTC", 2)
    bad = reshape.ReshapeCheck(res.layout, res.shape, 2, res.code, res.means, 0.5, float("nan"))
    assert not bad.matches and "differs from torch.nn.GroupNorm" in "\n".join(reshape.notes(bad))


def test_eps_zero_on_constant_data_is_nan_in_both_and_still_matches() -> None:
    x = torch.ones(2, 4, 3, 3)
    res = reshape.check(x, "NCHW", 2, eps=0.0)
    assert res.matches and res.diff_torch == 0.0


def test_a_group_count_that_does_not_divide_c_is_refused() -> None:
    x = generate("channels", "BTC", (4, 6, 8), 0)
    with pytest.raises(Refusal, match=r"C = 8, G = 3.*choose G in 1, 2, 4, 8"):
        reshape.check(x, "BTC", 3)


def test_the_section_uses_the_page_groups() -> None:
    assert reshape.SECTION in REST
    group = AxesSetup(contract("group", "NCHW", (2, 6, 4, 4), groups=3), groups=3)
    assert reshape.SECTION.run(group, {}, no_progress).groups == 3
    other = AxesSetup(contract("batch", "BTC", (4, 6, 8)), groups=4)  # the sidebar's G
    assert reshape.SECTION.run(other, {}, no_progress).groups == 4
