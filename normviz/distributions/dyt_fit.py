"""Does DyT fit here? SmolLM2's RMSNorm, input against output, fitted by s·tanh(α·x).

Dynamic Tanh (Zhu et al. 2025) replaces a norm by an element-wise `γ·tanh(α·x) + β`,
because the input-output scatter of a trained transformer's LayerNorm looks like a tanh:
linear for most tokens, squashed for the few large values. This section fits one
`s·tanh(α·x)` to every (input, output) pair of each of SmolLM2's 61 RMSNorms (the output
before the norm's weight, `x / RMS(token)`), for the page's sentences, by least squares,
and reports R². Where it fails, the numbers say why: a token whose RMS is set by one
massive scalar has all its features divided by hundreds, so its points lie on a far
flatter line than the other tokens', and no single curve through the origin fits both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
import torch
from scipy.optimize import minimize_scalar
from torch.nn import functional as F

from normviz import style
from normviz.distributions.massive import applies
from normviz.distributions.setup import Setup
from normviz.errors import NormConfigError
from normviz.figures.spec import Spec, trace
from normviz.knobs import Value
from normviz.sections import Progress, Section

ALPHAS = np.geomspace(1e-4, 1e2, 37)  # the grid α is searched on before refining
OUTLIER = 10.0  # a token whose RMS is this many times the median token's is an outlier
GOOD = 0.9  # an R² at or above this counts as a good fit
MAX_POINTS = 3000  # points drawn in the scatter (every outlier token's among them)

INTRO = (
    "DyT replaces a norm by an element-wise s·tanh(α·x), because a trained LayerNorm's "
    "input-output scatter often looks like a tanh. Here each of SmolLM2's 61 RMSNorms gets "
    "the best-fitting s·tanh(α·x) (least squares, over every token and feature of your "
    "sentences; the output taken before the norm's weight), and its R². The scatter is the "
    "page's layer."
)


def fit_tanh(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """The least-squares (s, α) of y ≈ s·tanh(α·x), and its R² (1 − SSres/SStot).

    For a fixed α the best s is closed-form; α is searched on a log grid, then refined
    by Brent's bounded search in log α between the best grid point's neighbours.
    """
    x, y = np.asarray(x, np.float64).ravel(), np.asarray(y, np.float64).ravel()

    def sse(log_a: float) -> tuple[float, float]:
        t = np.tanh(np.exp(log_a) * x)
        tt = float((t * t).sum())  # sums, not BLAS dot products: no thread pool spin-up
        s = float((t * y).sum()) / tt if tt > 0 else 0.0
        return float(((y - s * t) ** 2).sum()), s

    logs = np.log(ALPHAS)
    t = np.tanh(ALPHAS[:, None] * x)  # (grid, points): every grid point at once
    tt = (t * t).sum(1)
    s_all = np.divide((t * y).sum(1), tt, out=np.zeros_like(tt), where=tt > 0)
    i = int(np.argmin(((y - s_all[:, None] * t) ** 2).sum(1)))
    lo, hi = logs[max(i - 1, 0)], logs[min(i + 1, len(logs) - 1)]
    found = minimize_scalar(
        lambda a: sse(a)[0], bounds=(lo, hi), method="bounded", options={"xatol": 1e-5}
    )
    best = float(found.x) if found.fun <= sse(logs[i])[0] else float(logs[i])
    err, s = sse(best)
    total = float(((y - y.mean()) ** 2).sum())
    return s, float(np.exp(best)), 1.0 - err / total if total > 0 else 1.0


@dataclass(frozen=True, eq=False)
class DytFit:
    """Per norm: the fit on every token, and on the non-outlier tokens alone."""

    layer: str = ""
    names: tuple[str, ...] = ()
    r2: np.ndarray | None = None  # (61,)
    r2_rest: np.ndarray | None = None  # (61,) the outlier tokens left out
    outliers: np.ndarray | None = None  # (61,) how many outlier tokens
    s: float = 0.0  # the page's layer's fit
    alpha: float = 0.0
    x: np.ndarray | None = None  # the scatter's points at the page's layer (subsampled)
    y: np.ndarray | None = None
    big: np.ndarray | None = None  # per point: is it an outlier token's?
    slopes: tuple[float, float] = (0.0, 0.0)  # 1/RMS: an outlier token's, a median token's

    @property
    def ran(self) -> bool:
        return bool(self.names)


def run(setup: Setup, knobs: Mapping[str, Value], progress: Progress) -> DytFit:
    if not applies(setup.source):
        return DytFit()
    from normviz.pretrained import minilm, smollm2, smollm2_massive
    from normviz.pretrained.smollm2_net import NORMS

    src = setup.source
    texts = [t for t in minilm.split_text(src.text) if t.strip()]  # type: ignore[union-attr]
    layer = src.layer or smollm2.DEFAULT_LAYER  # type: ignore[union-attr]
    if not texts:
        raise NormConfigError("no sentence to run: type at least one")
    smollm2.load(progress)
    ids, taps = smollm2_massive.catch_norms(texts, progress)
    real = smollm2_massive.own_tokens(ids)  # the padding never enters
    r2, rest, count, page = [], [], [], {}
    for i, name in enumerate(NORMS):
        progress(i / len(NORMS), f"Fitting s·tanh(α·x) to {name}")
        x = taps.caught[name][0][real].double()  # (tokens, C)
        u = F.rms_norm(x, (x.shape[-1],), eps=smollm2.config().eps)  # x / RMS, no weight
        rms = (x / u)[:, 0].abs()  # what each token is divided by
        big = rms > OUTLIER * rms.median()
        r2.append(fit_tanh(x.numpy(), u.numpy())[2])
        rest.append(fit_tanh(x[~big].numpy(), u[~big].numpy())[2] if big.any() else r2[-1])
        count.append(int(big.sum()))
        if name == layer:
            page = {"x": x, "u": u, "big": big, "rms": rms}
    s, alpha, _ = fit_tanh(page["x"].numpy(), page["u"].numpy())
    px, pu, pbig = _points(page["x"], page["u"], page["big"])
    small = page["rms"][~page["big"]]
    slopes = (
        1 / float(page["rms"][page["big"]].max()) if page["big"].any() else 0.0,
        1 / float(small.median()) if small.numel() else 0.0,
    )
    return DytFit(
        layer,
        NORMS,
        np.array(r2),
        np.array(rest),
        np.array(count),
        s,
        alpha,
        px,
        pu,
        pbig,
        slopes,
    )


def _points(x: torch.Tensor, u: torch.Tensor, big: torch.Tensor) -> tuple[np.ndarray, ...]:
    """At most MAX_POINTS (input, output) pairs: every outlier token's, then an even
    stride through the rest."""
    flag = big[:, None].expand_as(x).reshape(-1).numpy()
    xs, us = x.reshape(-1).numpy(), u.reshape(-1).numpy()
    keep = np.flatnonzero(flag)[: MAX_POINTS // 2]
    rest = np.flatnonzero(~flag)
    rest = rest[:: max(1, len(rest) // (MAX_POINTS - len(keep)))][: MAX_POINTS - len(keep)]
    idx = np.concatenate([keep, rest])
    return xs[idx], us[idx], flag[idx]


def figure(res: DytFit, presenter: bool) -> go.Figure | None:
    if not res.ran:
        return None
    fig = Spec.grid(1, 2, (f"{res.layer}: input vs x/RMS", "R² of the best s·tanh(α·x)"))
    for flag, name, sym, c in ((False, "tokens", "circle", 0), (True, "outlier tokens", "x", 5)):
        m = res.big == flag
        if m.any():
            mk = {"symbol": sym, "size": 5, "color": style.PALETTE[c]}
            pts = trace("scatter", x=res.x[m], y=res.y[m], mode="markers", name=name, marker=mk)
            fig.add_trace(pts, row=1, col=1)
    grid = np.linspace(res.x.min(), res.x.max(), 200)
    curve = trace(
        "scatter",
        x=grid,
        y=res.s * np.tanh(res.alpha * grid),
        mode="lines",
        name="best s·tanh(α·x)",
        line={"color": style.PALETTE[7]},
    )
    fig.add_trace(curve, row=1, col=1)
    k = np.arange(len(res.names))
    for ys, name, sym, c in (
        (res.r2, "every token", "circle", 1),
        (res.r2_rest, "outlier tokens left out", "diamond", 2),
    ):
        mk = {"symbol": sym, "size": 6, "color": style.PALETTE[c]}
        fig.add_trace(
            trace("scatter", x=k, y=ys, mode="lines+markers", name=name, marker=mk), row=1, col=2
        )
    fig.update_xaxes({"title": {"text": "x entering the norm"}}, row=1, col=1)
    fig.update_yaxes({"title": {"text": "x / RMS(token)"}}, row=1, col=1)
    fig.update_xaxes({"title": {"text": "norm (0 … 60)"}}, row=1, col=2)
    fig.update_yaxes({"range": [min(0.0, float(res.r2.min())) - 0.05, 1.05]}, row=1, col=2)
    fig.update_layout(legend={"orientation": "h", "y": -0.3})
    return style.apply(fig, presenter, height=420).figure()


def notes(res: DytFit) -> Sequence[str]:
    if not res.ran:
        return (
            "This section runs on SmolLM2's residual stream: choose the data source "
            "*SmolLM2 (real text, RMSNorm)* in the sidebar.",
        )
    i = res.names.index(res.layer)
    good = int((res.r2 >= GOOD).sum())
    worst = int(np.argmin(res.r2))
    out = [
        f"At {res.layer} the best fit is s = {res.s:.3g}, α = {res.alpha:.3g}, R² = "
        f"{res.r2[i]:.2f}. Over the 61 norms R² runs from {res.r2.min():.2f} "
        f"(`{res.names[worst]}`) to {res.r2.max():.2f}; {good} of 61 reach {GOOD:g}.",
    ]
    bad = (res.r2 < GOOD) & (res.outliers > 0)
    if bad.any():
        gain = res.r2_rest[bad] - res.r2[bad]
        why = (
            " Why: each token is divided by its own RMS, so each token's points lie on a "
            "line through the origin of slope 1/RMS, and one tanh can follow only one such "
            "slope near zero."
            if gain.min() > 0
            else ""
        )
        out.append(
            f"In the {int(bad.sum())} norms that fit under {GOOD:g} and hold an outlier token "
            f"(RMS over {OUTLIER:g}× the median token's), leaving those tokens out changes R² "
            f"by {gain.min():+.2f} to {gain.max():+.2f}.{why}"
        )
    if res.outliers[i] and res.slopes[0] > 0:
        out.append(
            f"At {res.layer}: the outlier token's slope is 1/{1 / res.slopes[0]:,.0f}, a median "
            f"token's 1/{1 / res.slopes[1]:,.2f}: RMSNorm squeezes every feature of that token "
            f"{res.slopes[1] / res.slopes[0]:,.0f}× more toward 0, because of its other "
            "features, which no element-wise function of x can do."
        )
    return tuple(out)


SECTION = Section(
    "dyt-fit",
    "Does DyT fit here? s·tanh(α·x) against RMSNorm",
    INTRO,
    run,
    figure=figure,
    notes=notes,
)
