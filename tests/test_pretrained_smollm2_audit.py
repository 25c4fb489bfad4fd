"""/choose audits SmolLM2 from its GGUF header alone: 61 RMSNorms with the header's ε,
pre-norm in each block and a final norm, γ and no β, and nothing dequantized."""

from __future__ import annotations

import pytest
from conftest import assert_clean, run_app

from normviz.choose import header_audit, zoo
from normviz.choose.findings import FINAL, PRE
from normviz.pretrained import smollm2


@pytest.fixture(scope="module")
def report():
    smollm2.header.cache_clear()  # read the header afresh, with dequantizing forbidden
    mp = pytest.MonkeyPatch()
    from gguf import quants

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the header audit dequantized a tensor")

    mp.setattr(quants, "dequantize", refuse)
    mp.setattr(smollm2, "weights", refuse)
    try:
        yield zoo.audit_zoo_model("smollm2")
    finally:
        mp.undo()


def test_the_header_audit_reports_smollm2s_norms(report) -> None:
    types = smollm2.tensor_types()
    assert [f.name for f in report.findings] == list(smollm2.NORMS) and len(report.findings) == 61
    assert {f.module_type for f in report.findings} == {"RMSNorm"}
    assert all(f.has_gamma and not f.has_beta for f in report.findings)
    assert all(types[f"{f.name}.weight"] == "F32" for f in report.findings)
    assert [f.placement for f in report.findings] == [PRE] * 60 + [FINAL]
    assert report.residual_adds == 60 and not report.needless_biases
    assert report.model_name.endswith(f"RMSNorm ε = {smollm2.config().eps:.0e})")
    assert smollm2.config().eps == pytest.approx(1e-5)
    answers = dict(report.checklist())
    assert answers["Normalization layers"] == "61: RMSNorm"
    assert answers["Normalized axes"] == "RMSNorm: C"
    assert answers["Depends on the batch / differs train vs eval"].startswith("no (measured)")
    assert not report.param_groups.decay or all(
        not n.endswith("norm.weight") for n in report.param_groups.decay
    )
    assert set(report.param_groups.norm_params) == {f"{n}.weight" for n in smollm2.NORMS}


def test_a_norm_whose_branch_is_missing_is_not_called_pre_norm() -> None:
    """The placement is read from the tensors each norm feeds: the test can fail."""
    tensors = {"blk.0.attn_q.weight": "Q4_1", "blk.0.attn_k.weight": "Q4_1"}
    assert header_audit.placement("blk.0.attn_norm", tensors) == "unknown"
    tensors["blk.0.attn_v.weight"] = "Q4_1"
    assert header_audit.placement("blk.0.attn_norm", tensors) == PRE
    assert header_audit.placement("output_norm", {}) == FINAL


def test_choose_lists_and_audits_smollm2(report) -> None:
    assert "smollm2" in zoo.ZOO and "smollm2" in zoo.PRETRAINED
    at = run_app("choose", {"model": "smollm2"}, timeout=300)
    assert_clean(at)
    tables = [t.value for t in at.table]
    found = next(t for t in tables if "placement" in t.columns and len(t) == 61)
    assert list(found["placement"]) == [PRE] * 60 + [FINAL]
    zoo_table = next(t for t in tables if "residual adds" in t.columns)
    assert "SmolLM2-135M (pretrained language model, RMSNorm)" in zoo_table.index
