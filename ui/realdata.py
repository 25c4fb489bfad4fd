"""The real data sources in the UI: their sidebar controls, their cached tensors, and the
note every page that uses one shows.

A page that takes a real tensor declares the "real" control (`ui.pages`); there the
sidebar hides the layout and size inputs the source fixes (showing the real shape
instead) and offers the source's knobs. On other pages a real choice keeps its value
(session and URL) while the page runs on the default generator, and says so.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import streamlit as st

from normviz import LAYOUTS, NormConfigError
from normviz.data import DEFAULT_GENERATOR, GENERATORS
from normviz.pretrained import SOURCES, RealInput, RealTensor, build
from normviz.pretrained import minilm as minilm_module
from ui import params as ns
from ui import uploads
from ui.pages import controls
from ui.safe import md_code, md_text
from ui.uploads import ByteLRU

REAL = "real"  # the control a page declares to take a real tensor
_RESULT = "_real_result"  # this run's RealTensor, or the error that stopped it
TENSORS = ByteLRU(96 * 2**20, size=lambda r: r.nbytes + 1024)  # real tensors, by RealInput
PHOTOS = ByteLRU(32 * 2**20, size=lambda a: a.nbytes + 1024)  # uploaded photos, by digest
SHOWN_TOKENS = 24  # tokens per sentence the note lists


@dataclass(frozen=True)
class Real(RealInput):
    """A real input read through the UI's caches (shared by every session)."""

    def images(self) -> np.ndarray | None:
        if not self.photo:
            return None
        img = PHOTOS.get(self.photo)
        if img is None:
            raise NormConfigError("the uploaded photo is no longer in memory: upload it again")
        return img

    def real(self) -> RealTensor:
        hit = TENSORS.get(self)
        if hit is None:
            hit = build(self, self.images())
            TENSORS.put(self, hit)
        return hit


def real_input(s: ns.Settings) -> Real | None:
    """The real input the settings name, or None for generated data."""
    if not s.real:
        return None
    return Real(s.data, s.layer, s.text if SOURCES[s.data].uses_text else "", _photo())


def _photo() -> str:
    return str(st.session_state.get("_real_photo", ""))


def takes_real(page: str) -> bool:
    return REAL in controls(page)


def data_label(key: str) -> str:
    return SOURCES[key].label if key in SOURCES else GENERATORS[key].label


def data_help() -> str:
    gens = [f"{g.label}: {g.description}" for g in GENERATORS.values()]
    return "; ".join([*gens, *(f"{r.label}: {r.description}" for r in SOURCES.values())])


def controls_for(sb: Any, page: str) -> None:
    """The chosen real source's own controls (its layer; text or photo)."""
    data = st.session_state["data"]
    if data not in SOURCES:
        return
    src = SOURCES[data]
    if not takes_real(page):
        sb.caption(
            f"{src.label} feeds the pages that take one real tensor (Axis Explorer, "
            f"Distributions); this page draws its data from the "
            f"{GENERATORS[DEFAULT_GENERATOR].label} generator."
        )
        return
    layers = src.layers()
    if st.session_state.get("layer") not in layers:
        st.session_state["layer"] = src.default_layer()
    # persist_state: the value outlives pages without this control (and the URL keeps it)
    sb.selectbox("Layer", layers, key="layer", format_func=src.layer_label, persist_state="session")
    if src.uses_photo:
        _photo_upload(sb)
    if src.uses_text:
        sb.text_area(
            "Sentences (one per line)",
            key="text",
            persist_state="session",
            max_chars=minilm_module.MAX_CHARS,
            help=f"At most {minilm_module.MAX_SENTENCES} sentences, "
            f"{minilm_module.MAX_CHARS} characters; each sentence is a sequence of the batch.",
        )


def _photo_upload(sb: Any) -> None:
    """A photo to add to the batch: decoded once per digest (refused with a message)."""
    f = sb.file_uploader("Your photo (PNG or JPEG)", type=["png", "jpg", "jpeg"], key="photo")
    st.session_state["_real_photo"] = ""
    if f is None:
        return
    data = f.getvalue()
    digest = hashlib.sha256(data).hexdigest()
    if PHOTOS.get(digest) is None:
        try:
            img = uploads.photo(data, digest)  # bounded worker; refusals remembered
        except NormConfigError as e:
            uploads.refusal(f.name, e)
            return
        PHOTOS.put(digest, img[None])
    st.session_state["_real_photo"] = digest


def shape_caption(sb: Any, s: ns.Settings) -> None:
    """The real tensor's shape, where the layout and size inputs would be."""
    res = st.session_state.get(_RESULT)
    if isinstance(res, RealTensor):
        lay = LAYOUTS[s.layout]
        sb.markdown(f"**Shape**: {lay.shape_text(s.shape)}, fixed by {SOURCES[s.data].label}.")


def effective(s: ns.Settings, page: str) -> ns.Settings:
    """The settings the page runs on: a real source's layout and shape where the page
    takes a real tensor; the default generator on other pages."""
    st.session_state.pop(_RESULT, None)
    if not s.real:
        return s
    if not takes_real(page):
        return replace(s, data=DEFAULT_GENERATOR)
    inp = real_input(s)
    assert inp is not None
    try:
        _first_load(inp)
        with st.spinner(f"Running {SOURCES[s.data].label} (its first use loads the model)…"):
            res = inp.real()
    except NormConfigError as e:
        st.session_state[_RESULT] = e
        return replace(s, data=DEFAULT_GENERATOR)
    st.session_state[_RESULT] = res
    lay = LAYOUTS[inp.layout]
    return replace(
        s,
        layout=inp.layout,
        sizes=dict(zip(lay.axes, res.array.shape, strict=True)),
        axes=tuple(a for a in s.axes if a in lay.axes) or (lay.channel,),
    )


def _first_load(inp: Real) -> None:
    """A model's first load in this process, with a progress bar (drawn only if it reports:
    queued behind another session, or loading)."""
    src = inp.spec
    if src.load is None or TENSORS.get(inp) is not None:
        return
    bar: list[Any] = []

    def tell(fraction: float, text: str) -> None:
        if not bar:
            bar.append(st.progress(0.0, text=text))
        bar[0].progress(min(max(fraction, 0.0), 1.0), text=text)

    try:
        src.load(tell)
    finally:
        if bar:
            bar[0].empty()


def show_note() -> None:
    """What the real tensor is (and its tokens), or why it could not be made."""
    res = st.session_state.get(_RESULT)
    if isinstance(res, NormConfigError):
        st.error(
            f"**The real data could not be made:** {md_text(res, limit=300)}. The page uses "
            f"the {GENERATORS[DEFAULT_GENERATOR].label} generator instead.",
            icon=":material/block:",
        )
    elif isinstance(res, RealTensor):
        st.info(md_text(res.description, limit=600), icon=":material/memory:")
        if res.labels:
            with st.expander("Tokens (the sequences of the batch)"):
                for i, row in enumerate(res.labels):
                    st.markdown(_tokens(i, row))


def _tokens(i: int, row: tuple[str, ...]) -> str:
    more = f" … ({len(row) - SHOWN_TOKENS} more)" if len(row) > SHOWN_TOKENS else ""
    return f"b = {i}: " + " ".join(md_code(t, limit=30) for t in row[:SHOWN_TOKENS]) + more
