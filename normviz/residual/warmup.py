"""Why post-norm needs warm-up: the gradients of the parameters near the output, at init.

Xiong et al. (2020) traced post-norm's need for learning-rate warm-up to the last
layers: at initialization the gradients of the parameters near the output are large
and do not shrink with depth in post-norm, while in pre-norm they shrink as depth
grows. This section measures it on the page's own stacks: the gradient norm of each
block's parameters for one batch, at several depths, for the two placements.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import plotly.graph_objects as go
import torch

from normviz import sources, style
from normviz.figures.spec import Spec
from normviz.knobs import Knob, Value
from normviz.residual.curves import finish_panels, median_traces
from normviz.residual.model import (
    PLACEMENT_LABELS,
    ResidualConfigError,
    Setup,
    StackConfig,
    build_stack,
    make_task,
    stack_knobs,
    task_loss,
)
from normviz.sections import Progress, Section
from normviz.text import direction

LABEL = "Why post-norm needs warm-up: gradients near the output"
DEPTHS: tuple[int, ...] = (6, 12, 24)
COMPARED: tuple[str, ...] = ("pre", "post")
MAX_SEEDS = 4
XIONG = sources.cite("xiong2020")
INTRO = (
    "Deep post-norm transformers are usually trained with learning-rate warm-up. "
    f"{XIONG} located the reason near the *output*: at initialization, how large are the "
    "gradients of the last blocks' parameters, and how does that change with depth? Below, "
    "one batch goes through untrained stacks of "
    f"{', '.join(str(d) for d in DEPTHS[:-1])} and {DEPTHS[-1]} blocks and back; each curve "
    "is the gradient norm of every block's parameters (its branch's weights and biases and "
    "its norm's γ, β), block by block."
)
CAUSE = (
    f"The cause, after {XIONG}: under simplifying assumptions they bound, at "
    "initialization, the gradient of the last layer's parameters (d the width, L the depth) "
    "by O(d·√(ln d)) in post-norm, with no L in it, and by O(d·√(ln d / L)) in pre-norm, "
    "smaller for deeper stacks. With a large learning rate, post-norm then takes large "
    "steps in its last layers from the first update on, and training can become unstable; "
    "warm-up starts with a small learning rate and raises it over the first steps. In "
    "their experiments pre-norm transformers trained well without warm-up."
)
STEADY = 1.25  # a change by less than this factor either way counts as "about the same"
KNOBS: tuple[Knob, ...] = (
    *stack_knobs("wu_"),
    Knob("wu_seeds", 3, lo=1, hi=MAX_SEEDS, label="Seeds"),
)


@dataclass(frozen=True)
class OutputGradients:
    """Per-block parameter gradient norms at initialization, for each depth.

    `norms[k]` belongs to `depths[k]` and is (placement, seed, block), blocks 1..L.
    """

    config: StackConfig  # width, norm, block and batch (its depth is unused)
    depths: tuple[int, ...]
    placements: tuple[str, ...]
    seeds: tuple[int, ...]
    norms: tuple[np.ndarray, ...]

    def last(self, placement: str, depth: int) -> float:
        """Median over seeds of the last block's gradient norm."""
        arr = self.norms[self.depths.index(depth)][self.placements.index(placement)]
        return float(np.median(arr[:, -1]))

    def change(self, placement: str) -> float:
        """The last block's gradient norm at the deepest stack / at the shallowest."""
        return self.last(placement, self.depths[-1]) / self.last(placement, self.depths[0])


def block_gradients(cfg: StackConfig, placement: str, seed: int) -> np.ndarray:
    """‖∂loss/∂θ_l‖ over all of block l's parameters, l = 1..L, for one untrained stack."""
    model = build_stack(cfg, placement, seed)
    x, y = make_task(cfg, seed)
    groups = [list(block.parameters()) for block in model.blocks]
    flat = [p for g in groups for p in g]
    grads = torch.autograd.grad(task_loss(model(x), y), flat)
    out, i = [], 0
    for g in groups:
        sq = sum(float(t.detach().double().square().sum()) for t in grads[i : i + len(g)])
        out.append(sq**0.5)
        i += len(g)
    return np.array(out)


