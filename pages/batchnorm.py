"""BatchNorm lab: training vs evaluation, tiny batches, running statistics (/batchnorm)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from normviz import METHODS, NormConfigError, bnlab, bnmodel
from normviz.figures import batchnorm as figs
from ui import params as ns
from ui import state

PAGE = "batchnorm"
# URL value of `sim` -> tab label (the choices are declared in settings.PAGE_PARAMS)
SECTIONS: dict[str, str] = {
    "running": "Running stats",
    "bessel": "Biased vs unbiased",
    "batch-size": "Batch size",
    "shift": "Shift",
    "order": "Sorted data",
    "accumulation": "Accumulation",
    "sync": "SyncBN",
    "freeze": "Freezing",
    "checkpoint": "Checkpoints",
    "model": "Real model",
}
TAB_KEY = "bn_tab"
RULE_KEY = "_bn_momentum_rule"  # which convention the momentum number is written in
CONVENTION_LABELS = {
    "pytorch": "PyTorch (m)",
    "keras": "Keras (momentum)",
    "cumulative": "Cumulative (momentum=None)",
}


# ---- cached at the page edge, keyed on plain settings --------------------------------
# Each long computation draws its own progress bar inside the cached function, so a
# cache hit replays nothing but an empty placeholder.


@st.cache_data(max_entries=16, show_spinner=False)
def _trace(setup: bnlab.LabSetup) -> bnlab.RunningTrace:
    """Simulation 1, with a progress bar while it runs."""
    bar = st.progress(0.0, text="Feeding the training batches through BatchNorm…")
    res = bnlab.running_trace(setup, bar.progress)
    bar.empty()
    return res


@st.cache_data(max_entries=4, show_spinner=False)
def _bessel(seed: int) -> bnlab.BesselResult:
    """Simulation 2's averages (independent of the lab's batches)."""
    return bnlab.bessel(seed)


@st.cache_data(max_entries=16, show_spinner=False)
def _one_value(setup: bnlab.LabSetup) -> bnlab.OneValue:
    """A single value per channel, refused in training, evaluated."""
    return bnlab.one_value(setup, _trace(setup).final)


@st.cache_data(max_entries=8, show_spinner=False)
def _gap(setup: bnlab.LabSetup) -> bnlab.GapSweep:
    """Simulation 3, with a progress bar while it runs."""
    bar = st.progress(0.0, text="Training running statistics at every batch size…")
    res = bnlab.gap_sweep(setup, progress=bar.progress)
    bar.empty()
    return res


@st.cache_data(max_entries=32, show_spinner=False)
def _shift(setup: bnlab.LabSetup, shift: float, scale: float, groups: int) -> bnlab.ShiftResult:
    """Simulation 4 with the running statistics of simulation 1."""
    return bnlab.shift_sweep(setup, _trace(setup).final, shift, scale, groups)


@st.cache_data(max_entries=8, show_spinner=False)
def _order(setup: bnlab.LabSetup) -> bnlab.OrderResult:
    """Simulation 5, with a progress bar while it runs."""
    bar = st.progress(0.0, text="Feeding sorted and shuffled batches…")
    res = bnlab.order_demo(setup, bar.progress)
    bar.empty()
    return res


@st.cache_data(max_entries=16, show_spinner=False)
def _accum(setup: bnlab.LabSetup, k: int) -> bnlab.AccumResult:
    """Simulation 6, with a progress bar while it runs."""
    bar = st.progress(0.0, text="Feeding micro-batches and full batches…")
    res = bnlab.accumulation(setup, k, bar.progress)
    bar.empty()
    return res


@st.cache_data(max_entries=16, show_spinner=False)
def _sync(setup: bnlab.LabSetup, devices: int) -> bnlab.SyncResult:
    """Simulation 7, with a progress bar while it runs."""
    bar = st.progress(0.0, text="All-reducing the devices' sums…")
    res = bnlab.sync_demo(setup, devices, bar.progress)
    bar.empty()
    return res


@st.cache_data(max_entries=8, show_spinner="Running real optimizer steps…")
def _freeze(setup: bnlab.LabSetup) -> bnlab.FreezeResult:
    """Simulation 8 (real modules, real optimizer steps)."""
    return bnlab.freeze_demo(setup)


@st.cache_data(max_entries=8, show_spinner="Training a real nn.BatchNorm and saving it…")
def _checkpoint(setup: bnlab.LabSetup) -> bnlab.CheckpointResult:
    """Simulation 9 (a real module, saved and reloaded)."""
    return bnlab.checkpoint_demo(setup)


@st.cache_data(max_entries=4, show_spinner=False)
def _trained(cfg: bnmodel.ModelConfig) -> bnmodel.Trained:
    """Simulation 10's networks, with a progress bar while they train."""
    bar = st.progress(0.0, text="Training the small networks…")
    res = bnmodel.train_all(cfg, lambda f, text: bar.progress(f, text=text))
    bar.empty()
    return res


