"""normviz: every normalization layer is one formula over a choice of axes.

>>> import normviz, torch
>>> res = normviz.normalize(torch.randn(4, 6, 8), "batch", "BTC")
>>> res.axes
('B', 'T')
"""

from normviz import io
from normviz.core import (
    Contract,
    NormResult,
    contract,
    group_ids,
    identify,
    normalize,
    parse_axes,
)
from normviz.errors import NormConfigError, Refusal
from normviz.layouts import LAYOUTS, Layout
from normviz.methods import METHODS, STANDARD_METHODS, Method
from normviz.running import RunningStats

__all__ = [
    "LAYOUTS",
    "METHODS",
    "STANDARD_METHODS",
    "Contract",
    "Layout",
    "Method",
    "NormConfigError",
    "NormResult",
    "Refusal",
    "RunningStats",
    "contract",
    "group_ids",
    "identify",
    "io",
    "normalize",
    "parse_axes",
]
