"""/choose's torch sections: training vs evaluation mode, and torch's defaults, read off torch."""

from __future__ import annotations

import re

import pytest
import torch
from torch import nn

from normviz import METHODS, STANDARD_METHODS
from normviz.choose import SECTIONS, compare, defaults
from normviz.sections import no_progress
from normviz.text import contract_table, default_module, parameter_names, torch_defaults_table


def test_train_eval_gap_is_what_torch_does() -> None:
    res = defaults.TRAIN_EVAL.run(None, {}, no_progress)
    t = res.table
    assert list(t.index) == [label for label, _ in defaults.CONFIGS]
    # the defaults agree with the registry's flags
    assert t.loc["nn.BatchNorm2d(C)", "differs"] == METHODS["batch"].train_eval_differ
    assert t.loc["nn.InstanceNorm2d(C)", "differs"] == METHODS["instance"].train_eval_differ
    for label in ("nn.GroupNorm(G, C)", "nn.LayerNorm((C, H, W))", "nn.RMSNorm((C, H, W))"):
        assert not t.loc[label, "differs"]
    # the flag flips both answers
    assert t.loc["nn.InstanceNorm2d(C, track_running_stats=True)", "differs"]
    assert not t.loc["nn.BatchNorm2d(C, track_running_stats=False)", "differs"]
    # by hand: InstanceNorm with running stats, trained on the same batches
    data = defaults.batches()
    inorm = nn.InstanceNorm2d(defaults.DEFAULTS_C, track_running_stats=True)
    with torch.no_grad():
        for x in data[:-1]:
            inorm.train()(x)
        y_eval = inorm.eval()(data[-1])
        y_train = nn.functional.instance_norm(data[-1])  # training mode: the sample's own stats
    gap = float((y_train - y_eval).abs().max())
    label = "nn.InstanceNorm2d(C, track_running_stats=True)"
    assert t.loc[label, "max |train − eval|"] == pytest.approx(gap, rel=1e-5)
    text = " ".join(defaults.TRAIN_EVAL.notes(res))
    assert f"`{label}`" in text.split("They agree")[0]


def test_the_defaults_table_is_read_off_the_modules() -> None:
    t = torch_defaults_table()
    assert list(t.index) == [METHODS[k].label for k in STANDARD_METHODS]
    assert t.loc["InstanceNorm", "affine flag"] == "affine=False"
    assert t.loc["InstanceNorm", "track_running_stats"] == "track_running_stats=False"
    assert t.loc["InstanceNorm", "learned"] == "nothing"
    assert t.loc["BatchNorm", "track_running_stats"] == "track_running_stats=True"
    assert t.loc["LayerNorm", "eps"] == f"{nn.LayerNorm(4).eps:g}"
    assert t.loc["RMSNorm", "eps"].startswith("None")
    assert parameter_names("rms") == ("weight",)
    assert parameter_names("layer") == ("weight", "bias")
    for k in STANDARD_METHODS:
        assert isinstance(default_module(k), nn.Module)


def test_rmsnorm_eps_none_is_the_dtype_machine_epsilon() -> None:
    """What the defaults section says about eps=None, checked numerically."""
    assert nn.RMSNorm(8).eps is None
    x = 1e-4 * torch.randn(3, 8, dtype=torch.float64)  # tiny: eps matters
    fin = torch.finfo(torch.float64).eps
    want = x / torch.sqrt(x.square().mean(-1, keepdim=True) + fin)
    with torch.no_grad():
        torch.testing.assert_close(nn.RMSNorm(8).double()(x), want)
    res = defaults.DEFAULTS.run(None, {}, no_progress)
    text = " ".join(defaults.DEFAULTS.notes(res))
    assert f"{torch.finfo(torch.float32).eps:.3g}" in text and "RMSNorm's eps is None" in text
    assert "InstanceNorm learns no γ or β" in text


@pytest.mark.parametrize(
    ("dtype", "value"),
    [(torch.float16, 1e-3), (torch.bfloat16, 0.01), (torch.float32, 1e-4), (torch.float64, 1e-8)],
)
def test_each_dtype_is_paired_with_the_eps_torch_uses(dtype: torch.dtype, value: float) -> None:
    """Issue 24 item 1: a bf16 input of 0.01 gives 1.0 with eps=None, as with float32's eps."""
    x = torch.full((1, 4), value, dtype=dtype)
    with torch.no_grad():
        y_none = nn.RMSNorm(4).to(dtype)(x)
        outs = {
            d: nn.RMSNorm(4, eps=torch.finfo(d).eps).to(dtype)(x)
            for d in (dtype, torch.float32, torch.float64)
        }
    used = [torch.finfo(d).eps for d, y in outs.items() if torch.equal(y, y_none)]
    assert used, "eps=None matches none of the machine epsilons"
    res = defaults.DEFAULTS.run(None, {}, no_progress)
    note = next(n for n in defaults.DEFAULTS.notes(res) if "eps is None" in n)
    name = str(dtype).removeprefix("torch.")
    pairs = re.findall(r"([0-9.e+-]+), for ([a-z0-9, ]+?) inputs", note)
    stated = [v for v, names in pairs if name in re.split(r", | and ", names)]
    assert stated == [f"{used[0]:.3g}"], note
    table_cell = torch_defaults_table().loc["RMSNorm", "eps"]
    for wrong in {torch.finfo(dtype).eps} - set(used):  # the dtype's own eps, if unused
        assert f"{wrong:.3g}" not in note and f"{wrong:.3g}" not in table_cell


def test_train_eval_columns_name_the_flag() -> None:
    for df, col in ((contract_table(), "train ≠ eval"), (compare.comparison_table(), None)):
        col = col or "train ≠ inference"
        assert df.loc["InstanceNorm", col].startswith("no (")
        assert "track_running_stats=False" in df.loc["InstanceNorm", col]
        assert "track_running_stats=True" in df.loc["BatchNorm", col]
        assert df.loc["LayerNorm", col] == "no"
    t = compare.comparison_table()
    assert t.loc["BatchNorm", "mixes examples"].startswith("yes")
    assert t.loc["LayerNorm", "data-parallel training"] == "nothing to synchronize"


def test_the_sections_are_on_the_page_in_order() -> None:
    slugs = [s.slug for s in SECTIONS]
    assert slugs.index("tables") + 1 == slugs.index("train-eval")  # "the next section"
    assert "torch-defaults" in slugs


def _depth(text: str) -> int:
    """How deeply parentheses nest in `text`."""
    depth = deepest = 0
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        deepest = max(deepest, depth)
    return deepest


def test_no_table_cell_nests_parentheses() -> None:
    """Issue 24 item 21: the BatchNorm row read "yes (with … True (with False, …))"."""
    for df in (contract_table(), compare.comparison_table(), torch_defaults_table()):
        for method, row in df.iterrows():
            for col, value in row.items():
                assert _depth(str(value)) <= 1, (method, col, value)
    # the flag's two settings are still both named, and the rows still say which is default
    bn = contract_table().loc["BatchNorm", "train ≠ eval"]
    assert bn.startswith("yes (") and "track_running_stats=True" in bn and "False" in bn
