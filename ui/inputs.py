"""Inputs the UI hands to the topic packages, read through the UI's caches.

An uploaded file is parsed once per SHA-256 digest (`read_upload`, through
`ui.uploads`, whose cache is sized by bytes); a topic's setup names the upload by
that digest and its key, and `Upload.tensor()` takes the parsed array back from the
cache. Generated inputs go
through the shared settings' cache (`state.input_tensor`). Setups stay small and
hashable: they never hold a tensor.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import streamlit as st
import torch

from normviz import LAYOUTS, NormConfigError, io
from normviz.choose import Upload as SavedUpload
from normviz.distributions import Generated, Uploaded
from ui import params as ns
from ui import state, uploads


def read_upload(data: bytes, name: str) -> tuple[str, dict[str, np.ndarray]]:
    """(cache key, every tensor of the file), parsed once (ui.uploads). Raises
    io.TensorLoadError."""
    return uploads.key_of(data, name), uploads.parsed_bytes(data, name)


@dataclass(frozen=True)
class Upload(Uploaded):
    """An uploaded tensor, read back from the parse cache by its file's digest."""

    def tensor(self) -> torch.Tensor:
        tensors = uploads.cached(self.digest)
        if tensors is None:  # the byte-bounded cache let it go
            raise NormConfigError("the uploaded file is no longer in memory: upload it again")
        arr = tensors[self.key]
        return io.as_input(uploads.tensor(arr), self.key).tensor


@dataclass(frozen=True)
class SavedFile(SavedUpload):
    """An uploaded state_dict named by its parse-cache key (hashing it costs nothing)."""

    key: str = ""

    def tensors(self) -> dict[str, torch.Tensor]:
        parsed = uploads.cached(self.key)
        if parsed is None:  # the byte-bounded cache let it go
            raise io.TensorLoadError("the file is no longer in memory: upload it again")
        return {k: uploads.tensor(a) for k, a in parsed.items()}


def saved_file(f: uploads.Upload | None) -> SavedFile | None:
    """The uploaded file, parsed once (its refusal shown here), or None."""
    if f is None:
        return None
    try:
        key, _ = read_upload(f.getvalue(), f.name)
    except io.TensorLoadError as e:
        uploads.refusal(f.name, e)
        return None
    return SavedFile(f.name, b"", key)


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
            user = io.as_input(uploads.tensor(tensors[name]), name)
        except io.TensorLoadError as e:
            uploads.refusal(f.name, e)
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
