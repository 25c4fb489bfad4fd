"""The home page: what normalization is, the one formula, the contract table, a map."""

from __future__ import annotations

import streamlit as st

from normviz import LAYOUTS, sources, text
from normviz.axes import multiples
from normviz.figures.spec import Picture
from ui import runner, teach
from ui.pages import available

THUMB_GROUPS = 2  # GroupNorm's G in the thumbnails (divides both default C)


@st.cache_data(max_entries=4, show_spinner=False)
def _thumbnails(layout: str) -> Picture:
    """Every method's highlighted block at the layout's classroom shape (a still picture:
    the first screen loads no chart library)."""
    lay = LAYOUTS[layout]
    shape = tuple(lay.defaults[a] for a in lay.axes)
    return Picture(multiples.methods_html(layout, shape, THUMB_GROUPS))


def render() -> None:
    st.title("normviz: one formula, five choices of axes")
    st.markdown(text.why_normalize())
    st.markdown(
        f"That drift is what {sources.cite('ioffe2015')} called *internal covariate shift*. "
        "Whether removing it is why normalization works is debated: "
        f"{sources.cite('santurkar2018')} found BatchNorm helps even when the drift is put "
        "back, and point to a smoother loss landscape instead (the Training lab measures "
        "it live)."
    )
    st.latex(text.FORMULA)
    st.markdown(text.formula_note())
    st.markdown(
        'Saying "normalization" without naming the axes leaves out the part that decides how '
        "training and inference behave, how the layer acts when training is spread over "
        "several devices, and whether one example's values can leak into another's output."
    )
    st.subheader("The axis contract")
    st.caption(
        "BTC: B sequences × T tokens × C features (transformers). "
        "NCHW: N images × C channels × H × W (CNNs). "
        "C/G: the channels of one group, G: the groups."
    )
    # a static table (ui.runner.table): its long cells wrap and it grows with presenter
    # mode's text; on a phone each method's row stacks into lines
    with st.container(key="contract_table"):
        runner.table(text.contract_table())
    st.caption(
        "train ≠ eval holds for torch's default constructor flags: InstanceNorm with "
        "track_running_stats=True also switches to running statistics in evaluation (see "
        "*Which normalization?*)."
    )
    st.markdown(
        "The same contract as pictures: each block is a small tensor, and the coloured cells "
        "are the values that share one μ and σ² with the corner cell."
    )
    for layout in LAYOUTS:
        lay = LAYOUTS[layout]
        shape = tuple(lay.defaults[a] for a in lay.axes)
        words = multiples.alt_lines(layout, shape, THUMB_GROUPS)
        runner.chart(_thumbnails(layout), f"thumbs_{layout}", words)
    title = f"Teach with normviz: a {teach.TOTAL_MINUTES}-minute path"
    with st.expander(title, icon=":material/school:"):
        st.markdown(
            "Each step opens its view in a new tab, in presenter mode (larger everything, "
            "the sidebar folded away; it is in the link as `present=1`)."
        )
        st.markdown(teach.markdown())
    st.subheader("Where to go next")
    for info in available():
        st.page_link(str(info.file), label=f"**{info.title}**: {info.blurb}", icon=info.icon)
    st.subheader("Sources")
    st.markdown(
        "The papers the pages lean on; a page names the one behind a claim where it makes it."
    )
    st.markdown(sources.markdown_list())
