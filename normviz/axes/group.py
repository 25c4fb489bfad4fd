"""The selected group: the values behind one μ and σ², and the selected cell's computation.

The numbers are substituted into the formula, y = (x − μ) / √(σ² + ε) · γ + β with
γ = 1 and β = 0 (a freshly initialised layer), so a student can check them by hand.
When torch refuses the setting (one value per statistic), the section explains
the refusal and what to change; the block and the flat view still draw.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from normviz.axes.cells import AxesSetup, cell_text, clamp_cell, group_slices
from normviz.core import Contract, NormConfigError, Refusal, apply_contract, as_tensor
from normviz.knobs import Value
from normviz.sections import Progress, Section

SHOWN_VALUES = 6  # values of a group listed in the numbers section
INTRO = (
    "Each statistic (a mean and a variance; for RMSNorm, which does not centre, a mean "
    "square) comes from the group of values that share it. The selected cell's group, with "
    "its numbers substituted into the formula:"
)


def _num(v: float, digits: int = 4) -> str:
    """A number short enough for a formula on a projector (`digits` significant)."""
    if v == 0:
        return "0"
    if not math.isfinite(v):  # ε = 0 on constant data: 0/0
        return r"\text{NaN}" if math.isnan(v) else (r"\infty" if v > 0 else r"-\infty")
    if abs(v) >= 1e4 or abs(v) < 1e-3:
        mant, exp = f"{v:.{digits - 1}e}".split("e")
        return rf"{mant}\times 10^{{{int(exp)}}}"
    return f"{v:.{digits}g}"


def _shown(v: float, digits: int) -> float:
    """`v` as a student reads it off the page (rounded to `digits` significant digits)."""
    return float(f"{v:.{digits - 1}e}") if math.isfinite(v) and v else v


def _eps(v: float) -> str:
    return "0" if v == 0 else f"10^{{{round(math.log10(v))}}}" if _is_pow10(v) else _num(v)


def _is_pow10(v: float) -> bool:
    return v > 0 and math.isclose(10 ** round(math.log10(v)), v, rel_tol=1e-9)


@dataclass(frozen=True)
class GroupDetail:
    """One statistic group: which values it pools and the selected cell's computation."""

    layout: str
    method_label: str
    cell: tuple[int, ...]
    m: int  # values pooled into this mean and variance
    size_text: str  # "B·T = 24"
    values: tuple[float, ...]  # the first few values of the group (row-major)
    mean: float | None  # μ; None when the method does not centre (RMSNorm)
    var: float  # σ² (biased), or the mean square when not centred
    eps: float
    x: float  # the selected cell's input
    y: float  # its output (γ = 1, β = 0: a freshly initialised layer)

    @property
    def centred(self) -> bool:
        return self.mean is not None

    def values_text(self) -> str:
        """`1.23, −0.5, … (24 values)`."""
        shown = ", ".join(f"{v:.3f}" for v in self.values)
        more = f", … ({self.m:,} values)" if self.m > len(self.values) else ""
        return shown + more

    def stats_latex(self) -> str:
        """μ and σ² of the group as LaTeX, with m shown."""
        if self.mean is None:
            return (
                rf"\tfrac{{1}}{{m}}\textstyle\sum x^2 = {_num(self.var, self.digits)}"
                rf"\quad (m = {self.m:,})"
            )
        return (
            rf"\mu = \tfrac{{1}}{{m}}\textstyle\sum x = {_num(self.mean, self.digits)},\quad "
            rf"\sigma^2 = \tfrac{{1}}{{m}}\textstyle\sum (x-\mu)^2 = "
            rf"{_num(self.var, self.digits)}"
            rf"\quad (m = {self.m:,})"
        )

    def formula_latex(self) -> str:
        """The symbolic formula this group uses: no μ and no β when the method does not
        centre (torch's RMSNorm has a weight γ and no bias)."""
        if self.mean is None:
            return r"y = \frac{x}{\sqrt{\tfrac{1}{m}\sum x^2 + \varepsilon}} \cdot \gamma"
        return r"y = \frac{x - \mu}{\sqrt{\sigma^2 + \varepsilon}} \cdot \gamma + \beta"

    @property
    def digits(self) -> int:
        """Significant digits that let a calculator reproduce y (4 when they do, up to 9)."""
        for digits in range(4, 10):
            x, var = _shown(self.x, digits), _shown(self.var, digits)
            mean = 0.0 if self.mean is None else _shown(self.mean, digits)
            y = (x - mean) / math.sqrt(var + self.eps) if var + self.eps > 0 else math.nan
            if math.isclose(y, _shown(self.y, 4), rel_tol=5e-4, abs_tol=5e-4):
                return digits
        return 9

    def computation_latex(self) -> str:
        """The formula with the numbers substituted (γ = 1, β = 0), each shown to the digits
        that reproduce the result on a calculator."""
        d = self.digits
        x = _num(self.x, d)
        num = (
            f"{x} - ({_num(self.mean, d)})"
            if self.mean is not None and self.mean < 0
            else (f"{x} - {_num(self.mean, d)}" if self.mean is not None else x)
        )
        den = rf"\sqrt{{{_num(self.var, d)} + {_eps(self.eps)}}}"
        tail = r"\cdot 1" if self.mean is None else r"\cdot 1 + 0"
        return rf"y = \frac{{{num}}}{{{den}}} {tail} = {_num(self.y)}"


