"""Two real checkpoints, two placements: the stream entering every norm, block by block.

Pre-norm SmolLM2-135M (61 RMSNorms, `x + F(RMSNorm(x))`) normalizes only what enters each
branch, so nothing rescales its residual stream: the values entering its norms grow with
depth (Xiong et al. 2020; "The Curse of Depth", Sun et al. 2025). Post-norm MiniLM (13
LayerNorms, `LayerNorm(x + F(x))`) normalizes the sum itself, so each block starts again
from unit scale and its LayerNorm inputs stay bounded. Both run on the same three
sentences; padding never enters a statistic. Loading the two models costs seconds the
first time, so the section waits for the student to ask (`rd_load`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
import torch

from normviz import style
from normviz.errors import NormConfigError
from normviz.figures.spec import Spec, trace
from normviz.knobs import Knob, Value
from normviz.sections import Progress, Section

KNOBS: tuple[Knob, ...] = (
    Knob("rd_load", "no", choices=("no", "yes"), label="Run the two pretrained models"),
    Knob("rd_first", "kept", choices=("kept", "dropped"), label="Each sentence's first token"),
    Knob("rd_scale", "log", choices=("log", "linear"), label="Vertical scale"),
)
INTRO = (
    "The two placements of the source texts on two real checkpoints: pre-norm SmolLM2 (61 "
    "RMSNorms) and post-norm MiniLM (13 LayerNorms), on the same three sentences. For every "
    "norm: the median and the largest |x| entering it, and what it divides each token by "
    "(RMSNorm: its RMS; LayerNorm: its standard deviation). The horizontal axis is the "
    "norm's relative depth, so the two models line up. The first run loads both models "
    "(several seconds, once per server)."
)
WAITING = "Choose *yes* above to run the two models."
PANELS = ("Median |x|", "Largest |x|", "Median divisor")
GROWTH = 10.0  # a curve whose last/first ratio passes this has grown


@dataclass(frozen=True)
class Curves:
    """One model's statistics entering each of its norms, in network order."""

    model: str
    placement: str
    names: tuple[str, ...]
    median: np.ndarray  # (L,)
    max: np.ndarray  # (L,)
    divisor: np.ndarray  # (L,) the median over tokens of what the norm divides by

    @property
    def depth(self) -> np.ndarray:
        return np.linspace(0.0, 1.0, len(self.names))

    # Norm 0 of each model sees the token embeddings before any block; from norm 1 on,
    # each sees a sum the blocks made (SmolLM2's blk.0.ffn_norm, MiniLM's first
    # attention-output LayerNorm: embeddings + the first attention's output).

    @property
    def growth(self) -> float:
        """The median |x| entering the last norm over norm 1's (the first block sum)."""
        return float(self.median[-1] / self.median[1])

    @property
    def spread(self) -> float:
        """The largest median |x| over the smallest, across norms 1 to L - 1."""
        return float(self.median[1:].max() / self.median[1:].min())


@dataclass(frozen=True, eq=False)
class PretrainedDepth:
    scale: str
    first: str  # "kept" or "dropped"
    curves: tuple[Curves, ...] = ()  # SmolLM2, then MiniLM; empty until asked


def texts() -> list[str]:
    from normviz.pretrained import smollm2

    return smollm2.DEFAULT_TEXT.splitlines()


def smollm2_curves(sentences: Sequence[str], skip_first: bool, progress: Progress) -> Curves:
    from normviz.pretrained import smollm2_massive
    from normviz.pretrained.smollm2_net import NORMS

    d = smollm2_massive.depth(sentences, progress, skip_first=skip_first)
    return Curves("SmolLM2-135M", "pre-norm", NORMS, d.median, d.max, d.rms_median)


def minilm_curves(sentences: Sequence[str], skip_first: bool) -> Curves:
    """MiniLM's LayerNorm inputs, pooled over the real tokens (`skip_first`: no [CLS])."""
    from normviz.pretrained import minilm

    batch = minilm.encode(sentences)
    real = batch["attention_mask"].bool().clone()  # (B, T): the padding never enters
    real[:, 0] &= not skip_first
    caught = minilm.forward(batch, minilm.LN_LAYERS)
    x = torch.stack([caught[n][0][real] for n in minilm.LN_LAYERS]).double()  # (L, tok, C)
    sigma = (x.var(-1, unbiased=False) + minilm.EPS).sqrt()  # what LayerNorm divides by
    mag = x.abs().flatten(1)
    return Curves(
        "MiniLM-L6",
        "post-norm",
        minilm.LN_LAYERS,
        mag.median(1).values.numpy(),
        mag.amax(1).numpy(),
        sigma.median(1).values.numpy(),
    )