@st.cache_data(max_entries=32, show_spinner=False)
def _report(cfg: bnmodel.ModelConfig, shift: float, scale: float) -> bnmodel.ModelReport:
    """Simulation 10's accuracies for one test-data shift."""
    return bnmodel.evaluate(_trained(cfg), shift, scale)


# Figures are cached too: building one costs ~0.2 s of Plotly validation, a cache hit
# ~15 ms. Each is keyed on the plain settings its result is cached on.
FIGURES: dict[str, Callable[[Any, Any, bool], go.Figure]] = {
    "running": lambda setup, c, p: figs.make_running_figure(_trace(setup), c, p),
    "bessel": lambda setup, _, p: figs.make_bessel_figure(_bessel(setup.seed), setup.n, p),
    "gap": lambda setup, _, p: figs.make_gap_figure(_gap(setup), setup.batch_size, p),
    "shift": lambda setup, args, p: figs.make_shift_figure(_shift(setup, *args), p),
    "order": lambda setup, c, p: figs.make_order_figure(_order(setup), c, p),
    "accumulation": lambda setup, k, p: figs.make_accumulation_figure(_accum(setup, k), p),
    "sync": lambda setup, k, p: figs.make_sync_figure(_sync(setup, k), p),
    "freeze": lambda setup, _, p: figs.make_freeze_figure(_freeze(setup), p),
    "checkpoint": lambda setup, _, p: figs.make_checkpoint_figure(_checkpoint(setup), p),
    "model": lambda cfg, args, p: figs.make_model_figure(_report(cfg, *args), p),
}


@st.cache_data(max_entries=64, show_spinner=False)
def _figure(kind: str, key: object, extra: object, presenter: bool) -> go.Figure:
    """Figure `kind` for these plain settings."""
    return FIGURES[kind](key, extra, presenter)


# ---- small helpers ----------------------------------------------------------------------


def _table(rows: list[dict], fmt: str = "%.4g") -> None:
    """A small read-only table; numbers shown with `fmt`."""
    df = pd.DataFrame(rows)
    config = {
        c: st.column_config.NumberColumn(format=fmt)
        for c in df.columns
        if pd.api.types.is_float_dtype(df[c])
    }
    st.dataframe(df, hide_index=True, column_config=config, width="content")


def _plot(kind: str, key: object, extra: object, presenter: bool) -> None:
    """Draw the cached figure `kind` for these settings."""
    fig = _figure(kind, key, extra, presenter)
    st.plotly_chart(fig, key=f"bn_{kind}_fig", config={"displaylogo": False})


def _channel_picker(C: int, key: str) -> int:
    """Which channel the step plots follow (not part of the URL: it only changes the view)."""
    if st.session_state.get(key, 0) >= C:
        st.session_state[key] = 0
    col, _ = st.columns([1, 4])
    return int(col.number_input("Channel to plot", min_value=0, max_value=C - 1, step=1, key=key))


def _memory_text(momentum: float, convention: str) -> str:
    """How the update rule weighs new batches, in words."""
    w = bnlab.batch_weight(momentum, convention)
    mem = bnlab.memory_steps(momentum, convention)
    if w is None:
        return "every batch weighs the same: step k adds 1/k"
    if mem == float("inf"):
        return "new batches get weight 0: the running statistics never move"
    return f"each new batch gets weight {w:g}, so the memory is about {mem:.3g} batches"


