"""Future tokens leak through BatchNorm's statistics (issue 24), checked against torch."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from normviz.batchnorm import SECTIONS, causal, lab
from normviz.data import generate
from normviz.sections import no_progress

SETUPS = {
    "BTC": lab.LabSetup(layout="BTC", sample_shape=(5, 6), batch_size=4, steps=30),
    "BTC, one sequence": lab.LabSetup(layout="BTC", sample_shape=(5, 6), batch_size=1, steps=30),
    "NCHW": lab.LabSetup(layout="NCHW", sample_shape=(3, 2, 3), batch_size=3, steps=30),
}


def _oracle(x: torch.Tensor, changed: torch.Tensor, eps: float) -> list[torch.Tensor]:
    """|Δy| (B, T, C) of each layer, written with torch's functional forms."""
    C = x.shape[-1]

    def bn(v: torch.Tensor, training: bool) -> torch.Tensor:
        rm, rv = torch.zeros(C), torch.ones(C)
        return F.batch_norm(v.transpose(1, 2), rm, rv, None, None, training, 0.1, eps).transpose(
            1, 2
        )

    layers = [lambda v: bn(v, True), lambda v: bn(v, False), lambda v: F.layer_norm(v, (C,))]
    return [(f(changed) - f(x)).abs() for f in layers]


@pytest.mark.parametrize("name", list(SETUPS))
def test_batchnorm_leaks_in_training_only(name: str) -> None:
    setup = SETUPS[name]
    res = causal.SECTION.run(setup, {"leak_shift": 2.0}, no_progress)
    T, C = setup.sample_shape if setup.layout == "BTC" else causal.SHAPE
    B = setup.batch_size
    assert res.shape == (B, T, C)
    x = generate(setup.data, "BTC", (B, T, C), setup.seed)
    changed = causal.change_last(x, 2.0, setup.seed)
    assert (changed[0, :-1] == x[0, :-1]).all() and (changed[1:] == x[1:]).all()
    d = _oracle(x, changed, setup.eps)
    for i, di in enumerate(d):
        np.testing.assert_allclose(res.own[i], di[0].amax(-1).numpy(), atol=1e-6)
        if B > 1:
            np.testing.assert_allclose(res.others[i], di[1:].amax((0, 2)).numpy(), atol=1e-6)
    # training-mode BatchNorm: position 0 moves when the last token changes
    assert res.own[0, 0] > 1e-2 and res.earlier(0) > 1e-2
    # evaluation-mode BatchNorm and LayerNorm: the earlier positions do not move at all
    assert res.earlier(1) == 0 and res.earlier(2) == 0
    assert res.own[1, -1] > 0.1 and res.own[2, -1] > 0.1  # the changed token itself does
    assert (res.others[1:] == 0).all()
    if B > 1:
        assert res.others[0].max() > 1e-2  # and other sequences see it too, in training


def test_notes_follow_the_numbers() -> None:
    res = causal.SECTION.run(SETUPS["BTC"], {"leak_shift": 3.0}, no_progress)
    text = "\n".join(causal.notes(res))
    assert f"move by up to **{res.earlier(0):.3g}** (position 0 by {res.own[0, 0]:.3g})" in text
    assert text.count("do not move (|Δy| exactly 0)") == 2
    assert f"the other 3 sequences of the batch (by up to {res.others[0].max():.3g})" in text
    one = causal.SECTION.run(SETUPS["BTC, one sequence"], {"leak_shift": 3.0}, no_progress)
    assert "other sequences" not in "\n".join(causal.notes(one))
    img = causal.SECTION.run(SETUPS["NCHW"], {"leak_shift": 3.0}, no_progress)
    assert "the lab's samples are images" in "\n".join(causal.notes(img))


def test_a_single_token_has_no_earlier_position() -> None:
    setup = lab.LabSetup(layout="BTC", sample_shape=(1, 6), batch_size=4, steps=30)
    res = causal.SECTION.run(setup, {"leak_shift": 3.0}, no_progress)
    assert res.earlier(0) == 0
    assert "has no earlier position" in "\n".join(causal.notes(res))


def test_registered_in_the_lab() -> None:
    assert causal.SECTION in SECTIONS
    fig = causal.figure(causal.SECTION.run(SETUPS["BTC"], {"leak_shift": 3.0}, no_progress))
    assert [t.name for t in fig.data] == list(causal.LAYERS)
