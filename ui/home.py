"""The home page: what normalization is, the one formula, the contract table, a map."""

from __future__ import annotations

import streamlit as st

from normviz import text
from ui.pages import available


def render() -> None:
    st.title("normviz: one formula, five choices of axes")
    st.markdown(
        "A deep network feeds each layer the output of the layer before it. While the "
        "earlier layers learn, the numbers they pass on keep drifting in scale and centre, "
        "so every later layer is aiming at a moving target. A **normalization layer** "
        "re-centres and re-scales activations to mean 0 and variance 1, then lets the network "
        "pick the scale it actually wants with two learned vectors, γ and β. Training gets "
        "steadier, tolerates larger learning rates and cares less about initialization."
    )
    st.latex(text.FORMULA)
    st.markdown(
        "BatchNorm, LayerNorm, InstanceNorm, GroupNorm and RMSNorm all compute this same "
        "formula. **The only thing that differs is which values are pooled to get μ and "
        "σ².** RMSNorm skips μ and divides by the root mean square. Saying "
        '"normalization" without naming the axes leaves out the part that decides how '
        "training and inference behave."
    )
    st.subheader("The axis contract")
    st.caption(
        "BTC: B sequences × T tokens × C features (transformers). "
        "NCHW: N images × C channels × H × W (CNNs). "
        "C/G: the channels of one group, G: the groups."
    )
    st.dataframe(text.contract_table(), width="stretch")
    st.subheader("Where to go next")
    for info in available():
        st.page_link(str(info.file), label=f"**{info.title}**: {info.blurb}", icon=info.icon)
