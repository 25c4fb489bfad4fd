"""Which normalization? A decision guide, and an audit of real models and uploaded files."""

from __future__ import annotations

import hashlib

import streamlit as st

from normviz import METHODS, audit, guide, io
from ui import state

PAGE = "choose"  # the URL path: the widgets' ranges and choices are settings.PAGE_PARAMS[PAGE]
SAMPLE_NAME = "resnet_block.safetensors"


# ---- cached at the page edge, keyed on plain settings -------------------------------------


@st.cache_data(max_entries=8, show_spinner=False)
def _audit(key: str) -> audit.AuditReport:
    return audit.audit_zoo_model(key)


@st.cache_data(max_entries=4, show_spinner=False)
def _sample_file(key: str) -> bytes:
    return audit.zoo_safetensors(key)


@st.cache_data(max_entries=4, show_spinner=False)
def _audit_file(digest: str, name: str, _data: bytes) -> audit.StateDictReport:
    """An uploaded file's report, cached on the file's SHA-256 (not on its bytes)."""
    return audit.audit_state_dict(io.load_tensors(_data, name))


# ---- sections ----------------------------------------------------------------------------


@st.fragment
def decision_guide() -> None:
    st.subheader("Decision guide")
    st.markdown(
        "Answer three questions: the architecture, how many samples each device sees per "
        "step, and what inference needs. The guide follows the source texts' flowchart and "
        "says why, and what to watch."
    )
    c1, c2 = st.columns([3, 2])
    with c1:
        arch = state.widget(
            st.radio,
            "arch",
            "Architecture",
            PAGE,
            format_func=lambda k: guide.ARCHITECTURES[k],
        )
        batch = state.widget(
            st.number_input,
            "per_device",
            "Samples per device per step",
            PAGE,
            step=1,
            help="With gradient accumulation or several GPUs, count the micro-batch one "
            "device normalizes over, not the global batch.",
        )
        constraints = state.widget(
            st.pills,
            "constraints",
            "Constraints",
            PAGE,
            format_func=lambda k: guide.CONSTRAINTS[k],
            selection_mode="multi",
        )
    rec = guide.recommend(guide.Situation(arch, int(batch), frozenset(constraints or ())))
    with c2:
        summary = METHODS[rec.method].summary
        st.success(f"**Use {rec.label}**: {summary}.", icon=":material/explore:")
        st.markdown("**Why**\n" + "\n".join(f"- {r}" for r in rec.reasons))
        st.markdown("**Watch out for**\n" + "\n".join(f"- {p}" for p in rec.pitfalls))
        if rec.alternative:
            st.caption(f"Also worth a look: {rec.alt_label}, {rec.alternative_reason}")
    st.graphviz_chart(guide.flowchart_dot(rec), width="stretch")


def comparison() -> None:
    st.subheader("The methods side by side")
    st.dataframe(guide.comparison_table(), width="stretch")


@st.fragment
def model_audit() -> None:
    st.subheader("Model audit")
    st.markdown(
        "The source texts end with a checklist. Here it runs on real torch models built in "
        "the app: the layers are found by type, their placement by tracing the model's graph "
        "(torch.fx) back from each residual add, their input shapes with forward hooks, and "
        "the saved buffers from the state_dict."
    )
    key = state.widget(
        st.selectbox, "model", "Model", PAGE, format_func=lambda k: audit.ZOO[k].label
    )
    z = audit.ZOO[key]
    st.caption(f"{z.description}. Example input: {' × '.join(map(str, z.example_shape))}.")
    report = _audit(key)
    st.table(audit.checklist_frame(report))
    st.dataframe(audit.findings_frame(report), width="stretch")
    places = sorted({f.placement for f in report.findings})
    st.caption(" · ".join(f"**{p}**: {audit.PLACEMENT_HELP.get(p, '')}" for p in places))
    with st.expander(
        "Optimizer recipe: no weight decay on γ, β and biases", icon=":material/tune:"
    ):
        g = report.param_groups
        st.markdown(
            f"Decayed ({len(g.decay)}): {', '.join(f'`{n}`' for n in g.decay)}.  \n"
            f"Not decayed ({len(g.no_decay)}): {', '.join(f'`{n}`' for n in g.no_decay)}."
        )
        st.code(audit.optimizer_code(g), language="python")
        st.caption(
            "Weight decay pulls γ toward 0 and so fights the scale the layer learned; most "
            "recipes exempt it. It is a choice, not a law: if you decay them, say so."
        )


@st.fragment
def state_dict_audit() -> None:
    st.subheader("Audit a saved state_dict")
    st.markdown(
        "Upload a `.safetensors` or `.pt` file of saved weights. It is read safely "
        "(safetensors, or torch.load with weights_only: no code runs) and searched for "
        "normalization parameters and running statistics. Without the model's code, the "
        "kind of layer is a guess from names and shapes."
    )
    c1, c2 = st.columns([3, 2])
    with c1:
        f = st.file_uploader("State dict", type=["safetensors", "pt", "pth"], key="ch_upload")
    with c2:
        st.download_button(
            "Download a sample file",
            _sample_file("resnet"),
            file_name=SAMPLE_NAME,
            icon=":material/download:",
            key="ch_sample_dl",
            help="The ResNet block's state_dict after three training-mode batches.",
        )
        use_sample = state.widget(st.toggle, "use_sample", "Audit the sample file instead", PAGE)
    if f is not None:
        data, name = f.getvalue(), f.name
    elif use_sample:
        data, name = _sample_file("resnet"), SAMPLE_NAME
    else:
        return
    try:
        report = _audit_file(hashlib.sha256(data).hexdigest(), name, data)
    except (io.TensorLoadError, audit.AuditError) as e:
        st.error(f"**{name[:60]} was refused:** {e}.", icon=":material/block:")
        return
    st.markdown(
        f"**{name[:60]}**: {report.n_tensors} tensors, {report.n_elements:,} numbers; "
        f"{len(report.norms)} module(s) with normalization parameters or buffers."
    )
    if report.norms:
        st.dataframe(audit.saved_norms_frame(report), width="stretch")
    else:
        st.info("No normalization parameters or buffers found.", icon=":material/info:")
    st.caption(
        f"By shape alone: {len(report.decay)} tensors with 2 or more dimensions would get "
        f"weight decay, {len(report.no_decay)} one-dimensional weights and biases would not."
    )


# ---- the page ----------------------------------------------------------------------------

state.settings()  # runs this page through app.py on a first visit (shared sidebar)
st.title("Which normalization?")
state.page_params(PAGE)  # the guide's answers and the audited model, from a link
decision_guide()
comparison()
model_audit()
state_dict_audit()
