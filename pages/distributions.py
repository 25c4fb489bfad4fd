"""Distributions: what each method does to the values, on generated or uploaded data."""

from __future__ import annotations

import functools
import hashlib
from dataclasses import replace

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st
import torch

from normviz import LAYOUTS, METHODS, NormConfigError, io, normalize, stats
from normviz.data import GENERATORS, sample_scales
from normviz.figures import distributions as figs
from ui import params as ns
from ui import state

# A generated input is named by its settings, an upload by its bytes' hash: caches key
# on this tuple and receive the tensor itself as an unhashed `_x` argument.
Source = tuple
PAGE = "distributions"  # the URL path: its own URL parameters are settings.PAGE_PARAMS[PAGE]
BIG = 2**20  # from this many elements the first run shows a progress bar
# The sections after "All five methods" each demonstrate one property (γ/β, ε, RMSNorm's
# direction, per-sample scale); on a larger input they use its first samples (then first
# positions) up to this many values, which keeps the page's first run under 2 s at the cap.
DEMO_MAX = 2**20


# ---- the input -----------------------------------------------------------------------


@st.cache_data(max_entries=3, show_spinner=False)  # up to 50 MB each
def _parse_upload(digest: str, name: str, _data: bytes) -> dict[str, np.ndarray]:
    """Every tensor of an uploaded file, cached on the file's SHA-256 (not on its bytes)."""
    return {k: t.numpy() for k, t in io.load_tensors(_data, name).items()}


def uploaded_input(s: ns.Settings) -> tuple[Source, io.UserTensor] | None:
    """The uploader; the uploaded tensor with its layout, or None (then: generated input)."""
    with st.expander("Bring your own tensor", icon=":material/upload_file:"):
        st.markdown(
            "Upload activations you saved yourself: "
            + "; ".join(f"`{ext}` ({what})" for ext, what in io.FORMATS.items())
            + ". A 2-D array is read as one sequence (1, T, C), 3-D as (B, T, C) and 4-D as "
            "(N, C, H, W). Nothing in the file is ever executed: pickled Python objects are "
            "refused, not loaded."
        )
        f = st.file_uploader("Tensor file", key="dist_upload")
        if f is None:
            return None
        data = f.getvalue()
        digest = hashlib.sha256(data).hexdigest()
        try:
            tensors = _parse_upload(digest, f.name, data)
            keys = list(tensors)
            key = (
                st.selectbox("Tensor in the file", keys, key="dist_key")
                if len(keys) > 1
                else keys[0]
            )
            if key not in tensors:  # a key remembered from another file
                key = keys[0]
            user = io.as_input(torch.from_numpy(tensors[key]), key)
        except io.TensorLoadError as e:
            st.error(f"**{f.name[:60]} was refused:** {e}.", icon=":material/block:")
            return None
    return ("upload", digest, user.key), user


def settings_for(s: ns.Settings, user: io.UserTensor | None) -> ns.Settings:
    """The shared settings, with the upload's layout and shape when there is one."""
    if user is None:
        return s
    lay = LAYOUTS[user.layout]
    sizes = dict(zip(lay.axes, user.tensor.shape, strict=True))
    return replace(
        s,
        layout=user.layout,
        sizes=sizes,
        axes=tuple(a for a in s.axes if a in lay.axes) or (lay.channel,),
    )


def demo_input(
    s: ns.Settings, src: Source, x: np.ndarray
) -> tuple[ns.Settings, Source, np.ndarray]:
    """The input of the demonstration sections: `x`, or its leading part (stats.leading_shape)."""
    sizes = stats.leading_shape(tuple(x.shape), s.layout, DEMO_MAX)
    if sizes == x.shape:
        return s, src, x
    part = np.ascontiguousarray(x[tuple(slice(0, n) for n in sizes)])
    small = replace(s, sizes=dict(zip(LAYOUTS[s.layout].axes, sizes, strict=True)))
    return small, (*src, "first", sizes), part


def generated(s: ns.Settings, data: str) -> tuple[Source, np.ndarray]:
    """A generated input at the current shape and seed (generator `data`)."""
    g = replace(s, data=data)
    return ("generated", data, g.layout, g.shape, g.seed), state.input_tensor(g).numpy()


# ---- cached computations (keyed on the source and plain settings) --------------------


def _kw(s: ns.Settings) -> dict:
    """groups=/axes=/centred=/eps= for the current method (only those it takes)."""
    return dict(s.norm_kwargs())


