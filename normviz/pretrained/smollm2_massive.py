"""SmolLM2's massive activation, found and tested live (Sun et al. 2024).

A few scalars of a trained language model's residual stream are thousands of times the
median: in SmolLM2 one dimension of the first token. This module computes, for the
sentences given (never quoting a number):

- `depth(texts)`: the median and largest |x| entering each norm and the RMS it divides
  by, pooled over the sentences: the pre-norm stream's growth with depth;
- `peaks(texts)`: for each of the 61 RMSNorms and each token, the largest |x| entering
  the norm, its dimension, and the RMS the norm divides that token by;
- `find(peak, layer)`: the largest |x| entering one norm, where it sits, how many times
  the median |x| it is, and what dividing by that token's RMS does to its other features;
- `interventions(texts, layer)`: the mean next-token NLL of each sentence as it is, with
  that one scalar set to zero, set to its mean over the other sentences, and with a
  random other dimension of the same token set to zero. Each edit is made where the
  stream enters the norm, and the edited stream flows on through the later blocks.

Every pass runs the sentences as one right-padded batch (causal: the pads come after
each sentence's tokens, so no pad reaches a real token, a statistic or a loss).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch.nn import functional as F

from normviz.pretrained import smollm2
from normviz.pretrained.smollm2_net import NORMS, Taps

Progress = Callable[[float, str], None] | None


@dataclass(frozen=True)
class Peaks:
    """One sentence's largest activations entering each RMSNorm, (L = 61, T) arrays."""

    text: str
    tokens: tuple[str, ...]
    top: np.ndarray  # (L, T) the largest |x| over the C features of each token
    dim: np.ndarray  # (L, T) the feature holding it
    value: np.ndarray  # (L, T) that feature's signed value
    rms: np.ndarray  # (L, T) sqrt(mean x² + ε): what the norm divides each token by
    median: np.ndarray  # (L,) the median |x| over all of the sentence's tokens and features

    def row(self, layer: str) -> int:
        return NORMS.index(layer)


def _check(texts: Sequence[str], progress: Progress, layer: str | None = None) -> list[str]:
    """The sentences to run (the model loaded, `progress` told how far)."""
    smollm2.gguf_path()
    texts = [t for t in texts if t.strip()]
    if not texts:
        raise ValueError("no sentence to run: type at least one")
    if layer is not None and layer not in NORMS:
        raise ValueError(f"unknown SmolLM2 RMSNorm {layer!r}")
    smollm2.load(progress)
    return texts


def catch_norms(texts: list[str], progress: Progress = None) -> tuple[list[list[int]], Taps]:
    """One gated pass over `texts` catching the inputs of all 61 norms: (token ids, taps)."""
    with smollm2.GATE.enter(progress):
        ids = smollm2.encode(texts)
        taps = Taps(catch=NORMS, logits=False)
        smollm2.run(ids, taps)
    return ids, taps


def own_tokens(ids: list[list[int]], skip_first: bool = False) -> torch.Tensor:
    """(B, T) mask of each sentence's own tokens (its padding never enters a statistic);
    `skip_first` leaves out each sentence's first token too."""
    real = torch.zeros(len(ids), max(map(len, ids)), dtype=torch.bool)
    for b, row in enumerate(ids):
        real[b, int(skip_first) : len(row)] = True
    return real


def peaks(texts: Sequence[str], progress: Progress = None) -> tuple[Peaks, ...]:
    """Each sentence's `Peaks`, from one pass catching the inputs of all 61 norms.

    Raises:
        NotInstalled: the wheel is absent.
        ValueError: no sentence.
    """
    texts = _check(texts, progress)
    ids, taps = catch_norms(texts, progress)
    return _peaks(texts, ids, taps)


def _peaks(texts: list[str], ids: list[list[int]], taps: Taps) -> tuple[Peaks, ...]:
    x = torch.stack([taps.caught[n][0] for n in NORMS]).double()  # (L, B, T, C)
    mag = x.abs()
    top, dim = mag.max(dim=-1)  # (L, B, T)
    value = x.gather(-1, dim[..., None])[..., 0]
    rms = (x.square().mean(-1) + smollm2.config().eps).sqrt()
    tok = smollm2.tokenizer()
    out = []
    for b, (text, row) in enumerate(zip(texts, ids, strict=True)):
        n = len(row)  # this sentence's own tokens: its padding never enters
        out.append(
            Peaks(
                text,
                tuple(tok.id_to_token(i) for i in row),
                top[:, b, :n].numpy(),
                dim[:, b, :n].numpy(),
                value[:, b, :n].numpy(),
                rms[:, b, :n].numpy(),
                mag[:, b, :n].flatten(1).median(dim=1).values.numpy(),
            )
        )
    return tuple(out)


@dataclass(frozen=True)
class Depth:
    """The stream entering each of the 61 norms, pooled over every sentence's own tokens:
    how large it grows with depth (pre-norm: nothing rescales the residual stream)."""

    median: np.ndarray  # (L,) the median |x| over all tokens and features
    max: np.ndarray  # (L,) the largest |x|
    rms_median: np.ndarray  # (L,) the median over tokens of the RMS the norm divides by
    rms_max: np.ndarray  # (L,) the largest such RMS (from blk.12 on, the first token's)


