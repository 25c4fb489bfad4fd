"""Pre-norm vs post-norm: where the norm sits in a residual block, and what that does."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import plotly.graph_objects as go
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from normviz import METHODS
from normviz import residual as rs
from normviz.figures import residual as figs
from ui import state

PAGE = "residual"  # the URL path: the widgets' ranges and choices are settings.PAGE_PARAMS[PAGE]
SAMPLES = 16  # sequences per batch (× 8 tokens): enough for stable statistics, quick on CPU
TRAIN_KEY = "res_train_request"  # the (config, lr, steps) last trained, kept across reruns


# ---- cached at the page edge, one model at a time, keyed on plain settings -------------


@st.cache_data(max_entries=256, show_spinner=False)
def _stats(
    cfg: rs.StackConfig, placement: str, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return rs.stack_statistics(cfg, placement, seed)


@st.cache_data(max_entries=48, show_spinner=False)
def _train(
    cfg: rs.StackConfig, placement: str, lr: float, steps: int, seed: int
) -> tuple[np.ndarray, int | None]:
    return rs.train_stack(cfg, placement, lr, steps, seed)


# Figures are cached as objects: building one costs more than drawing it.
@st.cache_resource(max_entries=16, show_spinner=False)
def _depth_fig(
    cfg: rs.StackConfig, n_seeds: int, presenter: bool, _profile: rs.InitProfile
) -> go.Figure:
    return figs.make_depth_figure(_profile, presenter)


def _bar(text: str) -> tuple[DeltaGenerator, Callable[[float], None]]:
    """A progress bar and the callback that moves it."""
    bar = st.progress(0.0, text)
    return bar, lambda f: bar.progress(min(1.0, f), text)


# ---- sections ----------------------------------------------------------------------------


def formulas() -> None:
    st.markdown(
        "A residual block adds a learned correction F to its input: the **skip path** "
        "carries x unchanged, the **branch** computes F(x). The norm can go at the start of "
        "the branch (**pre-norm**, GPT-2 and most large models) or after the sum "
        "(**post-norm**, the original transformer)."
    )
    c1, c2 = st.columns(2)
    with c1:
        st.markdown("**Pre-norm**")
        st.latex(rs.PRE_FORMULA)
        st.caption(
            "The skip path never meets a norm: the stream grows block by block, and a "
            "final norm before the output tames it."
        )
    with c2:
        st.markdown("**Post-norm**")
        st.latex(rs.POST_FORMULA)
        st.caption(
            "Every block renormalizes the stream, so activations stay bounded, but every "
            "path back to the input, the skip path included, passes through L norms."
        )


def _config(prefix: str) -> rs.StackConfig:
    """Width, norm and block widgets of one section (URL names `{prefix}width`, ...)."""
    c = st.columns([2, 2, 3])
    width = state.widget(c[0].select_slider, f"{prefix}width", "Width d", PAGE)
    norm = state.widget(
        c[1].radio,
        f"{prefix}norm",
        "Norm",
        PAGE,
        format_func=lambda k: METHODS[k].label,
        horizontal=True,
    )
    block = state.widget(
        c[2].radio, f"{prefix}block", "Block F", PAGE, format_func=lambda k: rs.BLOCKS[k]
    )
    return rs.StackConfig(width=int(width), norm=norm, block=block, samples=SAMPLES)


@st.fragment
def at_initialization() -> None:
    """Activation scale and gradients against depth, for the three placements (reruns alone)."""
    st.subheader("At initialization: scale and gradients, block by block")
    st.markdown(
        "Before any training, push one batch through a stack of L blocks and back. "
        "The left panel is the size of the residual stream after each block, the middle "
        "one the gradient that reaches each block's input. The right panel keeps only the "
        "skip paths (the branches' outputs count as constants): it shows what the identity "
        "path alone delivers."
    )
    base = _config("")
    c = st.columns(2)
    depth = state.widget(c[0].slider, "depth", "Depth L (blocks)", PAGE)
    n_seeds = state.widget(c[1].slider, "n_seeds", "Seeds", PAGE)
    cfg = rs.StackConfig(
        depth=int(depth), width=base.width, norm=base.norm, block=base.block, samples=SAMPLES
    )
    bar, tick = _bar("Measuring the untrained stacks…")
    profile = rs.init_profile(cfg, tuple(range(int(n_seeds))), progress=tick, compute=_stats)
    bar.empty()
    fig = _depth_fig(cfg, int(n_seeds), state.presenter(), profile)
    st.plotly_chart(fig, theme=None, key="res_depth_fig")
    for note in profile.notes():
        st.markdown(f"- {note}")
    st.caption(
        "Branch weights use He initialization so that each F roughly keeps the scale of its "
        "input; the same seed gives the three placements the same weights and data. "
        "Post-norm has no final norm, pre-norm has one, no normalization has none."
    )


def _training_settings() -> tuple[rs.StackConfig, float, int]:
    """The training widgets' current values, as the request `train_all` takes."""
    ss = st.session_state
    cfg = rs.StackConfig(
        depth=int(ss["tr_depth"]),
        width=int(ss["tr_width"]),
        norm=ss["tr_norm"],
        block=ss["tr_block"],
        samples=SAMPLES,
    )
    return cfg, float(ss["lr"]), int(ss["tr_steps"])


