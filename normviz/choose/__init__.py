"""Which normalization? (/choose): a decision guide, and audits of real models and files.

Sections, in page order: the decision guide (`guide.py`), the audit of one zoo
model and the zoo at a glance (`model_audit.py`), the audit of a saved state_dict
(`state_dict.py`), the methods side by side (`compare.py`), and torch's own modules in
training vs evaluation mode and with their defaults (`defaults.py`). The audit itself
lives in `findings.py` (what it reports), `engine.py` (torch.fx placement),
`zoo.py` (the models), `saved.py` (saved tensors) and `tables.py` (frames, code).
"""

from __future__ import annotations

from collections.abc import Mapping

from normviz.choose.compare import TABLES
from normviz.choose.defaults import DEFAULTS, TRAIN_EVAL
from normviz.choose.guide import ARCHITECTURES, CONSTRAINTS, GUIDE, HELP
from normviz.choose.model_audit import INSPECT, ZOO_SECTION
from normviz.choose.state_dict import (
    SAMPLE_HELP,
    SAMPLE_NAME,
    STATE_DICT,
    UPLOAD_TYPES,
    Setup,
    Upload,
    sample_bytes,
)
from normviz.choose.zoo import MODELS
from normviz.knobs import merge
from normviz.sections import Section

SECTIONS: tuple[Section, ...] = (
    GUIDE,
    INSPECT,
    ZOO_SECTION,
    STATE_DICT,
    TABLES,
    TRAIN_EVAL,
    DEFAULTS,
)
KNOBS = merge(*(s.knobs for s in SECTIONS))  # the page's URL parameters, each once

# How a knob's choices read in its widget (knob name -> value -> label).
LABELS: dict[str, Mapping[str, str]] = {
    "arch": ARCHITECTURES,
    "constraints": CONSTRAINTS,
    "model": {k: z.label for k, z in MODELS.items()},
}


def example_setup() -> Setup:
    """No upload: the state_dict section audits the sample file when asked."""
    return Setup()


__all__ = [
    "HELP",
    "KNOBS",
    "LABELS",
    "SAMPLE_HELP",
    "SAMPLE_NAME",
    "SECTIONS",
    "STATE_DICT",
    "UPLOAD_TYPES",
    "Setup",
    "Upload",
    "example_setup",
    "sample_bytes",
]