def depth(texts: Sequence[str], progress: Progress = None, skip_first: bool = False) -> Depth:
    """The depth curves of the stream entering each norm, for `texts` (one pass);
    `skip_first`: each sentence's first token (where the massive scalar sits) left out.

    Raises:
        NotInstalled: the wheel is absent.
        ValueError: no sentence.
    """
    texts = _check(texts, progress)
    ids, taps = catch_norms(texts, progress)
    real = own_tokens(ids, skip_first)
    if not real.any():
        raise ValueError("no token left once the first token of each sentence is dropped")
    x = torch.stack([taps.caught[n][0][real] for n in NORMS]).double()  # (L, tokens, C)
    rms = (x.square().mean(-1) + smollm2.config().eps).sqrt()  # (L, tokens)
    mag = x.abs().flatten(1)
    return Depth(
        mag.median(1).values.numpy(),
        mag.amax(1).numpy(),
        rms.median(1).values.numpy(),
        rms.amax(1).numpy(),
    )


@dataclass(frozen=True)
class Massive:
    """The largest |x| entering one norm for one sentence, and what the norm does to it."""

    layer: str
    token: int  # its position
    dim: int  # its feature
    value: float  # signed
    median: float  # the median |x| entering this norm (all tokens and features)
    rms: float  # that token's RMS: what the norm divides its every feature by
    rms_others: float  # the median RMS of the sentence's other tokens

    @property
    def ratio(self) -> float:
        """How many times the median |x| the scalar is."""
        return abs(self.value) / self.median

    @property
    def squeeze(self) -> float:
        """How many times more that token's other features are divided than a typical token's."""
        return self.rms / self.rms_others


def find(p: Peaks, layer: str) -> Massive:
    """The largest |x| entering `layer` in sentence `p`, over its tokens and features."""
    r = p.row(layer)
    t = int(np.argmax(p.top[r]))
    others = np.delete(p.rms[r], t)
    return Massive(
        layer,
        t,
        int(p.dim[r, t]),
        float(p.value[r, t]),
        float(p.median[r]),
        float(p.rms[r, t]),
        float(np.median(others)) if others.size else float("nan"),
    )


@dataclass(frozen=True)
class Intervention:
    """One sentence's mean next-token NLL (nats) as it is and under three edits of the
    stream entering `where.layer` (each at the massive scalar's token)."""

    where: Massive
    base: float
    zeroed: float  # the massive scalar set to 0
    mean_value: float  # the mean of that scalar over the other sentences
    replaced: float  # the scalar set to mean_value
    random_dim: int  # a random other feature of the same token
    random_zeroed: float  # that feature set to 0


def _nll(logits: torch.Tensor, ids: Sequence[Sequence[int]]) -> list[float]:
    """Each sentence's mean cross-entropy of its next tokens (its own positions only)."""
    out = []
    for b, row in enumerate(ids):
        target = torch.tensor(row[1:])
        out.append(float(F.cross_entropy(logits[b, : len(row) - 1].double(), target)))
    return out


def _setting(layer: str, cells: Sequence[tuple[int, int, float]]) -> Taps:
    """A pass whose stream entering `layer` has x[b, t, d] = v for each (t, d, v) of row b."""

    def edit(h: torch.Tensor) -> torch.Tensor:
        h = h.clone()
        for b, (t, d, v) in enumerate(cells):
            h[b, t, d] = v
        return h

    return Taps(edits={layer: edit})


def interventions(
    texts: Sequence[str],
    layer: str = smollm2.DEFAULT_LAYER,
    seed: int = 0,
    progress: Progress = None,
) -> tuple[Intervention, ...]:
    """Each sentence's NLL as it is and with its massive scalar (at `layer`) zeroed,
    replaced by its mean over the other sentences (at the same token and feature), or
    with a random other feature of the same token zeroed (`seed` picks it). Four passes.

    Raises:
        NotInstalled: the wheel is absent.
        ValueError: fewer than two sentences (no other sentence to average), an unknown
            layer, or a sentence of one token (nothing to predict).
    """
    texts = _check(texts, progress, layer)
    if len(texts) < 2:
        raise ValueError("replacing a value by its mean over the other sentences needs two")
    with smollm2.GATE.enter(progress):
        ids = smollm2.encode(texts)
        if min(map(len, ids)) < 2:
            raise ValueError("each sentence needs two tokens or more: one to predict")
        taps = Taps(catch=NORMS)
        base = _nll(smollm2.run(ids, taps), ids)
        found = [find(p, layer) for p in _peaks(texts, ids, taps)]
        x = taps.caught[layer][0]  # (B, T, C)
        means = [_mean_of_others(x, ids, b, m.token, m.dim) for b, m in enumerate(found)]
        rng = np.random.default_rng(seed)
        rand = [int(rng.choice(np.delete(np.arange(x.shape[-1]), m.dim))) for m in found]
        runs = [
            [(m.token, m.dim, 0.0) for m in found],
            [(m.token, m.dim, v) for m, v in zip(found, means, strict=True)],
            [(m.token, r, 0.0) for m, r in zip(found, rand, strict=True)],
        ]
        zeroed, replaced, random_zeroed = (
            _nll(smollm2.run(ids, _setting(layer, cells)), ids) for cells in runs
        )
    rows = zip(found, base, zeroed, means, replaced, rand, random_zeroed, strict=True)
    return tuple(Intervention(*row) for row in rows)


def _mean_of_others(x: torch.Tensor, ids: list[list[int]], b: int, t: int, d: int) -> float:
    """The mean of x[o, t, d] over the other sentences o long enough to have token t."""
    vals = [float(x[o, t, d]) for o in range(len(ids)) if o != b and t < len(ids[o])]
    if not vals:
        raise ValueError(f"no other sentence has a token at position {t} to average")
    return float(np.mean(vals))


__all__ = ["Depth", "Intervention", "Massive", "Peaks", "depth", "find", "interventions", "peaks"]
