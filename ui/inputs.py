"""Inputs the UI hands to the topic packages, read through the UI's caches.

An uploaded file is parsed once per SHA-256 digest (`read_upload`, the one place its
bytes are read); a topic's setup names the upload by that digest and its key, and
`Upload.tensor()` takes the parsed array back from the cache. Generated inputs go
through the shared settings' cache (`state.input_tensor`). Setups stay small and
hashable: they never hold a tensor.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace

import numpy as np
import streamlit as st
import torch

from normviz import LAYOUTS, NormConfigError, io
from normviz.distributions import Generated, Uploaded
from ui import params as ns
from ui import state
from ui.safe import md_text


@st.cache_data(max_entries=3, show_spinner=False)  # up to 50 MB each
def _parse_upload(digest: str, _name: str, _data: bytes | None) -> dict[str, np.ndarray]:
    """Every tensor of an uploaded file, cached on the file's SHA-256 (not on its bytes)."""
    if _data is None:  # asked for by digest alone, after the cache let it go
        raise NormConfigError("the uploaded file is no longer in memory: upload it again")
    return {k: t.numpy() for k, t in io.load_tensors(_data, _name).items()}


def read_upload(data: bytes, name: str) -> tuple[str, dict[str, np.ndarray]]:
    """(SHA-256 digest, every tensor of the file). Raises io.TensorLoadError."""
    digest = hashlib.sha256(data).hexdigest()
    return digest, _parse_upload(digest, name, data)


@dataclass(frozen=True)
class Upload(Uploaded):
    """An uploaded tensor, read back from the parse cache by its file's digest."""

    def tensor(self) -> torch.Tensor:
        arr = _parse_upload(self.digest, "", None)[self.key]
        return io.as_input(torch.from_numpy(arr), self.key).tensor


@dataclass(frozen=True)
class Seeded(Generated):
    """A generated input, read through the shared settings' cache."""

    def tensor(self) -> torch.Tensor:
        sizes = dict(zip(LAYOUTS[self.layout].axes, self.shape, strict=True))
        s = ns.Settings(layout=self.layout, sizes=sizes, seed=self.seed, data=self.data)
        return state.input_tensor(s)


def uploader(intro: str, key: str) -> tuple[Upload, io.UserTensor] | None:
    """The "Bring your own tensor" expander: the uploaded tensor, or None (then: generated).

    Widget keys: `{key}_upload` (the file) and `{key}_key` (the tensor in it).
    """
    with st.expander("Bring your own tensor", icon=":material/upload_file:"):
        st.markdown(intro)
        f = st.file_uploader("Tensor file", key=f"{key}_upload")
        if f is None:
            return None
        try:
            digest, tensors = read_upload(f.getvalue(), f.name)
            keys = list(tensors)
            name = (
                st.selectbox("Tensor in the file", keys, key=f"{key}_key")
                if len(keys) > 1
                else keys[0]
            )
            if name not in tensors:  # a key remembered from another file
                name = keys[0]
            user = io.as_input(torch.from_numpy(tensors[name]), name)
        except io.TensorLoadError as e:
            st.error(f"**{md_text(f.name)} was refused:** {e}.", icon=":material/block:")
            return None
    shape = tuple(user.tensor.shape)
    return Upload(digest, user.key, user.layout, shape), user


def settings_for(s: ns.Settings, user: io.UserTensor | None) -> ns.Settings:
    """The shared settings, with the upload's layout and shape when there is one."""
    if user is None:
        return s
    lay = LAYOUTS[user.layout]
    return replace(
        s,
        layout=user.layout,
        sizes=dict(zip(lay.axes, user.tensor.shape, strict=True)),
        axes=tuple(a for a in s.axes if a in lay.axes) or (lay.channel,),
    )
