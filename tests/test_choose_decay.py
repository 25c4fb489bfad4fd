"""The weight-decay check reads real optimizers' param_groups; the code it shows runs."""

from __future__ import annotations

import contextlib
import io

import pytest
import torch

from normviz.choose import engine, findings, model_audit, zoo

KEYS = [k for k in zoo.ZOO if k not in zoo.PRETRAINED]


def _model(key: str) -> torch.nn.Module:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return zoo.ZOO[key].build()


def _norm_params(model: torch.nn.Module) -> list[str]:
    norms = {n for n, m in model.named_modules() if findings.method_of(m) is not None}
    return [n for n, _ in model.named_parameters() if n.rpartition(".")[0] in norms]


def _torch_decay(model: torch.nn.Module, opt: torch.optim.Optimizer) -> dict[str, float]:
    """torch: the weight_decay of each parameter's group, found by identity."""
    out = {}
    for name, p in model.named_parameters():
        (group,) = [g for g in opt.param_groups if any(q is p for q in g["params"])]
        out[name] = group["weight_decay"]
    return out


@pytest.mark.parametrize("key", KEYS)
def test_both_optimizers_are_read_off_their_param_groups(key: str) -> None:
    model = _model(key)
    report = zoo.audit_zoo_model(key)
    naive, grouped = report.optimizers
    norm = _norm_params(model)
    assert norm and set(norm) == set(report.param_groups.norm_params)
    want_naive = _torch_decay(model, torch.optim.AdamW(model.parameters(), weight_decay=0.01))
    want_grouped = _torch_decay(model, torch.optim.AdamW(report.param_groups.groups(model, 0.01)))
    assert naive.decayed == tuple(n for n in norm if want_naive[n] > 0) == tuple(norm)
    assert grouped.decayed == () and grouped.exempt == tuple(norm)
    assert all(want_grouped[n] == 0 for n in norm)
    row = dict(report.checklist())["Normalization parameters excluded from weight decay"]
    assert row == (
        f"{engine.NAIVE}: every norm γ/β decayed ({len(norm)} of {len(norm)}, weight_decay "
        f"0.01); {engine.GROUPED}: no norm γ/β decayed (0 of {len(norm)})"
    )


def test_a_partly_exempt_optimizer_is_counted() -> None:
    model = _model("resnet")
    params = dict(model.named_parameters())
    decay = [p for n, p in params.items() if n != "bn1.weight"]
    opt = torch.optim.SGD(
        [{"params": decay, "weight_decay": 5e-4}, {"params": [params["bn1.weight"]]}],
        lr=0.1,
        weight_decay=0.0,
    )
    check = findings.decay_check(model, opt, "SGD")
    assert check.decayed == ("bn1.bias", "bn2.weight", "bn2.bias")
    assert check.exempt == ("bn1.weight",) and check.decays == (5e-4,)
    report = engine.audit(model, torch.randn(2, 16, 8, 8))
    partial = findings.AuditReport(
        "x", report.findings, 1, True, report.param_groups, (check,)
    ).checklist()
    assert dict(partial)["Normalization parameters excluded from weight decay"] == (
        "SGD: 3 of 4 norm γ/β decayed (weight_decay 0.0005)"
    )


@pytest.mark.parametrize("key", KEYS)
def test_the_shown_optimizer_code_runs_and_agrees(key: str) -> None:
    report = zoo.audit_zoo_model(key)
    res = model_audit.Inspection(key, report)
    extras = model_audit.inspect_extras(res)
    (code,) = [e.body for e in extras if e.kind == "code" and e.fold == model_audit.DECAY_FOLD]
    out = io.StringIO()
    scope: dict[str, object] = {}
    with contextlib.redirect_stdout(out):
        exec(str(code), scope)
    assert out.getvalue().strip() == str(list(report.optimizers[0].decayed))
    n = len(report.param_groups.norm_params)
    assert f"# {n} of {n} norm γ/β" in str(code)
    # the function the code shows gives the audit's answer for the two-group recipe too
    model = scope["model"]
    fn = scope["decayed_norm_params"]
    grouped = torch.optim.AdamW(report.param_groups.groups(model, 0.01))  # type: ignore[arg-type]
    assert fn(model, grouped) == list(report.optimizers[1].decayed) == []  # type: ignore[operator]
    (text,) = [e.body for e in extras if e.kind == "markdown" and e.fold == model_audit.DECAY_FOLD]
    assert str(text).startswith(f"{engine.NAIVE}: decays {n} norm γ/β (")


def test_a_model_without_parameters_has_nothing_to_exempt() -> None:
    norm = torch.nn.InstanceNorm2d(3)  # affine=False: no γ/β, no parameters at all
    report = engine.audit(torch.nn.Sequential(norm), torch.randn(2, 3, 4, 4))
    assert report.optimizers == ()
    row = dict(report.checklist())["Normalization parameters excluded from weight decay"]
    assert row == "nothing to exempt: the norm layers have no γ/β"