@st.cache_data(max_entries=8, show_spinner=False)
def _main(source: Source, layout: str, method: str, kw: dict, _x: np.ndarray) -> tuple:
    y = normalize(_x, method, layout, **kw).output
    table = stats.group_table(_x, method, layout, **kw)
    return stats.histogram(_x), stats.histogram(y), table, y.numpy()


@st.cache_data(max_entries=8, show_spinner=False)
def _uncontrolled(
    source: Source, layout: str, method: str, kw: dict, groups: int, _x: np.ndarray
) -> pd.DataFrame:
    return stats.uncontrolled(_x, method, layout, view_groups=groups, **kw)


@st.cache_data(max_entries=8, show_spinner=False)
def _compare(
    source: Source, layout: str, groups: int, eps: float, _x: np.ndarray
) -> stats.MethodsComparison:
    return stats.compare_methods(_x, layout, groups=groups, eps=eps)


@st.cache_data(max_entries=16, show_spinner=False)
def _affine(
    source: Source,
    layout: str,
    method: str,
    kw: dict,
    kind: str,
    gamma: float,
    beta: float,
    _x: np.ndarray,
) -> stats.AffineDemo:
    return stats.affine_demo(_x, method, layout, kind, gamma, beta, **kw)  # type: ignore[arg-type]


@st.cache_data(max_entries=8, show_spinner=False)
def _recover(source: Source, layout: str, eps: float, _x: np.ndarray) -> stats.Recovery:
    return stats.recover_input(_x, layout, eps)


@st.cache_data(max_entries=8, show_spinner=False)
def _eps(source: Source, layout: str, method: str, kw: dict, _x: np.ndarray) -> stats.EpsSweep:
    kw = {k: v for k, v in kw.items() if k != "eps"}
    return stats.eps_sweep(_x, method, layout, **kw)


@st.cache_data(max_entries=8, show_spinner=False)
def _cosine(source: Source, layout: str, eps: float, _x: np.ndarray) -> tuple:
    cmp = stats.cosine_per_vector(_x, layout, eps)
    return cmp, stats.cost_table(layout, tuple(_x.shape)), stats.time_layer_vs_rms(_x, layout)


@st.cache_data(max_entries=8, show_spinner=False)
def _scale(source: Source, layout: str, groups: int, eps: float, _x: np.ndarray) -> pd.DataFrame:
    return stats.scale_invariance(_x, layout, groups=groups, eps=eps)


@st.cache_data(max_entries=8, show_spinner=False)
def _sample_rms(source: Source, layout: str, eps: float, _x: np.ndarray) -> pd.DataFrame:
    return stats.sample_rms(_x, normalize(_x, "layer", layout, eps=eps).output, layout)


# Figures are cached as objects (st.cache_resource): building a plotly figure costs
# far more than drawing it, and cache_data would rebuild it on every hit by unpickling.
# Nothing mutates a cached figure: st.plotly_chart serializes a copy.


@st.cache_resource(max_entries=16, show_spinner=False)
def _before_after_fig(
    source: Source, layout: str, method: str, kw: dict, presenter: bool, _x: np.ndarray
) -> go.Figure:
    before, after, _, _ = _main(source, layout, method, kw, _x)
    return figs.make_before_after_figure(before, after, method, presenter)


@st.cache_resource(max_entries=16, show_spinner=False)
def _methods_fig(
    source: Source, layout: str, groups: int, eps: float, presenter: bool, _x: np.ndarray
) -> go.Figure:
    return figs.make_methods_figure(_compare(source, layout, groups, eps, _x), presenter)


@st.cache_resource(max_entries=32, show_spinner=False)
def _affine_fig(
    source: Source,
    layout: str,
    method: str,
    kw: dict,
    kind: str,
    gamma: float,
    beta: float,
    presenter: bool,
    _x: np.ndarray,
) -> go.Figure:
    demo = _affine(source, layout, method, kw, kind, gamma, beta, _x)
    return figs.make_affine_figure(demo, method, presenter)


@st.cache_resource(max_entries=16, show_spinner=False)
def _eps_fig(
    source: Source, layout: str, method: str, kw: dict, presenter: bool, _x: np.ndarray
) -> go.Figure:
    return figs.make_eps_figure(_eps(source, layout, method, kw, _x), kw["eps"], presenter)