def selected_group(
    x: torch.Tensor | np.ndarray, con: Contract, cell: Sequence[int], eps: float = 1e-5
) -> GroupDetail:
    """The statistic group of `cell` under `con`, its μ and σ², and the cell's normalized value.

    Raises:
        Refusal: what torch refuses (one value per statistic in training), with the hint.
        NormConfigError: a cell outside the tensor, or an x of another shape.
    """
    x = as_tensor(x)
    cell = tuple(int(i) for i in cell)
    if clamp_cell(tuple(x.shape), cell) != cell:
        raise NormConfigError(
            f"cell {cell} is outside the tensor {con.layout_obj.shape_text(tuple(x.shape))}"
        )
    if tuple(x.shape) != con.shape:
        raise NormConfigError(f"x has shape {tuple(x.shape)}, the contract {con.shape}")
    try:
        res = apply_contract(x, con, eps=eps)
    except Refusal as e:
        hint = refusal_hint(con).rstrip(".")
        raise Refusal(f"{e}. {hint}" if hint else str(e)) from None
    box = x[group_slices(con, cell)]
    # the statistics are keepdim tensors broadcastable to x: index them at the cell
    at = tuple(0 if n == 1 else i for i, n in zip(cell, res.var.shape, strict=True))
    mean = None if res.mean is None else float(res.mean[at])
    return GroupDetail(
        layout=con.layout,
        method_label=con.method_obj.label,
        cell=cell,
        m=con.group_size,
        size_text=con.size_text(),
        values=tuple(float(v) for v in box.reshape(-1)[:SHOWN_VALUES]),
        mean=mean,
        var=float(res.var[at]),
        eps=float(eps),
        x=float(x[cell]),
        y=float(res.output[cell]),
    )


def refusal_hint(con: Contract) -> str:
    """What to change when torch refuses a setting that has one value per statistic."""
    if con.group_size > 1:
        return ""
    m = con.method_obj
    pooled = [a for a in con.axes if "/" not in a]
    grow = " or ".join(pooled) if pooled else con.layout_obj.channel
    where = "In training, t" if m.train_eval_differ else "T"
    return (
        f"{where}orch needs at least two values per {m.stat_noun} to estimate a variance "
        f"(one value has variance 0, so the output would be all zeros). Make {grow} "
        "larger than 1"
        + (
            "; in evaluation mode BatchNorm uses its running statistics and accepts any batch."
            if m.train_eval_differ
            else "."
        )
    )


# ---- the section --------------------------------------------------------------------


def run(setup: AxesSetup, knobs: Mapping[str, Value], progress: Progress) -> GroupDetail:
    return selected_group(setup.tensor(), setup.contract, setup.selected, setup.eps)


def notes(d: GroupDetail) -> list[str]:
    """The group in words, μ and σ², the formula, and the cell's computation."""
    return [
        f"The cell **{cell_text(d.layout, d.cell)}** takes its statistics from a group of "
        f"**m = {d.size_text}** values, itself included (highlighted above). The group's "
        f"first {len(d.values)} values, in row-major order: {d.values_text()}.",
        f"$$\n{d.stats_latex()}\n$$",  # display maths: $$ on lines of their own
        f"$$\n{d.formula_latex()}\n$$",  # display maths: $$ on lines of their own
        f"$$\n{d.computation_latex()}\n$$",  # display maths: $$ on lines of their own
        _params_note(d),
    ]


def _params_note(d: GroupDetail) -> str:
    """What γ (and β) are here, and how many digits the substituted numbers carry."""
    params = (
        "γ = 1, as in a freshly initialised layer (RMSNorm has no β: it neither centres nor shifts)"
        if d.mean is None
        else "γ = 1 and β = 0, as in a freshly initialised layer: training then learns the "
        "scale and shift it wants"
    )
    return (
        f"{params}. The numbers are shown to {d.digits} significant digits, enough to "
        "reproduce y on a calculator."
    )


SECTION = Section(
    slug="group",
    label="The selected group, with numbers",
    intro=INTRO,
    run=run,
    notes=notes,
)
