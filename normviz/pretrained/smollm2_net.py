"""SmolLM2's network written out in torch: the config, RoPE, a pre-norm block, the decoder.

Pure torch over a `Config` (no file here: `normviz.pretrained.smollm2` reads the GGUF and
fills the parameters, which carry the GGUF tensors' names, `blk.3.attn_q.weight`). The
query and key weights stay in the file's row order, so RoPE rotates adjacent pairs as
llama.cpp does (transformers' Llama rotates halves of rows it has permuted back; the tests
check both give the same logits).

`Taps` is what one pass records and changes at the RMSNorms: per call, so two sessions
sharing the model never see each other's captures (module hooks would be shared).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.nn import functional as F

BLOCKS = 30
NORMS: tuple[str, ...] = (
    *(f"blk.{i}.{part}" for i in range(BLOCKS) for part in ("attn_norm", "ffn_norm")),
    "output_norm",
)


@dataclass(frozen=True)
class Config:
    """The model's shape, as the GGUF header states it."""

    blocks: int
    dim: int  # d, the residual stream's width
    heads: int  # query heads
    kv_heads: int  # key/value heads (grouped-query attention)
    ffn: int  # the feed-forward's hidden width
    eps: float  # every RMSNorm's ε
    rope_base: float
    rope_dims: int  # rotated dimensions per head
    vocab: int
    context: int
    tied: bool  # the output head is the token embedding (no output.weight in the file)
    bos: int
    eos: int
    pad: int

    @property
    def head_dim(self) -> int:
        return self.dim // self.heads


@dataclass
class Taps:
    """What one pass records and changes at the RMSNorms (per call: no shared hooks).

    `catch`: the norms whose input and output to keep, as `caught[name] = (x, y)`, each
    (B, T, C). `edits`: functions applied to the residual stream where it enters a norm
    (the edited stream flows on). `logits`: False stops the pass once all is caught.
    """

    catch: Collection[str] = ()
    edits: Mapping[str, Callable[[torch.Tensor], torch.Tensor]] = field(default_factory=dict)
    logits: bool = True
    caught: dict[str, tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)

    def norm(self, name: str, mod: nn.RMSNorm, h: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The stream (edited if asked) and the norm's output."""
        if name in self.edits:
            h = self.edits[name](h)
        y = mod(h)
        if name in self.catch:
            self.caught[name] = (h, y)
        return h, y

    @property
    def done(self) -> bool:
        return not self.logits and all(n in self.caught for n in self.catch)


def rope_tables(T: int, cfg: Config) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of each position's angle per rotated pair, (T, rope_dims / 2)."""
    d = cfg.rope_dims
    inv = cfg.rope_base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv
    return ang.cos().float(), ang.sin().float()


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE as llama.cpp applies it to GGUF weights: adjacent pairs (2i, 2i+1) of each
    head rotated by angle pos · base^(-2i/d). x: (B, heads, T, head_dim)."""
    d = cos.shape[-1] * 2
    rot = x[..., :d].unflatten(-1, (-1, 2))
    a, b = rot[..., 0], rot[..., 1]
    out = torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)
    return torch.cat([out, x[..., d:]], dim=-1)


class Block(nn.Module):
    """One pre-norm block: h + attention(RMSNorm(h)), then h + SwiGLU(RMSNorm(h))."""

    def __init__(self, cfg: Config, i: int) -> None:
        super().__init__()
        d, kv = cfg.dim, cfg.kv_heads * cfg.head_dim
        self.cfg, self.i = cfg, i
        self.attn_norm = nn.RMSNorm(d, eps=cfg.eps)
        self.attn_q = nn.Linear(d, d, bias=False)
        self.attn_k = nn.Linear(d, kv, bias=False)
        self.attn_v = nn.Linear(d, kv, bias=False)
        self.attn_output = nn.Linear(d, d, bias=False)
        self.ffn_norm = nn.RMSNorm(d, eps=cfg.eps)
        self.ffn_gate = nn.Linear(d, cfg.ffn, bias=False)
        self.ffn_up = nn.Linear(d, cfg.ffn, bias=False)
        self.ffn_down = nn.Linear(cfg.ffn, d, bias=False)

    def forward(self, h: torch.Tensor, rope: tuple[torch.Tensor, ...], taps: Taps) -> torch.Tensor:
        h, a = taps.norm(f"blk.{self.i}.attn_norm", self.attn_norm, h)
        h = h + self.attention(a, *rope)
        h, f = taps.norm(f"blk.{self.i}.ffn_norm", self.ffn_norm, h)
        return h + self.ffn_down(F.silu(self.ffn_gate(f)) * self.ffn_up(f))

    def attention(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        cfg, (B, T, _) = self.cfg, x.shape
        q = self.attn_q(x).view(B, T, cfg.heads, cfg.head_dim).transpose(1, 2)
        k = self.attn_k(x).view(B, T, cfg.kv_heads, cfg.head_dim).transpose(1, 2)
        v = self.attn_v(x).view(B, T, cfg.kv_heads, cfg.head_dim).transpose(1, 2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        group = cfg.heads // cfg.kv_heads  # query heads 3g, 3g+1, 3g+2 share kv head g
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, heads, T, hd)
        return self.attn_output(y.transpose(1, 2).reshape(B, T, cfg.dim))


class SmolLM2(nn.Module):
    """The decoder; its parameters carry the GGUF tensors' names (`blk.3.attn_q.weight`)."""

    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.cfg = cfg
        self.token_embd = nn.Embedding(cfg.vocab, cfg.dim)
        self.blk = nn.ModuleList(Block(cfg, i) for i in range(cfg.blocks))
        self.output_norm = nn.RMSNorm(cfg.dim, eps=cfg.eps)
        self.output = None if cfg.tied else nn.Linear(cfg.dim, cfg.vocab, bias=False)

    def forward(self, ids: torch.Tensor, taps: Taps | None = None) -> torch.Tensor | None:
        """Logits (B, T, vocab) for token ids (B, T); None when `taps` wanted no logits."""
        taps = Taps() if taps is None else taps
        h = self.token_embd(ids)  # (B, T, C)
        rope = rope_tables(ids.shape[1], self.cfg)
        for blk in self.blk:
            h = blk(h, rope, taps)
            if taps.done:
                return None
        _, y = taps.norm("output_norm", self.output_norm, h)
        if taps.done:
            return None
        head = self.token_embd.weight if self.output is None else self.output.weight
        return y @ head.T

    def norm(self, name: str) -> nn.RMSNorm:
        """The RMSNorm module `name` (its weight and ε)."""
        if name not in NORMS:
            raise ValueError(f"unknown SmolLM2 RMSNorm {name!r}")
        return self.get_submodule(name)  # type: ignore[return-value]


__all__ = ["BLOCKS", "NORMS", "Block", "Config", "SmolLM2", "Taps", "rope_tables", "rotate"]