@st.cache_resource(max_entries=16, show_spinner=False)
def _cosine_fig(
    source: Source, layout: str, eps: float, presenter: bool, _x: np.ndarray
) -> go.Figure:
    return figs.make_cosine_figure(_cosine(source, layout, eps, _x)[0], presenter)


# ---- sections ------------------------------------------------------------------------


def _chart(fig: go.Figure, key: str) -> None:
    st.plotly_chart(fig, theme=None, key=key, config={"displaylogo": False})


def before_after(s: ns.Settings, src: Source, x: np.ndarray, presenter: bool) -> tuple | None:
    label = METHODS[s.method].label
    st.subheader(f"Before and after: {label}")
    try:
        _, _, table, y = _main(src, s.layout, s.method, _kw(s), x)
    except NormConfigError as e:  # e.g. one value per channel: torch refuses it too
        st.error(f"**This setting cannot run:** {e}.", icon=":material/block:")
        return None
    st.markdown(
        f"{label} pools **{', '.join(table.axes)}** into one statistic and keeps "
        f"**{', '.join(table.kept) or 'nothing'}** apart: {table.n_groups:,} groups of "
        f"m = {table.group_size:,} values each. The histograms count every value, "
        "binned on the server."
    )
    _chart(_before_after_fig(src, s.layout, s.method, _kw(s), presenter, x), "dist_before_after")
    moment = "mean 0 and variance 1" if table.centred else "mean square 1 (no centring)"
    st.markdown(
        f"**Inside every group** the output has {moment}, up to the small shrink ε causes. "
        f"The first {min(len(table.head), table.n_groups)} groups, then the extremes over "
        f"all {table.n_groups:,}:"
    )
    st.dataframe(table.head, hide_index=True, width="stretch")
    st.dataframe(table.summary, width="stretch")
    return table, y


def leaves_alone(s: ns.Settings, src: Source, x: np.ndarray) -> None:
    label = METHODS[s.method].label
    st.subheader(f"What {label} does not control")
    st.markdown(
        "A method standardizes its own groups and nothing else. Below, the same output is "
        "grouped the way each other method would group it: where the means are not 0 or "
        "the variances not 1, the method left that structure in place. LayerNorm, for "
        "instance, leaves each feature's mean over the batch alone, and BatchNorm does not "
        "standardize a single token's features."
    )
    try:
        df = _uncontrolled(src, s.layout, s.method, _kw(s), s.groups, x)
    except NormConfigError as e:
        st.info(f"Not available for this setting: {e}.", icon=":material/info:")
        return
    st.dataframe(df, width="stretch")


def all_methods(s: ns.Settings, src: Source, x: np.ndarray, presenter: bool) -> None:
    st.subheader("All five methods on the same input")
    st.markdown(
        "Each panel is the same input after a different method, on one shared x-range. "
        "Every method standardizes its own groups, yet the pooled histograms differ: "
        "where a method pools across channels with different offsets, the offsets are "
        f"mixed in; where it keeps them apart, they are removed. GroupNorm uses G = {s.groups}."
    )
    _chart(_methods_fig(src, s.layout, s.groups, s.eps, presenter, x), "dist_methods")


def demo_note(s: ns.Settings, ds: ns.Settings) -> None:
    """Say so when the demonstration sections use part of the input."""
    if ds.shape == s.shape:
        return
    lay = LAYOUTS[s.layout]
    st.info(
        f"**From here on, part of the input.** Each section below demonstrates one "
        f"property, which any slice of the tensor shows as well as the whole. To keep the "
        f"page quick at {s.n_elements:,} values they use the first "
        f"{ds.n_elements:,}: {lay.shape_text(ds.shape)}, every channel kept. The "
        "histograms and tables above count every value.",
        icon=":material/content_cut:",
    )