def _request_training() -> None:
    st.session_state[TRAIN_KEY] = _training_settings()


@st.fragment
def training() -> None:
    """A short full-batch Adam run of the three placements (on request, cached)."""
    st.subheader("A short training run")
    st.markdown(
        "The stacks learn to imitate a fixed random network (mean squared error, full-batch "
        "Adam, no warm-up). Try a deeper stack or a larger learning rate: post-norm tends to "
        "stall, no normalization blows up, pre-norm keeps learning."
    )
    base = _config("tr_")
    c = st.columns(3)
    depth = state.widget(c[0].slider, "tr_depth", "Depth L (blocks)", PAGE)
    lr = state.widget(
        c[1].select_slider, "lr", "Learning rate", PAGE, format_func=lambda v: f"{v:g}"
    )
    steps = state.widget(c[2].slider, "tr_steps", "Adam steps", PAGE, step=10)
    wanted = (
        rs.StackConfig(
            depth=int(depth), width=base.width, norm=base.norm, block=base.block, samples=SAMPLES
        ),
        float(lr),
        int(steps),
    )
    # a callback, not the button's return value: it runs once, before the script, so the
    # request survives any rerun of this run
    st.button(
        "Train the three stacks",
        icon=":material/play_arrow:",
        key="res_tr_go",
        on_click=_request_training,
    )
    request = st.session_state.get(TRAIN_KEY)
    if request is None:
        st.info("Press **Train** to run the three stacks.", icon=":material/info:")
        return
    cfg_r, lr_r, steps_r = request
    bar, tick = _bar("Training: pre-norm, post-norm, no normalization…")
    run = rs.train_all(cfg_r, lr_r, steps_r, progress=tick, train=_train)
    bar.empty()
    if request != wanted:
        st.caption("Showing the last run; press **Train** again for the settings above.")
    st.plotly_chart(figs.make_loss_figure(run, state.presenter()), theme=None, key="res_loss")
    for p in run.placements:
        st.markdown(f"- **{rs.PLACEMENT_LABELS[p]}**: {run.outcome(p)}")


# ---- the page ----------------------------------------------------------------------------

state.settings()  # runs this page through app.py on a first visit (shared sidebar)
st.title("Pre-norm vs post-norm")
state.page_params(PAGE)  # both sections' settings, from a link (warns about bad values)
formulas()
at_initialization()
training()
with st.expander("Why does the placement matter?", icon=":material/help:"):
    st.markdown(
        "Backpropagation multiplies the gradient by each layer's Jacobian on the way down. "
        "In pre-norm the skip path is a plain sum, so its Jacobian is the identity: the "
        "gradient of the output reaches every block intact, however deep the stack. In "
        "post-norm the sum is normalized, and a norm's Jacobian divides by the standard "
        "deviation of its input (larger than 1 once F adds to x), so the skip path shrinks "
        "the gradient a little at every block. Deep post-norm transformers therefore need "
        "learning-rate warm-up and care; pre-norm trains with less fuss, at the price of a "
        "stream whose scale grows with depth."
    )