def _on_convention() -> None:
    """Switching PyTorch ↔ Keras rewrites the momentum so the running mean stays the same."""
    new = st.session_state["convention"]
    rule = st.session_state.get(RULE_KEY, "pytorch")
    if new in ("pytorch", "keras") and new != rule:
        st.session_state["momentum"] = bnlab.convert_momentum(
            float(st.session_state["momentum"]), rule, new
        )
        st.session_state[RULE_KEY] = new


# ---- the controls -------------------------------------------------------------------------


def controls(s: ns.Settings) -> bnlab.LabSetup:
    """Batch size, steps, update rule and momentum: they change every simulation."""
    if RULE_KEY not in st.session_state:
        conv = st.session_state["convention"]
        st.session_state[RULE_KEY] = conv if conv in ("pytorch", "keras") else "pytorch"
    cols = st.columns([1, 1, 1.3, 1])
    with cols[0]:
        b = state.widget(
            st.slider,
            "batch_size",
            "Batch size b",
            PAGE,
            help="Samples per training batch. Each channel's statistics pool b × (values per "
            "sample) numbers.",
        )
    with cols[1]:
        steps = state.widget(
            st.slider, "steps", "Training steps", PAGE, help="Batches fed to BatchNorm in training."
        )
    with cols[2]:
        conv = state.widget(
            st.radio,
            "convention",
            "Update rule",
            PAGE,
            format_func=CONVENTION_LABELS.get,
            on_change=_on_convention,
            help="PyTorch: new = (1 − m)·old + m·batch. Keras: new = momentum·old + "
            "(1 − momentum)·batch. Cumulative: the plain average of every batch so far.",
        )
    with cols[3]:
        momentum = state.widget(
            st.slider,
            "momentum",
            "Momentum",
            PAGE,
            step=0.001,
            format="%.3f",
            disabled=conv == "cumulative",
            help="The number in the chosen rule: PyTorch m = 0.1 is Keras momentum = 0.9. "
            "Switching the rule converts it.",
        )
    setup = bnlab.LabSetup(
        layout=s.layout,
        sample_shape=s.shape[1:],
        data=s.data,
        seed=s.seed,
        eps=s.eps,
        batch_size=int(b),
        steps=int(steps),
        momentum=float(momentum),
        convention=str(conv),
    )
    per = "T" if s.layout == "BTC" else "H·W"
    st.caption(
        f"Each sample is one {s.layout} item of shape {setup.sample_shape} from the sidebar "
        f"(the sidebar's batch size is not used here). A batch of b = {b} gives every channel "
        f"n = b·{per} = {setup.n} values. {CONVENTION_LABELS[conv]}: "
        f"{_memory_text(setup.momentum, setup.convention)}."
    )
    return setup


# ---- the sections --------------------------------------------------------------------------


def running_section(setup: bnlab.LabSetup, presenter: bool) -> None:
    """Simulation 1: running statistics over a training stream."""
    st.markdown(
        "In training, BatchNorm normalizes each batch with that batch's own mean and "
        "variance, and folds them into two running buffers. Evaluation later uses only those "
        "buffers, so they should end up near the statistics of the whole training set "
        "(dashed). A larger weight per batch follows the batches faster but also their noise. "
        "Keras writes the same rule with momentum = 1 − m: PyTorch's default m = 0.1 is "
        "Keras' 0.9, and Keras' usual 0.99 is PyTorch's 0.01 (a memory of about 100 batches)."
    )
    trace = _trace(setup)
    channel_view(setup, trace, presenter)
    if trace.twin is not None:
        st.markdown(
            f"The dotted orange line is the **{trace.twin}** rule with momentum "
            f"**{trace.twin_momentum:g}**: its running *mean* lies exactly on the blue one. "
            f"The *variances* differ: PyTorch feeds running_var the unbiased batch variance "
            f"(× n/(n−1) = × {trace.bessel:.4g} here), Keras the biased one."
        )