@st.fragment
def gamma_beta(s: ns.Settings, src: Source, x: np.ndarray, presenter: bool) -> None:
    """γ and β sliders rerun only this section."""
    st.subheader("γ and β: giving the scale back")
    st.markdown(
        "After standardizing, each channel c is multiplied by γ_c and shifted by β_c, both "
        "learned. One value for every channel stretches and moves the whole histogram. "
        "Under BatchNorm, whose groups are the channels, each channel's mean then lands "
        "exactly on its β and its spread on its γ; other methods standardized other groups, "
        "so the channels only land near them."
    )
    cols = st.columns([1, 2, 2])
    # page parameters: drawn through state.widget, so a change (a rerun of this fragment
    # alone) is written to the URL too
    kind = state.widget(cols[0].radio, "affine", "γ and β are", PAGE, horizontal=False)
    gamma = state.widget(cols[1].slider, "gamma", "γ", PAGE, step=0.1)
    beta = state.widget(cols[2].slider, "beta", "β", PAGE, step=0.1)
    if kind == "per-channel":
        st.caption("Per-channel: γ_c runs from 0.5γ to 1.5γ and β_c from β − 1 to β + 1.")
    try:
        fig = _affine_fig(src, s.layout, s.method, _kw(s), kind, gamma, beta, presenter, x)
    except NormConfigError as e:
        st.info(f"Not available for this setting: {e}.", icon=":material/info:")
        return
    _chart(fig, "dist_affine")
    st.markdown(
        "**Undoing BatchNorm.** BatchNorm has one mean μ_c and one spread σ_c per channel, "
        "so setting γ_c = σ_c and β_c = μ_c gives the input back exactly: the network can "
        "learn to switch the normalization off if that is what it needs."
    )
    try:
        rec = _recover(src, s.layout, s.eps, x)
    except NormConfigError as e:
        st.info(f"BatchNorm cannot run on this input: {e}.", icon=":material/info:")
        return
    c1, c2 = st.columns(2)
    c1.metric("max |y − x| with γ = √(σ² + ε), β = μ", f"{rec.max_abs_diff:.1e}")
    c2.metric("max |y − x| with γ = σ (ε left out)", f"{rec.max_abs_diff_sigma:.1e}")
    st.caption(
        f"The input's values reach {rec.max_abs_x:.3g} in size; the first difference is "
        "floating-point rounding, the second is the part of σ that ε replaced."
    )


def eps_section(s: ns.Settings, src: Source, x: np.ndarray, presenter: bool) -> None:
    st.subheader("ε: why it is there")
    st.markdown(
        "Each group is divided by √(σ² + ε), not by σ. A group whose values are all equal "
        "has σ² = 0: with ε > 0 its output is 0, with ε = 0 it is 0/0, which is NaN and "
        "poisons everything downstream. A large ε also shrinks groups whose spread is "
        "small next to it: their variance after is σ²/(σ² + ε), below 1."
    )
    choice = state.widget(
        st.radio,
        "edata",
        "Data for this section",
        PAGE,
        format_func=lambda k: (
            f"{GENERATORS['constant'].label}: {GENERATORS['constant'].description}"
            if k == "constant"
            else "the page's current input"
        ),
    )
    if choice == "constant":
        src, x = generated(s, "constant")
    try:
        sweep = _eps(src, s.layout, s.method, _kw(s), x)
    except NormConfigError as e:
        st.info(f"Not available for this setting: {e}.", icon=":material/info:")
        return
    _chart(_eps_fig(src, s.layout, s.method, _kw(s), presenter, x), "dist_eps")
    if sweep.zero_groups:
        st.caption(
            f"{sweep.zero_groups:,} group(s) of m = {sweep.group_size:,} equal values. "
            "With this data chosen as the sidebar's input and ε = 0, the NaN reach the "
            "histograms and tables above."
        )


def rms_vs_layer(s: ns.Settings, src: Source, x: np.ndarray, presenter: bool) -> None:
    st.subheader("RMSNorm vs LayerNorm")
    st.markdown(
        "RMSNorm divides each vector by its root mean square and subtracts nothing, so "
        "the vector keeps its direction (cosine 1). LayerNorm first subtracts the vector's "
        "mean: when that mean is not 0 the vector turns, and the further from centred it "
        "was, the more. In exchange, RMSNorm leaves a shared offset in place."
    )
    try:
        cmp, costs, timing = _cosine(src, s.layout, s.eps, x)
    except NormConfigError as e:
        st.info(f"Not available for this setting: {e}.", icon=":material/info:")
        return
    _chart(_cosine_fig(src, s.layout, s.eps, presenter, x), "dist_cosine")
    if cmp.zero_vectors:
        st.caption(f"{cmp.zero_vectors:,} all-zero vector(s) have no direction: left out.")
    st.markdown("**What each costs**, per vector of m values:")
    st.dataframe(costs, width="stretch")
    st.caption(
        f"torch's own modules on this input, best of 3 on this server: LayerNorm "
        f"{timing.layer * 1e3:.2f} ms, RMSNorm {timing.rms * 1e3:.2f} ms. Small tensors "
        "measure call overhead more than arithmetic."
    )


