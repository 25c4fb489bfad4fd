"""One number that holds a language model up: SmolLM2's massive activation, live.

On `data=smollm2` this section finds, for the sentences typed in `text=`, the largest
|x| entering each of the 61 RMSNorms, per token: from block 12 on, one feature of the
first token towers thousands of times over the median (Sun et al. 2024).
RMSNorm divides that token by its RMS, which the one scalar sets, so every other feature
of the token shrinks. Then the live test: the student predicts, and the section zeroes
the scalar, replaces it by its mean over the other sentences, or zeroes a random other
feature, and reports each sentence's next-token NLL. Every number comes from the passes
(`normviz.pretrained.smollm2_massive`); every sentence below is computed from them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch

from normviz import style
from normviz.distributions.setup import Setup
from normviz.errors import NormConfigError
from normviz.figures.spec import Spec, trace
from normviz.knobs import Knob, Value
from normviz.pretrained import RealInput
from normviz.sections import Progress, Section
from normviz.sources import cite

SOURCE = "smollm2"
MASSIVE_RATIO = 1_000.0  # a scalar this many times the median |x| counts as massive
GUESSES = {  # the guess knob's values: what zeroing the one scalar does to the NLL
    "wait": "I have not guessed yet",
    "same": "almost nothing (under 0.5 nats)",
    "worse": "a bit worse (0.5 to 3 nats)",
    "broken": "the model breaks (over 3 nats)",
}
BANDS = (0.5, 3.0)  # nats: the edges between the guesses' outcomes
KNOBS = (
    Knob(
        "guess",
        "wait",
        choices=tuple(GUESSES),
        label="Predict first: zeroing that one scalar changes the next-token loss by…",
    ),
)

INTRO = (
    "A trained language model's residual stream holds a few scalars thousands of times "
    f"larger than the rest, the *massive activations* of {cite('sun2024')}. "
    "The chart finds the largest |x| entering each of SmolLM2's 61 "
    "RMSNorms, for your sentences, and shows one token at the page's layer before and after "
    "RMSNorm. Then predict: what happens to the next-token loss if that one number is set "
    "to zero? The section then runs the model three more times and measures it."
)


def choice_label(value: str) -> str:
    return GUESSES.get(value, value)


def applies(source: object) -> bool:
    """Does this section run on `source` (SmolLM2's stream, not generated data)?"""
    return isinstance(source, RealInput) and source.source == SOURCE


@dataclass(frozen=True, eq=False)
class MassiveView:
    """What the section found: per sentence, the largest scalar at the page's layer and
    (once the student has guessed) the NLL under each edit. Empty off SmolLM2."""

    layer: str = ""
    label: str = ""
    guess: str = "wait"
    tokens: tuple[tuple[str, ...], ...] = ()  # per sentence
    found: tuple = ()  # per sentence, smollm2_massive.Massive
    depth_top: np.ndarray | None = None  # (61,) sentence 0: the largest |x| of its token 0
    depth_rest: np.ndarray | None = None  # (61,) sentence 0: the largest over its other tokens
    depth_median: np.ndarray | None = None  # (61,) sentence 0: the median |x|
    born: int = -1  # the first norm where token 0 of every sentence is massive (-1: none)
    massive_norms: int = 0  # how many norms it is massive at, in every sentence
    x_top: np.ndarray | None = None  # (C,) the massive token's features entering the norm
    y_top: np.ndarray | None = None  # (C,) ... and out of it (RMSNorm with its weight)
    y_typical: np.ndarray | None = None  # (C,) a typical token's output (median RMS)
    typical: int = -1  # that token's position
    runs: tuple = ()  # per sentence, smollm2_massive.Intervention (after a guess)
    why_not: str = ""  # why the intervention did not run (one sentence, ...)

    @property
    def ran(self) -> bool:
        return bool(self.found)


def run(setup: Setup, knobs: Mapping[str, Value], progress: Progress) -> MassiveView:
    if not applies(setup.source):
        return MassiveView()
    from normviz.pretrained import minilm, smollm2, smollm2_massive
    from normviz.pretrained.smollm2_net import NORMS

    src: RealInput = setup.source  # type: ignore[assignment]
    texts = minilm.split_text(src.text)  # the registry's sentences (same limits)
    layer, guess = src.layer or smollm2.DEFAULT_LAYER, str(knobs["guess"])
    try:
        peaks = smollm2_massive.peaks(texts, progress)
        x, _ = smollm2.hidden_states(texts, layer, progress)  # (B, T, C)
    except ValueError as e:
        raise NormConfigError(str(e)) from e
    found = tuple(smollm2_massive.find(p, layer) for p in peaks)
    p0, m0 = peaks[0], found[0]
    massive = np.array([p.top[:, 0] >= MASSIVE_RATIO * p.median for p in peaks]).all(0)
    y = rms_output(x[0], layer)  # (T, C) sentence 0, through the model's own norm
    others = [t for t in range(y.shape[0]) if t != m0.token]
    typical = -1  # the other token of median RMS: a typical token
    if others:
        typical = others[int(np.argsort(p0.rms[p0.row(layer), others])[len(others) // 2])]
    runs, why = (), ""
    if guess != "wait":
        try:
            runs = smollm2_massive.interventions(texts, layer, progress=progress)
        except ValueError as e:
            why = str(e)
    return MassiveView(
        layer,
        smollm2.layer_label(layer),
        guess,
        tuple(p.tokens for p in peaks),
        found,
        p0.top[:, 0],
        p0.top[:, 1:].max(1) if p0.top.shape[1] > 1 else np.zeros(len(NORMS)),
        p0.median,
        int(np.argmax(massive)) if massive.any() else -1,
        int(massive.sum()),
        x[0, m0.token].astype(np.float64),
        y[m0.token],
        y[typical] if typical >= 0 else None,
        typical,
        runs,
        why,
    )


def rms_output(x: np.ndarray, layer: str) -> np.ndarray:
    """(T, C) → the model's own RMSNorm of it (its weight and ε), in float64."""
    from normviz.pretrained import smollm2

    norm = smollm2.model().norm(layer)
    w = norm.weight.detach().double()
    out = torch.nn.functional.rms_norm(torch.from_numpy(x).double(), (x.shape[-1],), w, norm.eps)
    return out.numpy()


# ---- the figure ----------------------------------------------------------------------------


def figure(res: MassiveView, presenter: bool) -> go.Figure | None:
    if not res.ran:
        return None
    from normviz.pretrained.smollm2_net import NORMS

    m = res.found[0]
    fig = Spec.grid(
        1,
        2,
        # two short lines each: half a phone's column holds about 18 characters
        (
            "largest |x| entering<br>each norm (sentence 1)",
            f"token {m.token}'s features<br>at {res.layer}",
        ),
        horizontal_spacing=0.12,
    )
    xs = np.arange(len(NORMS))
    for i, (name, ys, sym) in enumerate(
        (
            ("token 0", res.depth_top, "circle"),
            ("largest of the other tokens", res.depth_rest, "diamond"),
            ("median |x|", res.depth_median, "x"),
        )
    ):
        fig.add_trace(
            trace(
                "scatter",
                x=xs,
                y=np.maximum(ys, 1e-6),
                text=list(NORMS),  # the norm's name on hover (the axis gives its number)
                hovertemplate="%{x} = %{text}<br>|x| %{y:.3g}",
                mode="lines+markers",
                name=name,
                marker={"symbol": sym, "size": 6},
                line={"color": style.PALETTE[i]},
            ),
            row=1,
            col=1,
        )
    feats = np.arange(res.x_top.size)
    panel = [
        ("before the norm: |x|", np.abs(res.x_top), "circle", 0),
        ("after RMSNorm: this token", np.abs(res.y_top), "square", 5),
    ]
    if res.y_typical is not None:
        panel.append(
            (f"after RMSNorm: token {res.typical} (typical)", np.abs(res.y_typical), "diamond", 2)
        )
    for name, ys, sym, c in panel:
        fig.add_trace(
            trace(
                "scatter",
                x=feats,
                y=np.maximum(ys, 1e-6),
                mode="markers",
                name=name,
                marker={"symbol": sym, "size": 5, "color": style.PALETTE[c]},
            ),
            row=1,
            col=2,
        )
    # short axis titles (a phone's half column): norm 0 is blk.0.attn_norm, 60 output_norm
    # (each point's hover names its norm)
    fig.update_xaxes({"title": {"text": "norm (0 … 60)"}}, row=1, col=1)
    fig.update_xaxes({"title": {"text": "feature"}}, row=1, col=2)
    # each panel's log axis labelled at its own decades
    left = (res.depth_top, res.depth_rest, res.depth_median)
    fig.update_yaxes(
        style.log_axis(*(np.maximum(v, 1e-6) for v in left)) | {"title": {"text": "|x|"}},
        row=1,
        col=1,
    )
    right = (np.maximum(ys, 1e-6) for _name, ys, _sym, _c in panel)
    fig.update_yaxes(style.log_axis(*right), row=1, col=2)
    fig.update_layout(legend=style.LEGEND_BELOW)
    style.apply(fig, presenter, height=560)
    fig.update_annotations(font={"size": style.font_size(presenter)})  # the panel titles
    return style.top_room(fig, presenter, below=2).figure()


# ---- the table and the sentences ---------------------------------------------------------


def table(res: MassiveView) -> pd.DataFrame | None:
    if not res.ran:
        return None
    rows = []
    for i, m in enumerate(res.found):
        row = {
            "sentence": i + 1,
            "token": res.tokens[i][m.token],
            "position": m.token,
            "dimension": m.dim,
            "value": m.value,
            "× median |x|": m.ratio,
            "token's RMS": m.rms,
            "others' RMS (median)": m.rms_others,
        }
        if res.runs:
            r = res.runs[i]
            row |= {
                "NLL": r.base,
                "zeroed": r.zeroed,
                "mean put back": r.replaced,
                "random dim": r.random_dim,
                "random dim zeroed": r.random_zeroed,
            }
        rows.append(row)
    return pd.DataFrame(rows).set_index("sentence")


def outcome(delta: float) -> str:
    """Which guess a change of the NLL (nats) matches."""
    return "same" if abs(delta) < BANDS[0] else "worse" if delta < BANDS[1] else "broken"


def _span(values: Sequence[float], fmt: str) -> str:
    lo, hi = min(values), max(values)
    return (
        format(lo, fmt)
        if format(lo, fmt) == format(hi, fmt)
        else (f"{format(lo, fmt)} to {format(hi, fmt)}")
    )


def notes(res: MassiveView) -> Sequence[str]:
    if not res.ran:
        return (
            "This section runs on SmolLM2's residual stream: choose the data source "
            "*SmolLM2 (real text, RMSNorm)* in the sidebar.",
        )
    f, n = res.found, len(res.found)
    where = {(m.token, m.dim) for m in f}
    massive = all(m.ratio >= MASSIVE_RATIO for m in f)
    each = "In every sentence" if n > 1 else "In your sentence"
    if len(where) == 1:
        ((t, d),) = where
        spot = f"dimension **{d}** of token {t}"
    else:
        spot = "; ".join(
            f"sentence {i + 1}: dimension {m.dim} of token {m.token}" for i, m in enumerate(f)
        )
    out = [
        f"{each} the largest |x| entering {res.label} is {spot}: "
        f"{_span([abs(m.value) for m in f], ',.0f')}, that is "
        f"{_span([m.ratio for m in f], ',.0f')}× the median |x|."
    ]
    if res.born >= 0:
        from normviz.pretrained.smollm2_net import NORMS

        out.append(
            f"Token 0 is over {MASSIVE_RATIO:,.0f}× the median |x| in every sentence at "
            f"{res.massive_norms} of the {len(NORMS)} norms, the first being norm {res.born} "
            f"(`{NORMS[res.born]}`); at none before it."
        )
    if not massive:
        out.append(
            f"At this layer that is under {MASSIVE_RATIO:,.0f}× the median in some "
            "sentence: not a massive activation. Pick a later layer to see one."
        )
    m = f[0]
    root = abs(m.value) / np.sqrt(res.x_top.size)
    head = (
        f"RMSNorm divides a token by its RMS. For token {m.token} of sentence 1 that is "
        f"{m.rms:,.1f} (the one scalar alone gives |x|/√{res.x_top.size} = {root:,.1f})"
    )
    if np.isfinite(m.rms_others):
        head += (
            f"; the other tokens' median RMS is {m.rms_others:,.2f}. So every other feature "
            f"of this token is divided {m.squeeze:,.0f} times more than a typical token's"
        )
    out.append(head + ".")
    return tuple(out) + tuple(_reveal(res))


def _reveal(res: MassiveView) -> list[str]:
    if res.guess == "wait":
        return ["**Predict first** (the radio above): then the model runs three more times."]
    if not res.runs:
        return [f"The intervention cannot run: {res.why_not}."]
    r = res.runs
    mean = lambda a: float(np.mean(a))  # noqa: E731
    base, zero = mean([x.base for x in r]), mean([x.zeroed for x in r])
    rep, rnd = mean([x.replaced for x in r]), mean([x.random_zeroed for x in r])
    got = outcome(zero - base)
    verdict = (
        "Your prediction matches"
        if got == res.guess
        else (f"Your prediction was *{GUESSES[res.guess]}*; the measurement says *{GUESSES[got]}*")
    )
    return [
        f"Mean next-token NLL over the {len(r)} sentences: {base:.2f} nats as it is; "
        f"**{zero:.2f}** with that one scalar set to 0 ({zero - base:+.2f}); {rep:.2f} with "
        f"it set to its mean over the other sentences ({rep - base:+.2f}); {rnd:.2f} with a "
        f"random other feature of the same token set to 0 ({rnd - base:+.2f}).",
        f"{verdict}. {_lesson(zero - base, rep - base, rnd - base)}",
    ]


def _lesson(zeroed: float, replaced: float, random: float) -> str:
    """What the three changes say together (each read through `outcome`)."""
    if outcome(zeroed) == "broken" and outcome(replaced) == outcome(random) == "same":
        return (
            "The model needs that scalar to be large, not to carry this sentence's "
            "information: another sentence's value serves, and losing any other single "
            "feature of the token costs almost nothing."
        )
    if outcome(zeroed) == "same":
        return "Here that scalar is not load-bearing: zeroing it costs almost nothing."
    return "Zeroing that scalar costs more than zeroing a random feature of the same token."


def alt(res: MassiveView) -> Sequence[str]:
    if not res.ran:
        return ()
    m = res.found[0]
    return (
        f"Left: the largest |x| entering each of 61 norms for sentence 1, log scale: token 0 "
        f"peaks at {res.depth_top.max():,.0f}, the other tokens at {res.depth_rest.max():,.1f}, "
        f"the median |x| rises from {res.depth_median[0]:.3g} to {res.depth_median.max():.3g}.",
        f"Right: token {m.token}'s {res.x_top.size} features at {res.layer}: dimension {m.dim} "
        f"at {abs(m.value):,.0f} before the norm; after RMSNorm its other features are at most "
        f"{np.delete(np.abs(res.y_top), m.dim).max():.3g}.",
    )


SECTION = Section(
    "massive",
    "One number that holds a language model up",
    INTRO,
    run,
    knobs=KNOBS,
    figure=figure,
    table=table,
    notes=notes,
    alt=alt,
)