@st.fragment
def channel_view(setup: bnlab.LabSetup, trace: bnlab.RunningTrace, presenter: bool) -> None:
    """The per-channel plot and numbers (a channel change reruns only this)."""
    c = _channel_picker(setup.C, "bn_channel")
    _plot("running", setup, c, presenter)
    rows = [
        {
            "statistic": "mean",
            "last batch": trace.batch_mean[-1, c],
            "running (after the last step)": trace.running_mean[-1, c],
            "training set (truth)": trace.true_mean[c],
        },
        {
            "statistic": "variance",
            "last batch": trace.batch_var[-1, c],
            "running (after the last step)": trace.running_var[-1, c],
            "training set (truth)": trace.true_var[c],
        },
    ]
    if trace.twin_var is not None:
        rows[0][f"{trace.twin} rule"] = trace.twin_mean[-1, c]  # type: ignore[index]
        rows[1][f"{trace.twin} rule"] = trace.twin_var[-1, c]
    _table(rows)
    st.caption(
        f"num_batches_tracked = {trace.final.num_batches_tracked}; each batch gives channel "
        f"{c} n = {trace.n} values."
    )


def bessel_section(setup: bnlab.LabSetup, presenter: bool) -> None:
    """Simulation 2: biased vs unbiased variance, and one value per channel."""
    st.markdown(
        "A batch is normalized with its **biased** variance (divide by n), but PyTorch adds "
        "the **unbiased** one (divide by n − 1) to running_var. With few values per channel "
        "the biased estimate is too small on average by the factor (n − 1)/n; the n/(n − 1) "
        "correction removes that bias. Below, each point averages thousands of batches of "
        "standard-normal values, whose true variance is 1."
    )
    res = _bessel(setup.seed)
    _plot("bessel", setup, None, presenter)
    rows = [
        {"n": int(n), "n/(n−1)": f, "biased / σ²": b, "unbiased / σ²": u}
        for n, f, b, u in zip(res.n, res.factor, res.biased, res.unbiased, strict=True)
    ]
    _table(rows)
    st.subheader("One value per channel")
    one = _one_value(setup)
    st.markdown(
        "With n = 1 there is nothing to average: the batch variance is 0 and the unbiased one "
        "would divide by zero. So torch refuses to train on it (*Expected more than 1 value "
        "per channel when training*), and so does normviz:"
    )
    st.error(one.refusal, icon=":material/block:")
    st.markdown(
        "Evaluation has no such problem: it does not look at the batch at all, it uses the "
        "running statistics. The same single sample, in evaluation mode:"
    )
    _table(
        [
            {"channel": c, "input": x, "evaluation output": y}
            for c, (x, y) in enumerate(zip(one.x, one.eval_output, strict=True))
        ]
    )


def batch_size_section(setup: bnlab.LabSetup, presenter: bool) -> None:
    """Simulation 3: the train/eval gap against the batch size."""
    st.markdown(
        "For every batch size, running statistics are trained for the same number of steps; "
        "then held-out batches go through BatchNorm twice, in training mode (their own "
        "statistics) and in evaluation mode (the running ones). With tiny batches the two "
        "outputs disagree a lot: the network trains on one function and is deployed with "
        "another."
    )
    sweep = _gap(setup)
    _plot("gap", setup, None, presenter)
    _table(
        [
            {
                "batch size": b,
                "mean |y_train − y_eval|": g,
                "eval output |mean|": m,
                "eval output variance": v,
                "running mean error (σ)": e,
            }
            for b, g, m, v, e in zip(
                sweep.batch_sizes,
                sweep.gap,
                sweep.eval_mean,
                sweep.eval_var,
                sweep.running_error,
                strict=True,
            )
        ]
    )
    if sweep.refused:
        st.info(
            f"Batch size {', '.join(map(str, sweep.refused))} has one value per channel with "
            "this shape, which training refuses (see *Biased vs unbiased*).",
            icon=":material/info:",
        )