def per_sample_scale(s: ns.Settings, src: Source, x: np.ndarray) -> None:
    st.subheader("Per-sample scale: what LayerNorm forgets")
    st.markdown(
        "A method whose groups stay inside one sample cannot tell a sample from ten times "
        "that sample: the output is the same. Below, sample 0 of the current input is "
        "multiplied by 10. Only BatchNorm, which pools across samples, notices, and then "
        "every sample's output moves."
    )
    try:
        st.dataframe(_scale(src, s.layout, s.groups, s.eps, x), width="stretch")
    except NormConfigError as e:
        st.info(f"Not available for this setting: {e}.", icon=":material/info:")
    scales = sample_scales(s.shape[0])
    st.markdown(
        f"With the **{GENERATORS['sample_scale'].label.lower()}** data (one pattern at "
        f"×{scales[0]:g} … ×{scales[-1]:g}), every sample comes out of LayerNorm with the "
        "same size: the scale is gone unless γ and β bring it back."
    )
    ss_src, ss_x = generated(s, "sample_scale")
    try:
        st.dataframe(_sample_rms(ss_src, s.layout, s.eps, ss_x).head(16), width="stretch")
    except NormConfigError as e:
        st.info(f"LayerNorm cannot run here: {e}.", icon=":material/info:")


def downloads(s: ns.Settings, table: stats.GroupTable, y: np.ndarray) -> None:
    st.subheader("Downloads")
    label = METHODS[s.method].label
    c1, c2 = st.columns(2)
    c1.download_button(
        f"{label} output (.npy)",
        data=functools.partial(stats.npy_bytes, y),  # built only when clicked
        file_name=f"{s.method}_output.npy",
        mime="application/octet-stream",
        on_click="ignore",
        icon=":material/download:",
        key="dist_dl_npy",
    )
    c2.download_button(
        "Statistics table (.csv)",
        data=functools.partial(stats.csv_bytes, table.table),
        file_name=f"{s.method}_groups.csv",
        mime="text/csv",
        on_click="ignore",
        icon=":material/download:",
        key="dist_dl_csv",
    )
    if table.n_groups > len(table.table):
        st.caption(f"The table holds the first {len(table.table):,} of {table.n_groups:,} groups.")


# ---- the page ------------------------------------------------------------------------

st.title("Distributions")
st.markdown(
    "After *which axes?* comes *what happens to the numbers?* This page shows the values "
    "before and after each method, which moments a method pins down and which it leaves "
    "alone, and what γ, β and ε change. Use the sidebar's data, or upload your own "
    "activations below."
)
state.page_params(PAGE)  # γ/β and the ε section's data, from a link (warns about bad values)
shared = state.settings()
presenter = state.presenter()
upload = uploaded_input(shared)
s = settings_for(shared, upload[1] if upload else None)
if upload is not None:
    user = upload[1]
    st.info(
        f"Using **{user.key[:60]}** from the uploaded file: shape {user.source_shape} read "
        f"as {user.shape_text}. The sidebar's shape, data and seed do not apply while a "
        "file is loaded; the method, groups and ε do.",
        icon=":material/upload_file:",
    )
else:
    g = GENERATORS[s.data]
    st.caption(
        f"Input: **{g.label}**, {g.description}. "
        f"{LAYOUTS[s.layout].shape_text(s.shape)}, seed {s.seed}."
    )

if state.require(s):  # before generating anything: the shape may be over the cap
    bar = st.progress(0.0, "Preparing the input…") if s.n_elements >= BIG else None
    if upload is not None:
        src, x = upload[0], upload[1].tensor.numpy()
    else:
        src, x = generated(s, s.data)
    ds, dsrc, dx = demo_input(s, src, x)
    steps = [
        lambda: before_after(s, src, x, presenter),
        lambda: leaves_alone(s, src, x),
        lambda: all_methods(s, src, x, presenter),
        lambda: demo_note(s, ds),
        lambda: gamma_beta(ds, dsrc, dx, presenter),
        lambda: eps_section(ds, dsrc, dx, presenter),
        lambda: rms_vs_layer(ds, dsrc, dx, presenter),
        lambda: per_sample_scale(ds, dsrc, dx),
    ]
    results = []
    for i, step in enumerate(steps):
        if bar is not None:
            bar.progress(i / len(steps), f"Computing section {i + 1} of {len(steps)}…")
        results.append(step())
    if bar is not None:
        bar.empty()
    if results[0] is not None:
        downloads(s, *results[0])