def run(setup: object, knobs: Mapping[str, Value], progress: Progress) -> PretrainedDepth:
    scale, first = str(knobs["rd_scale"]), str(knobs["rd_first"])
    if knobs["rd_load"] != "yes":
        return PretrainedDepth(scale, first)
    skip, sentences = first == "dropped", texts()
    try:
        pre = smollm2_curves(sentences, skip, progress)
        progress(0.9, "Running MiniLM…")
        post = minilm_curves(sentences, skip)
    except ValueError as e:
        raise NormConfigError(str(e)) from e
    return PretrainedDepth(scale, first, (pre, post))


def figure(res: PretrainedDepth, presenter: bool) -> go.Figure | None:
    if not res.curves:
        return None
    fig = Spec.grid(1, 3, PANELS, horizontal_spacing=0.08)
    for i, c in enumerate(res.curves):
        for col, ys in enumerate((c.median, c.max, c.divisor), start=1):
            fig.add_trace(
                trace(
                    "scatter",
                    x=c.depth,
                    y=ys,
                    mode="lines+markers",
                    name=f"{c.model} ({c.placement})",
                    legendgroup=c.model,
                    showlegend=col == 1,
                    marker={"symbol": ("circle", "diamond")[i], "size": 6},
                    line={"color": style.PALETTE[i], "dash": ("solid", "dash")[i]},
                ),
                row=1,
                col=col,
            )
    fig.update_xaxes({"title": {"text": "relative depth"}, "range": [-0.03, 1.03]})
    fig.update_yaxes({"type": res.scale})
    fig.update_layout(legend={"orientation": "h", "y": -0.3})
    return style.apply(fig, presenter, height=400).figure()


def notes(res: PretrainedDepth) -> Sequence[str]:
    if not res.curves:
        return (WAITING,)
    pre, post = res.curves
    first = "without" if res.first == "dropped" else "with"
    out = [
        f"The first point of each curve is the token embeddings, before any block "
        f"({pre.model}: median |x| {pre.median[0]:.3g}; {post.model}: {post.median[0]:.3g}). "
        "From the next norm on, each sees a sum the blocks made.",
        f"**{pre.model}, {pre.placement}**: from there the median |x| entering its norms "
        f"goes from {pre.median[1]:.3g} to {pre.median[-1]:.3g} ({pre.growth:,.0f}×), and "
        f"the median RMS each RMSNorm divides by from {pre.divisor[1]:.3g} to "
        f"{pre.divisor[-1]:.3g}.",
        f"**{post.model}, {post.placement}**: the median |x| entering its "
        f"{len(post.names) - 1} block LayerNorms stays between {post.median[1:].min():.3g} "
        f"and {post.median[1:].max():.3g} ({post.spread:.2f}× apart), and the median σ each "
        f"divides by between {post.divisor[1:].min():.3g} and {post.divisor[1:].max():.3g}.",
    ]
    rms_growth = float(pre.divisor[-1] / pre.divisor[1])
    if pre.growth > GROWTH and post.spread < GROWTH and rms_growth > GROWTH:
        out.append(
            f"**Verdict** ({first} the first token): the pre-norm stream grows with depth, "
            f"{pre.growth:,.0f}× from the first block sum to the last, because only the "
            "branch inputs are normalized and every block adds to an unnormalized sum; the "
            f"RMS its norms divide by grows {rms_growth:,.0f}× to bring each branch input "
            "back to unit scale. The post-norm LayerNorms normalize the sum itself, so the "
            f"stream they see stays within {post.spread:.2f}×."
        )
    else:
        out.append(
            f"**Verdict** ({first} the first token): on these sentences the two placements "
            f"do not separate cleanly: growth {pre.growth:.1f}× (pre-norm) against a spread "
            f"of {post.spread:.2f}× (post-norm)."
        )
    top = int(np.argmax(pre.max))
    ratio = float(pre.max[top] / pre.median[top])
    if ratio > 1_000:
        out.append(
            f"SmolLM2's largest |x| ({pre.max[top]:,.0f}, entering `{pre.names[top]}`) is "
            f"{ratio:,.0f}× that norm's median: a massive activation (/distributions finds "
            "it and zeroes it)."
            + (" Drop the first token to see the rest." if res.first == "kept" else "")
        )
    return tuple(out)


SECTION = Section(
    "pretrained",
    "Two real checkpoints: pre-norm SmolLM2 and post-norm MiniLM",
    INTRO,
    run,
    knobs=KNOBS,
    figure=figure,
    notes=notes,
)
