"""/residual's real checkpoints: the stream entering every norm of pre-norm SmolLM2 and
post-norm MiniLM, against numpy over each sentence run alone (no padding anywhere), and
the verdict computed from those curves."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import assert_clean, run_app, texts

from normviz.pretrained import minilm, smollm2
from normviz.pretrained.smollm2_net import NORMS
from normviz.residual import SECTIONS, pretrained_depth
from normviz.sections import no_progress

ASK = {"rd_load": "yes", "rd_first": "kept", "rd_scale": "log"}


def median(a: np.ndarray) -> float:
    return float(torch.from_numpy(a).median())  # torch's: the lower middle of an even count


@pytest.fixture(scope="module")
def kept() -> pretrained_depth.PretrainedDepth:
    smollm2.load()  # once per module: later tests share the cached models
    return pretrained_depth.run(None, ASK, no_progress)


@pytest.fixture(scope="module")
def dropped(kept) -> pretrained_depth.PretrainedDepth:
    return pretrained_depth.run(None, {**ASK, "rd_first": "dropped"}, no_progress)


def test_the_section_waits_until_asked() -> None:
    res = pretrained_depth.run(None, {**ASK, "rd_load": "no"}, no_progress)
    assert not res.curves and pretrained_depth.figure(res, False) is None
    assert pretrained_depth.notes(res) == (pretrained_depth.WAITING,)
    assert pretrained_depth.SECTION in SECTIONS


def test_minilm_curves_equal_numpy_over_each_sentence_alone(kept) -> None:
    post = kept.curves[1]
    assert post.names == minilm.LN_LAYERS and post.placement == "post-norm"
    for i in (0, 5, 12):
        alone = [
            minilm.layernorm_inputs([t], post.names[i])[0][0] for t in pretrained_depth.texts()
        ]
        x = np.concatenate(alone).astype(np.float64)  # (tokens, C), [CLS] and [SEP] kept
        sigma = np.sqrt(x.var(-1) + minilm.EPS)
        assert post.median[i] == pytest.approx(median(np.abs(x)), rel=1e-4)
        assert post.max[i] == pytest.approx(np.abs(x).max(), rel=1e-4)
        assert post.divisor[i] == pytest.approx(median(sigma), rel=1e-4)


def test_smollm2_curves_without_the_first_token_equal_numpy(dropped) -> None:
    pre = dropped.curves[0]
    assert pre.names == NORMS and pre.placement == "pre-norm"
    for layer in ("blk.0.ffn_norm", "blk.12.attn_norm", "output_norm"):
        alone = [smollm2.hidden_states([t], layer)[0][0, 1:] for t in pretrained_depth.texts()]
        x = np.concatenate(alone).astype(np.float64)
        r = NORMS.index(layer)
        assert pre.max[r] == pytest.approx(np.abs(x).max(), rel=1e-5)
        assert pre.median[r] == pytest.approx(median(np.abs(x)), rel=1e-4)
        assert pre.divisor[r] == pytest.approx(median(np.sqrt((x**2).mean(-1) + 1e-5)), rel=1e-4)
    # without the first token no massive scalar: every |x| under 2,000 (measured 622)
    assert pre.max.max() < 2_000


def test_pre_norm_grows_and_post_norm_stays_bounded(kept, dropped) -> None:
    """Margins: SmolLM2's median |x| grows over 50× from the first block sum to the last
    (measured 173 to 196), MiniLM's block LayerNorm inputs stay within 2× (measured 1.44)."""
    for res in (kept, dropped):
        pre, post = res.curves
        assert pre.growth > 50 and post.spread < 2
        text = "\n".join(pretrained_depth.notes(res))
        assert f"the pre-norm stream grows with depth, {pre.growth:,.0f}×" in text
        assert f"stays within {post.spread:.2f}×" in text
    # with the first token, the largest |x| is the massive activation, named as such
    pre = kept.curves[0]
    assert pre.max.max() > 10_000 and "a massive activation" in "\n".join(
        pretrained_depth.notes(kept)
    )
    assert "a massive activation" not in "\n".join(pretrained_depth.notes(dropped))


def test_the_figure_is_valid(kept) -> None:
    from signals import assert_valid

    fig = pretrained_depth.figure(kept, True)
    assert_valid(fig)
    assert len(fig.data) == 6 and fig.layout.yaxis3.type == "log"


def test_the_residual_page_runs_the_two_checkpoints_when_asked(kept) -> None:
    at = run_app("residual", {"rd_load": "yes", "rd_first": "dropped"}, timeout=300)
    assert_clean(at)
    assert pretrained_depth.SECTION.label in [s.value for s in at.subheader]
    assert "**Verdict** (without the first token): the pre-norm stream grows" in texts(at)