def output_gradients(
    cfg: StackConfig,
    seeds: tuple[int, ...] = (0, 1, 2),
    depths: tuple[int, ...] = DEPTHS,
    placements: tuple[str, ...] = COMPARED,
    progress: Callable[[float], None] | None = None,
) -> OutputGradients:
    """block_gradients for every depth, placement and seed."""
    if not 1 <= len(seeds) <= MAX_SEEDS:
        raise ResidualConfigError(f"use 1 to {MAX_SEEDS} seeds, got {len(seeds)}")
    total = len(depths) * len(placements) * len(seeds)
    norms, done = [], 0
    for L in depths:
        c = replace(cfg, depth=L)
        c.check()
        arr = np.zeros((len(placements), len(seeds), L))
        for i, p in enumerate(placements):
            for j, s in enumerate(seeds):
                arr[i, j] = block_gradients(c, p, s)
                done += 1
                if progress is not None:
                    progress(done / total)
        norms.append(arr)
    return OutputGradients(cfg, tuple(depths), tuple(placements), tuple(seeds), tuple(norms))


def run(setup: Setup, knobs: Mapping[str, Value], progress: Progress) -> OutputGradients:
    """The knobs' stacks at every depth, seeds 0 .. wu_seeds − 1."""
    cfg = StackConfig(
        depth=DEPTHS[-1],
        width=int(knobs["wu_width"]),  # type: ignore[call-overload]
        norm=str(knobs["wu_norm"]),
        block=str(knobs["wu_block"]),
        tokens=setup.tokens,
        samples=setup.samples,
    )
    seeds = tuple(range(int(knobs["wu_seeds"])))  # type: ignore[call-overload]
    return output_gradients(
        cfg, seeds, progress=lambda f: progress(f, "Measuring gradients at initialization…")
    )


def figure(res: OutputGradients, presenter: bool = False) -> go.Figure:
    """One panel per depth: gradient norm of each block's parameters, block index on x (log y)."""
    fig = Spec.grid(
        1,
        len(res.depths),
        tuple(f"L = {L} blocks" for L in res.depths),
        shared_yaxes=True,
        horizontal_spacing=0.04,
    )
    for col, (L, arr) in enumerate(zip(res.depths, res.norms, strict=True), start=1):
        xs = list(range(1, L + 1))
        for i, p in enumerate(res.placements):
            for trace in median_traces(xs, arr[i], p, "block", legend=col == 1):
                fig.add_trace(trace, row=1, col=col)
    # one x title, under the middle panel: three copies of it would not fit side by side
    middle = (len(res.depths) + 1) // 2
    fig.update_xaxes({"title": {"text": "block l (L = nearest the output)"}}, row=1, col=middle)
    fig.update_yaxes(style.log_axis(*res.norms))
    fig.update_yaxes({"title": {"text": "‖gradient of block l's parameters‖"}}, row=1, col=1)
    cfg = res.config
    title = (
        f"At initialization, width {cfg.width}, {cfg.norm_label}:<br>"
        f"median of {len(res.seeds)} seed(s), band = range"
    )
    return finish_panels(fig, title, presenter, height=480)


def _trend(factor: float) -> str:
    """How a value changed by `factor`, in words."""
    verb = {-1: "shrinks", 1: "grows", 0: "stays about the same"}[direction(factor, STEADY)]
    return f"{verb} (×{factor:.2g})"


def notes(res: OutputGradients) -> Sequence[str]:
    """The last block's gradient at each depth, per placement, and the comparison; then why."""
    lo, hi = res.depths[0], res.depths[-1]
    out = []
    for p in res.placements:
        values = ", ".join(f"{res.last(p, L):.3g}" for L in res.depths)
        depths = ", ".join(str(L) for L in res.depths)
        out.append(
            f"- {PLACEMENT_LABELS[p].capitalize()}: the last block's gradient norm is "
            f"{values} at L = {depths}: from {lo} to {hi} blocks it {_trend(res.change(p))}."
        )
    if {"pre", "post"} <= set(res.placements):
        ratio = res.last("post", hi) / res.last("pre", hi)
        word = "larger" if ratio >= 1 else "smaller"
        size = ratio if ratio >= 1 else 1 / ratio
        out.append(
            f"- At L = {hi} the last block's gradient is {size:.2g}× {word} in post-norm "
            "than in pre-norm."
        )
    out.append(CAUSE)
    return tuple(out)


SECTION = Section("warmup", LABEL, INTRO, run, KNOBS, figure, notes=notes)