@st.fragment
def shift_section(setup: bnlab.LabSetup, s: ns.Settings, presenter: bool) -> None:
    """Simulation 4: shifted evaluation data (its sliders rerun only this)."""
    st.markdown(
        "At inference the data may not look like the training data. Here every channel of "
        "the held-out data is moved by `shift` training standard deviations and its spread "
        "multiplied by `scale`. BatchNorm in evaluation mode still subtracts the *training* "
        "mean, so its output drifts to mean ≈ shift and variance ≈ scale². LayerNorm and "
        "GroupNorm compute fresh statistics from each sample and stay at 0 and 1."
    )
    cols = st.columns(2)
    with cols[0]:
        shift = state.widget(st.slider, "shift", "Shift (σ)", PAGE, step=0.1)
    with cols[1]:
        scale = state.widget(st.slider, "scale", "Scale (×)", PAGE, step=0.1)
    res = _shift(setup, float(shift), float(scale), s.groups)
    _plot("shift", setup, (float(shift), float(scale), s.groups), presenter)
    _table(
        [
            {
                "method": METHODS[m].label,
                "statistics from": "training (running)"
                if METHODS[m].train_eval_differ
                else "each sample",
                "output mean": mu,
                "output variance": v,
            }
            for m, mu, v in zip(res.methods, res.current_mean, res.current_var, strict=True)
        ],
        fmt="%.3f",
    )
    st.caption(
        f"GroupNorm uses G = {res.groups} groups (the sidebar's G, or the nearest "
        "divisor of C below it)."
    )


def order_section(setup: bnlab.LabSetup, presenter: bool) -> None:
    """Simulation 5: single-cluster batches against shuffled ones."""
    st.markdown(
        f"The training set is split into {bnlab.CLUSTERS} clusters. If the data arrive "
        "sorted, every batch holds a single cluster, and its statistics jump from cluster to "
        "cluster. The running mean averages the jumps out, but the running variance only "
        "ever sees the spread *inside* a cluster and comes out too small. Worse, in training "
        "each batch is centred on its own cluster, so the network learns on outputs that "
        "evaluation never reproduces. Shuffling fixes all three."
    )
    res = _order(setup)
    order_view(setup, res, presenter)


@st.fragment
def order_view(setup: bnlab.LabSetup, res: bnlab.OrderResult, presenter: bool) -> None:
    """Simulation 5's plot and numbers (a channel change reruns only this)."""
    c = _channel_picker(setup.C, "bn_order_channel")
    _plot("order", setup, c, presenter)
    _table(
        [
            {
                "batches": o,
                "batch mean spread (σ)": n,
                "running mean error (σ)": e,
                "running var / true var": v,
                "mean |y_train − y_eval|": g,
            }
            for o, n, e, v, g in zip(
                res.orders, res.batch_noise, res.mean_error, res.var_ratio, res.gap, strict=True
            )
        ]
    )


@st.fragment
def accumulation_section(setup: bnlab.LabSetup, presenter: bool) -> None:
    """Simulation 6: gradient accumulation (its slider reruns only this)."""
    st.markdown(
        "Gradient accumulation runs k small forward and backward passes and then takes one "
        "optimizer step, to imitate a batch of k·b. The gradients add up as if the batch "
        "were large, but BatchNorm normalizes inside each forward pass: it only ever sees b "
        "samples, with b-sized noise, and it updates its buffers k times per step."
    )
    k = state.widget(st.slider, "accum", "Micro-batches per optimizer step (k)", PAGE)
    try:
        res = _accum(setup, int(k))
    except NormConfigError as e:
        st.warning(f"{e}.", icon=":material/warning:")
        return
    _plot("accumulation", setup, int(k), presenter)
    _table(
        [
            {
                "setup": f"{res.k} × {res.b} accumulated" if i == 0 else f"1 × {res.k * res.b}",
                "samples per BatchNorm call": res.b if i == 0 else res.k * res.b,
                "num_batches_tracked": res.batches_tracked[i],
                "running mean error (σ)": res.mean_error[i],
                "running var / true var": res.var_ratio[i],
            }
            for i in range(2)
        ]
    )
    st.caption(
        f"Same samples, training mode: mean |y_micro − y_full| = {res.gap:.4g} on the last step."
    )


