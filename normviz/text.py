"""Registry-driven tables and phrases the pages show (no streamlit here)."""

from __future__ import annotations

import functools

import pandas as pd
import torch
from torch import nn

from normviz.core import Contract, contract
from normviz.layouts import LAYOUTS
from normviz.methods import METHODS, STANDARD_METHODS

FORMULA = r"y \;=\; \gamma \cdot \frac{x - \mu}{\sqrt{\sigma^2 + \varepsilon}} \;+\; \beta"


def direction(factor: float, band: float) -> int:
    """How a ratio moved, for the words that describe it: -1 shrank (below 1/band),
    +1 grew (above band), 0 stayed within a factor `band` either way."""
    return -1 if factor < 1 / band else 1 if factor > band else 0


def yes_no(flag: bool) -> str:
    return "yes" if flag else "no"


def train_eval_text(method: str) -> str:
    """The train ≠ eval answer ("yes"/"no") with the constructor flag it hangs on."""
    m = METHODS[method]
    note = f" ({m.train_eval_note})" if m.train_eval_note else ""
    return yes_no(m.train_eval_differ) + note


def _layout_contract(method: str, layout: str) -> Contract:
    """The method's contract at the layout's default shape (GroupNorm with G = 1)."""
    lay = LAYOUTS[layout]
    groups = 1 if METHODS[method].grouped else None
    return contract(method, layout, [lay.defaults[a] for a in lay.axes], groups=groups)


NO_POOL = "nothing: no statistics"  # an elementwise method's "pools" column


def reduces_text(method: str, layout: str) -> str:
    """`B, T` or `T, C/G`: what one statistic pools, as the contract table shows it."""
    if METHODS[method].kind == "elementwise":
        return NO_POOL
    return ", ".join(_layout_contract(method, layout).axes)


def keeps_text(method: str, layout: str) -> str:
    """`C` or `B, G`: the axes that keep separate statistics (elementwise: every axis)."""
    if METHODS[method].kind == "elementwise":
        return ", ".join(LAYOUTS[layout].axes)
    return ", ".join(_layout_contract(method, layout).kept)


def contract_table() -> pd.DataFrame:
    """One row per method: what it pools and keeps in each layout, and how it behaves."""
    rows = []
    for key in STANDARD_METHODS:
        m = METHODS[key]
        row = {"method": m.label}
        for lay in LAYOUTS:
            row[f"{lay} pools"] = reduces_text(key, lay)
            row[f"{lay} keeps apart"] = keeps_text(key, lay)
        row |= {
            "subtracts μ": yes_no(m.centred),
            "uses other samples": yes_no(m.batch_dependent),
            "train ≠ eval": train_eval_text(key),
            "natural setting": m.natural_setting,
        }
        rows.append(row)
    return pd.DataFrame(rows).set_index("method")


# ---- torch's defaults, read off constructed modules (never written by hand) ----------

DEFAULTS_C, DEFAULTS_G = 8, 2  # the channels (and GroupNorm's groups) the modules are built with


def default_layout(method: str) -> str:
    """The layout torch's default module for `method` is shown in: channel-first modules in
    their 2d form (nn.BatchNorm2d), the others over the last axis (nn.LayerNorm(C))."""
    return "NCHW" if METHODS[method].torch["NCHW"].channel_first else "BTC"


def _default_shape(method: str, C: int) -> tuple[int, ...]:
    return (1, C, 1, 1) if default_layout(method) == "NCHW" else (1, 1, C)


def default_module(method: str, C: int = DEFAULTS_C, G: int = DEFAULTS_G) -> nn.Module:
    """torch's module for a standard method over C channels, every default kept (eps too),
    built by the registry's factory."""
    g = G if METHODS[method].grouped else None
    return METHODS[method].build(default_layout(method), _default_shape(method, C), g, eps=None)


def _call_text(method: str, mod: nn.Module) -> str:
    """`nn.GroupNorm(2, 8)`: the registry's constructor with torch's defaults."""
    g = DEFAULTS_G if METHODS[method].grouped else None
    return METHODS[method].torch_text(
        default_layout(method), _default_shape(method, DEFAULTS_C), g, eps=None
    )


def _flag(mod: nn.Module, *names: str) -> str:
    for n in names:
        if hasattr(mod, n):
            return f"{n}={getattr(mod, n)}"
    return "—"


PROBE_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


