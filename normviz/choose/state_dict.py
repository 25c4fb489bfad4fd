"""Audit a saved state_dict: an uploaded file, or the app's sample file.

The file is read safely (`normviz.io.load_tensors`: safetensors, or torch.load with
weights_only, so no code runs) in one function, `read_upload`, and searched for
normalization parameters and running statistics (`saved.py`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd
import torch

from normviz import io
from normviz.choose.findings import AuditError
from normviz.choose.saved import StateDictReport, audit_state_dict
from normviz.choose.tables import saved_norms_frame
from normviz.choose.zoo import zoo_safetensors
from normviz.knobs import Knob, Value
from normviz.sections import Extra, Progress, Section

INTRO = (
    "Upload a `.safetensors` or `.pt` file of saved weights. It is read safely "
    "(safetensors, or torch.load with weights_only: no code runs) and searched for "
    "normalization parameters and running statistics. Without the model's code, the "
    "kind of layer is a guess from names and shapes."
)
KNOBS = (Knob("use_sample", False, label="Audit the sample file instead"),)
UPLOAD_TYPES = ("safetensors", "pt", "pth")
SAMPLE_MODEL = "resnet"  # ZOO key of the sample file's model
SAMPLE_NAME = "resnet_block.safetensors"
SAMPLE_HELP = "The ResNet block's state_dict after three training-mode batches."


@dataclass(frozen=True)
class Upload:
    """A file the user uploaded: its name and its bytes (the UI's subclass names the file
    by its parse-cache key instead, and reads the parsed tensors back from there)."""

    name: str
    data: bytes = field(repr=False)

    def tensors(self) -> Mapping[str, torch.Tensor]:
        """Every tensor of the file, read safely. Raises io.TensorLoadError."""
        return read_upload(self.data, self.name)


@dataclass(frozen=True)
class Setup:
    """The page's setup: the uploaded file, if any (only this section reads it)."""

    upload: Upload | None = None


@functools.lru_cache(maxsize=1)
def sample_bytes() -> bytes:
    """The sample file: the ResNet block's state_dict after three training batches."""
    return zoo_safetensors(SAMPLE_MODEL)


def read_upload(data: bytes, name: str) -> Mapping[str, torch.Tensor]:
    """Every tensor of an uploaded file, read safely (the one place an upload is read)."""
    return io.load_tensors(data, name)


@dataclass(frozen=True)
class SavedAudit:
    """The audit of one file; `name` None: nothing to audit (no upload, sample off)."""

    name: str | None = None
    report: StateDictReport | None = None


def run(setup: Setup, knobs: Mapping[str, Value], progress: Progress) -> SavedAudit:
    """Audit the uploaded file, else the sample file when asked, else nothing.

    Raises:
        AuditError: the file was refused (unreadable, unsafe, empty, not tensors).
    """
    upload = setup.upload
    if upload is None and knobs["use_sample"]:
        upload = Upload(SAMPLE_NAME, sample_bytes())
    if upload is None:
        return SavedAudit()
    name = upload.name
    progress(0.0, "reading the file")
    try:
        # torch.save keeps a state_dict's module order; safetensors does not
        ordered = not name.lower().endswith(".safetensors")
        report = audit_state_dict(upload.tensors(), ordered=ordered)
    except (io.TensorLoadError, AuditError) as e:
        raise AuditError(f"{name[:60]} was refused: {e}") from e
    return SavedAudit(name, report)


def table(res: SavedAudit) -> pd.DataFrame | None:
    if res.report is None or not res.report.norms:
        return None
    return saved_norms_frame(res.report)


_ICON = ":material/"  # Streamlit turns this into an icon anywhere, code spans included


def _literal(text: str) -> str:
    """User text as a markdown code span: cut, on one line, no backtick to close it, what
    does not print shown as U+FFFD, and ":material/" split into two spans around an
    escaped "/" (so it shows as typed, not as an icon)."""
    s = " ".join(text[:60].replace("`", "'").split())
    s = "".join(c if c.isprintable() else "\ufffd" for c in s)
    parts = s.split(_ICON)
    spans = [f"`{p}:material`" if i < len(parts) - 1 else f"`{p}`" for i, p in enumerate(parts)]
    return "\\/".join(spans).replace("``", "")


def notes(res: SavedAudit) -> Sequence[str]:
    """What the file holds, counted."""
    r = res.report
    if r is None or res.name is None:
        return ()
    out = [
        f"{_literal(res.name)}: {r.n_tensors} tensors, {r.n_elements:,} numbers; "
        f"{len(r.norms)} module(s) with normalization parameters or buffers."
    ]
    if not r.norms:
        out.append("No normalization parameters or buffers found.")
    pairs = [(f"{n.fed_by}.bias", n.prefix) for n in r.norms if n.fed_by is not None]
    if pairs:
        named = ", ".join(f"{_literal(b)} → {_literal(p)}" for b, p in pairs)
        out.append(
            f"Likely needless bias ({len(pairs)}): {named}. A per-channel norm subtracts "
            "each channel's mean, which removes a constant bias; guessed from the saved "
            "order (or the names) and the shapes, as the model's code is not in the file."
        )
    return out


def extras(res: SavedAudit) -> Sequence[Extra]:
    r = res.report
    if r is None:
        return ()
    return (
        Extra(
            "caption",
            f"By shape alone: {len(r.decay)} tensors with 2 or more dimensions would get "
            f"weight decay, {len(r.no_decay)} one-dimensional weights and biases would not.",
        ),
    )


STATE_DICT = Section(
    slug="state-dict",
    label="Audit a saved state_dict",
    intro=INTRO,
    run=run,
    knobs=KNOBS,
    table=table,
    notes=notes,
    extras=extras,
)