@st.fragment
def sync_section(setup: bnlab.LabSetup, presenter: bool) -> None:
    """Simulation 7: synchronized BatchNorm (its slider reruns only this)."""
    st.markdown(
        "With data parallelism each device normalizes its own local batch of b. Synchronized "
        "BatchNorm has every device send three numbers per channel (Σx, Σx² and the count) "
        "to an all-reduce, so all of them normalize with the mean and variance of all K·b "
        "samples: exactly one big batch. The test suite checks this simulation against real "
        "processes all-reducing over torch.distributed (gloo)."
    )
    K = state.widget(st.slider, "devices", "Devices (K)", PAGE)
    try:
        res = _sync(setup, int(K))
    except NormConfigError as e:
        st.warning(f"{e}.", icon=":material/warning:")
        return
    _plot("sync", setup, int(K), presenter)
    _table(
        [
            {
                "buffers": "device 0, local (DDP copies them)" if i == 0 else "synchronized",
                "running mean error (σ)": res.mean_error[i],
                "running var / true var": res.var_ratio[i],
            }
            for i in range(2)
        ]
    )
    st.caption(
        f"Last step: mean |y_local − y_sync| = {res.gap:.4g}; synchronized vs one batch of "
        f"{res.devices * res.b}: max difference {res.one_batch_diff:.1e} (float rounding)."
    )
    with st.expander("What each device sends (channel 0, last step)"):
        _table(
            [
                {"device": k, "Σx": row[0, 0], "Σx²": row[1, 0], "count": int(row[2, 0])}
                for k, row in enumerate(res.sums)
            ],
            fmt="%.6g",
        )


def freeze_section(setup: bnlab.LabSetup, presenter: bool) -> None:
    """Simulation 8: which state one optimizer step changes."""
    st.markdown(
        'Fine-tuning often "freezes" BatchNorm. A real `nn.BatchNorm` takes one SGD step in '
        "each setup below. `requires_grad=False` only stops γ and β; the running buffers are "
        "not parameters and keep moving as long as the layer is in `train()` mode. A layer "
        "is only fully frozen with both `eval()` and `requires_grad=False`."
    )
    res = _freeze(setup)
    _plot("freeze", setup, None, presenter)
    _table(
        [
            {
                "mode": "train()" if r.training else "eval()",
                "requires_grad": r.requires_grad,
                **{n: "changed" if c else "—" for n, c in zip(res.names, r.changed, strict=True)},
            }
            for r in res.rows
        ]
    )


def checkpoint_section(setup: bnlab.LabSetup, presenter: bool) -> None:
    """Simulation 9: a checkpoint with and without its buffers."""
    st.markdown(
        "A BatchNorm layer's state is more than γ and β: `running_mean`, `running_var` and "
        "`num_batches_tracked` are buffers, and a checkpoint must carry them. A real layer is "
        "trained below (it learns γ ≈ 2, β ≈ 1), saved, and loaded twice. Without its buffers "
        "it evaluates with mean 0 and variance 1, so the raw channel offsets pass straight "
        "through."
    )
    res = _checkpoint(setup)
    _table(
        [
            {
                "key": e.key,
                "kind": e.kind,
                "shape": str(e.shape),
                "first values": ", ".join(f"{v:.3g}" for v in e.values[:4])
                + (" …" if e.values.size > 4 else ""),
            }
            for e in res.entries
        ]
    )
    st.info(
        "Loading only the parameters with `load_state_dict(..., strict=False)` reports "
        f"missing keys {list(res.missing)} and carries on with fresh buffers (torch quietly "
        "fills in num_batches_tracked).",
        icon=":material/warning:",
    )
    _plot("checkpoint", setup, None, presenter)
    st.caption(
        f"The layer was trained for {res.steps} steps with momentum {res.momentum}; bars are "
        "per-channel means of the evaluation outputs, whiskers their standard deviation."
    )