@functools.lru_cache(maxsize=8)  # pure: one probe per dtype and process
def rms_none_eps(dtype: torch.dtype) -> float:
    """The eps nn.RMSNorm(eps=None) uses on a `dtype` input, measured, not assumed.

    A constant input of √(float32 eps) tells the candidates apart: the output with
    eps=None is compared with the outputs of each candidate eps passed explicitly.
    """
    cands = [torch.finfo(d).eps for d in (dtype, torch.float32, torch.float64)]
    x = torch.full((1, 4), torch.finfo(torch.float32).eps ** 0.5, dtype=dtype)
    with torch.no_grad():
        want = nn.RMSNorm(4).to(dtype)(x)
        for c in cands:
            if torch.equal(nn.RMSNorm(4, eps=c).to(dtype)(x), want):
                return c
    raise RuntimeError(f"nn.RMSNorm(eps=None) on {dtype} matches none of {cands}")


def and_join(words: list[str]) -> str:
    """"a", "a and b", "a, b and c"."""
    return ", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else "".join(words)


def rms_none_eps_text() -> str:
    """What eps=None means per input dtype, grouped by the value torch actually uses."""
    groups: dict[float, list[str]] = {}
    for d in PROBE_DTYPES:
        groups.setdefault(rms_none_eps(d), []).append(str(d).removeprefix("torch."))
    names = {torch.finfo(d).eps: str(d).removeprefix("torch.") for d in PROBE_DTYPES[::-1]}
    parts = [
        f"{names[e]}'s machine epsilon, {e:.3g}, for {and_join(ds)} inputs"
        for e, ds in groups.items()
    ]
    return "; ".join(parts)


def eps_text(eps: float | None) -> str:
    """A module's eps; for None, the value torch uses, measured per input dtype."""
    if eps is None:
        return f"None: {rms_none_eps_text()}"
    return f"{eps:g}"


def parameter_names(method: str) -> tuple[str, ...]:
    """The learned tensors torch's default module holds: ("weight", "bias") or fewer."""
    return tuple(n for n, _ in default_module(method).named_parameters(recurse=False))


def torch_defaults_table() -> pd.DataFrame:
    """What each torch module does when built with only its sizes: read off the module."""
    rows = []
    for key in STANDARD_METHODS:
        mod = default_module(key)
        params = parameter_names(key)
        buffers = [n for n, _ in mod.named_buffers(recurse=False)]
        rows.append(
            {
                "method": METHODS[key].label,
                "built as": _call_text(key, mod),
                "eps": eps_text(getattr(mod, "eps", None)),
                "affine flag": _flag(mod, "affine", "elementwise_affine"),
                "learned": ", ".join(params) or "nothing",
                "track_running_stats": _flag(mod, "track_running_stats"),
                "buffers": ", ".join(buffers) or "none",
                "momentum": _flag(mod, "momentum"),
            }
        )
    return pd.DataFrame(rows).set_index("method")


def formula_note() -> str:
    """What the methods share and where RMSNorm leaves the formula, from torch's modules."""
    sym = {"weight": "γ", "bias": "β"}
    names = [f"{n}, its {sym[n]}" if n in sym else n for n in parameter_names("rms")]
    learned = (
        f"torch's nn.RMSNorm has one learned tensor, {names[0]}"
        if len(names) == 1
        else f"torch's nn.RMSNorm learns {and_join(names) or 'nothing'}"
    )
    shared = [METHODS[k].label for k in shared_keys()]
    bare = [METHODS[k].label for k in shared_keys() if not parameter_names(k)]
    off = (
        f" ({' and '.join(bare)} by default with γ = 1 and β = 0: torch builds it with "
        "affine=False)"
        if bare
        else ""
    )
    return (
        f"{', '.join(shared[:-1])} and {shared[-1]} compute exactly this formula{off}; they "
        "differ only in **which values are pooled to get μ and σ²**. RMSNorm also changes "
        "the formula: it subtracts no mean, divides by the root mean square, and has no β "
        f"({learned})."
    )


def why_normalize() -> str:
    """Home's opening paragraph; the methods that do not centre are named from the registry."""
    uncentred = and_join([METHODS[k].label for k in STANDARD_METHODS if not METHODS[k].centred])
    return (
        "A deep network feeds each layer the output of the layer before it. While the "
        "earlier layers learn, the numbers they pass on keep drifting in scale and centre, "
        "so every later layer is aiming at a moving target. A **normalization layer** "
        "re-centres and re-scales activations to mean 0 and variance 1 over each group of "
        f"values it pools, except {uncentred}, which only re-scales: it subtracts no mean and "
        "divides by the root mean square, so its output has mean square 1, not mean 0. "
        "Then the network picks the scale it actually wants with learned vectors, γ and β "
        f"({uncentred}: γ only). Training gets steadier, tolerates larger learning rates and "
        "cares less about initialization."
    )


def shared_keys() -> tuple[str, ...]:
    """The standard methods that subtract the mean (every one but RMSNorm)."""
    return tuple(k for k in STANDARD_METHODS if METHODS[k].centred)