@st.fragment
def model_section(s: ns.Settings, presenter: bool) -> None:
    """Simulation 10: the small real model (its widgets rerun only this)."""
    st.markdown(
        "A small MLP (two hidden layers with normalization) learns to classify synthetic "
        "data, once with batches of 2 and once with batches of 64, with BatchNorm and with a "
        "per-sample method. Accuracy is measured in training mode (test data in batches of "
        "the training size) and in evaluation mode, on clean and on shifted test data. With "
        "batches of 2, every training batch is normalized with the statistics of just two "
        "samples; the running statistics used in evaluation cannot reproduce what the network "
        "learned on, and its accuracy drops."
    )
    cols = st.columns([1.4, 1, 1])
    with cols[0]:
        compare = state.widget(
            st.radio,
            "compare",
            "Compare with",
            PAGE,
            horizontal=True,
            format_func=lambda k: METHODS[k].label,
        )
    with cols[1]:
        shift = state.widget(st.slider, "shift", "Test shift (σ)", PAGE, step=0.1)
    with cols[2]:
        scale = state.widget(st.slider, "scale", "Test scale (×)", PAGE, step=0.1)
    cfg = bnmodel.ModelConfig(seed=s.seed, compare=str(compare))
    report = _report(cfg, float(shift), float(scale))
    _plot("model", cfg, (float(shift), float(scale)), presenter)
    _table(
        [
            {
                "network": f"{METHODS[r.method].label}, batch {r.batch_size}",
                "training mode": r.train_clean,
                "evaluation mode": r.eval_clean,
                "training mode, shifted": r.train_shifted,
                "evaluation mode, shifted": r.eval_shifted,
            }
            for r in report.rows
        ],
        fmt="percent",
    )
    st.caption(
        f"Each network takes {cfg.steps} Adam steps on {cfg.n_train} samples of "
        f"{cfg.features} raw features ({cfg.classes} classes, chance {report.chance:.0%}); "
        f"the test set has {cfg.n_test} samples. Seeded by the sidebar's seed."
    )
    st.markdown(
        "Notice that BatchNorm's *training-mode* accuracy does not move with the shift: in "
        "training mode every test batch is re-centred and re-scaled with its own statistics, "
        "which undoes any shift or scale of the features. Evaluation mode keeps the training "
        "statistics, so it is the mode that pays for the shift, and the only one you deploy."
    )


RENDER = {
    "running": lambda setup, s, p: running_section(setup, p),
    "bessel": lambda setup, s, p: bessel_section(setup, p),
    "batch-size": lambda setup, s, p: batch_size_section(setup, p),
    "shift": lambda setup, s, p: shift_section(setup, s, p),
    "order": lambda setup, s, p: order_section(setup, p),
    "accumulation": lambda setup, s, p: accumulation_section(setup, p),
    "sync": lambda setup, s, p: sync_section(setup, p),
    "freeze": lambda setup, s, p: freeze_section(setup, p),
    "checkpoint": lambda setup, s, p: checkpoint_section(setup, p),
    "model": lambda setup, s, p: model_section(s, p),
}


# ---- the page --------------------------------------------------------------------------------

st.title("BatchNorm lab")
st.markdown(
    "BatchNorm is the one common normalization that behaves differently in training and in "
    "evaluation: training uses the statistics of the current batch, evaluation uses running "
    "averages collected during training. Each tab below makes one way this goes wrong "
    "visible, with every number equal to what torch's own BatchNorm computes."
)
params = state.page_params(PAGE)
settings = state.settings()
lab = controls(settings)
try:
    bnlab.check(lab)
except NormConfigError as err:
    st.error(f"**The lab cannot run this setting:** {err}.", icon=":material/block:")
    st.stop()

labels = list(SECTIONS.values())
# the first tab comes from the URL; `default` must then stay fixed, or the tabs would reset
first = st.session_state.setdefault("_bn_first_tab", SECTIONS[params["sim"]])
tabs = st.tabs(labels, key=TAB_KEY, on_change="rerun", default=first)
open_label = st.session_state.get(TAB_KEY, first)
for slug, label, tab in zip(SECTIONS, labels, tabs, strict=True):
    if label == open_label:
        st.session_state["sim"] = slug
        st.query_params["sim"] = slug
        with tab:
            try:
                RENDER[slug](lab, settings, state.presenter())
            except NormConfigError as err:  # e.g. the batch-size sweep's largest batch
                st.warning(
                    f"**This section cannot run with these settings:** {err}.",
                    icon=":material/warning:",
                )
