"""The model audit: every zoo model's findings asserted; axes checked against torch itself."""

from __future__ import annotations

import io as pyio
import pickle

import pytest
import safetensors.torch
import torch
import torch.nn.functional as F
from torch import nn

import normviz
from normviz import io
from normviz.choose import engine, findings, model_audit, saved, tables, zoo

PRE, POST, BRANCH, FINAL = findings.PRE, findings.POST, findings.BRANCH, findings.FINAL
BN_BUFFERS = ("running_mean", "running_var", "num_batches_tracked")

# For every zoo model: layer -> (type, placement, γ, β, running buffers, needless bias)
EXPECTED: dict[str, dict[str, tuple[str, str, bool, bool, tuple[str, ...], bool]]] = {
    "resnet": {
        "bn1": ("BatchNorm2d", BRANCH, True, True, BN_BUFFERS, True),  # conv1 has a bias
        "bn2": ("BatchNorm2d", BRANCH, True, True, BN_BUFFERS, False),  # conv2 has none
    },
    "pre_ln": {
        "ln1": ("LayerNorm", PRE, True, True, (), False),
        "ln2": ("LayerNorm", PRE, True, True, (), False),
    },
    "post_ln": {
        "ln1": ("LayerNorm", POST, True, True, (), False),
        "ln2": ("LayerNorm", POST, True, True, (), False),
    },
    "unet": {
        "enc.gn1": ("GroupNorm", PRE, True, True, (), False),
        "enc.gn2": ("GroupNorm", BRANCH, True, True, (), False),  # bias before GN is not needless
        "mid.gn1": ("GroupNorm", PRE, True, True, (), False),
        "mid.gn2": ("GroupNorm", BRANCH, True, True, (), False),
        "dec_norm": ("GroupNorm", FINAL, True, True, (), False),
    },
    "style": {
        "in1": ("InstanceNorm2d", BRANCH, True, True, (), True),  # per-channel mean: needless
        "in2": ("InstanceNorm2d", BRANCH, True, True, (), True),
    },
    "rms_decoder": {
        "attn_norm": ("RMSNorm", PRE, True, False, (), False),  # RMSNorm has no β
        "mlp_norm": ("RMSNorm", PRE, True, False, (), False),
    },
}
AXES = {
    "resnet": ("N, H, W", "C"),
    "pre_ln": ("C", "B, T"),
    "post_ln": ("C", "B, T"),
    "unet": ("C/G, H, W", "N, G"),
    "style": ("H, W", "N, C"),
    "rms_decoder": ("C", "B, T"),
}
LAYOUT = {"resnet": "NCHW", "unet": "NCHW", "style": "NCHW"}


@pytest.fixture(scope="module")
def reports() -> dict[str, findings.AuditReport]:
    return {k: zoo.audit_zoo_model(k) for k in zoo.ZOO}


def test_the_zoo_is_what_the_issue_asks_for() -> None:
    assert set(EXPECTED) == set(zoo.ZOO) - set(zoo.PRETRAINED)  # (pretrained: own tests)


@pytest.mark.parametrize("key", list(EXPECTED))
def test_zoo_findings(key: str, reports: dict[str, findings.AuditReport]) -> None:
    r = reports[key]
    assert r.traced
    assert {f.name for f in r.findings} == set(EXPECTED[key])
    for name, (kind, place, gamma, beta, buffers, needless) in EXPECTED[key].items():
        f = r.finding(name)
        assert f.module_type == kind, name
        assert f.placement == place, name
        assert (f.has_gamma, f.has_beta) == (gamma, beta), name
        assert f.running_buffers == buffers, name
        assert f.buffers_in_state_dict, name
        assert f.needless_bias == needless, name
        assert (f.axes, f.keeps) == AXES[key], name


def test_residual_adds_and_checklist(reports: dict[str, findings.AuditReport]) -> None:
    adds = {k: r.residual_adds for k, r in reports.items() if k not in zoo.PRETRAINED}
    assert adds == {
        "resnet": 1,
        "pre_ln": 2,
        "post_ln": 2,
        "unet": 2,
        "style": 1,
        "rms_decoder": 2,
    }
    res = dict(reports["resnet"].checklist())
    assert res["Bias disabled before per-channel norms (BatchNorm, InstanceNorm)"] == (
        "no: needless bias in conv1"
    )
    assert res["Running statistics saved in the checkpoint"] == "yes, in the state_dict"
    assert res["Depends on the batch / differs train vs eval"].startswith("yes")
    assert reports["resnet"].needless_biases == ("conv1",)
    assert reports["style"].needless_biases == ("conv1", "conv2")
    rms = dict(reports["rms_decoder"].checklist())
    assert rms["γ and β present"] == "γ only (no β): attn_norm, mlp_norm"
    assert rms["Running statistics saved in the checkpoint"] == "no running statistics"
    assert dict(reports["post_ln"].checklist())["Before or after the residual add"] == POST
    assert len(tables.checklist_frame(reports["unet"])) == 9
    for key, r in reports.items():  # the zoo's rows agree with each module's class
        stats = dict(r.checklist())["Statistics under data-parallel training"]
        batch = any(f.method == "batch" for f in r.findings)
        assert stats.startswith(findings.LOCAL if batch else findings.PER_EXAMPLE), key
    frame = tables.findings_frame(reports["resnet"])
    assert frame.loc["bn1", "needless bias"] == "YES"
    assert frame.loc["bn1", "fed by"] == "conv1 (bias)"


@pytest.mark.parametrize("key", list(EXPECTED))
def test_the_reported_axes_are_what_torch_computes(
    key: str, reports: dict[str, findings.AuditReport]
) -> None:
    """Each layer, run by torch on its recorded input shape, equals normalize() on those axes."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = zoo.ZOO[key].build()
    modules = dict(model.named_modules())
    for f in reports[key].findings:
        m = modules[f.name].train()
        x = torch.randn(f.input_shape, generator=torch.Generator().manual_seed(1)) * 3 + 1
        with torch.no_grad():
            want = m(x)
        groups = m.num_groups if f.method == "group" else None
        layout = LAYOUT.get(key, "BTC")
        got = normviz.normalize(x, f.method, layout, groups=groups, eps=m.eps).output
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)  # fresh γ = 1, β = 0
        assert ", ".join(normviz.contract(f.method, layout, f.input_shape, groups).axes) == f.axes


def test_the_audit_leaves_running_statistics_alone() -> None:
    model = zoo.ResNetBlock()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    engine.audit(model.train(), torch.randn(2, 16, 8, 8))
    assert model.training
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k


@pytest.mark.parametrize("key", list(EXPECTED))
def test_param_groups_exclude_norm_params_and_biases(
    key: str, reports: dict[str, findings.AuditReport]
) -> None:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = zoo.ZOO[key].build()
    g = reports[key].param_groups
    names = [n for n, _ in model.named_parameters()]
    assert sorted(g.decay + g.no_decay) == sorted(names)  # every parameter exactly once
    assert not set(g.decay) & set(g.no_decay)
    norm_owners = {f.name for f in reports[key].findings}
    for n in g.decay:
        assert n.rpartition(".")[0] not in norm_owners and not n.endswith("bias")
        assert dict(model.named_parameters())[n].ndim >= 2
    assert (
        set(g.norm_params)
        == {n for n in names if n.rpartition(".")[0] in norm_owners}
        <= set(g.no_decay)
    )
    opt = torch.optim.AdamW(g.groups(model, 0.05), lr=1e-3)
    assert [grp["weight_decay"] for grp in opt.param_groups] == [0.05, 0.0]
    # the code the page shows builds the same two groups
    scope: dict[str, object] = {"model": model, "torch": torch}
    exec(tables.optimizer_code(g, 0.05), scope)
    shown = scope["optimizer"].param_groups  # type: ignore[attr-defined]
    assert [len(p["params"]) for p in shown] == [len(g.decay), len(g.no_decay)]


# ---- placement on hand-written graphs ----------------------------------------------------


class _InPlace(nn.Module):
    """A pre-norm block written with += and torch.add."""

    def __init__(self) -> None:
        super().__init__()
        self.n1, self.f1 = nn.LayerNorm(8), nn.Linear(8, 8)
        self.n2, self.f2 = nn.LayerNorm(8), nn.Linear(8, 8)
        self.out = nn.LayerNorm(8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.add(x, self.f1(self.n1(x)))
        y = x
        y += self.f2(self.n2(x))
        return self.out(y)


class _Branchy(nn.Module):
    """Data-dependent control flow: torch.fx cannot trace it."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:
            return x + self.norm(x)
        return x


class _NoSkip(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4, bias=True)
        self.bn = nn.BatchNorm1d(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.bn(self.fc(x)))


def test_placement_with_other_add_spellings() -> None:
    r = engine.audit(_InPlace(), torch.randn(2, 3, 8))
    assert r.placements == {"n1": PRE, "n2": PRE, "out": FINAL}
    assert r.residual_adds == 2


class _Block(nn.Module):
    """A conv block that adds its skip only when the shape allows, as MBConv does."""

    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(cout)
        self.skip = cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.bn(self.conv(x))
        return x + h if self.skip else h


class _Stages(nn.Module):
    """Stem norm, blocks with and without a skip, a head norm after the last block."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 1, bias=False)
        self.stem_bn = nn.BatchNorm2d(4)
        self.blocks = nn.Sequential(_Block(4, 4), _Block(4, 8), _Block(8, 8), _Block(8, 6))
        self.head = nn.Conv2d(6, 6, 1, bias=False)
        self.head_bn = nn.BatchNorm2d(6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head_bn(self.head(self.blocks(self.stem_bn(self.stem(x)))))


def test_a_norm_in_a_block_without_a_skip_is_neither_pre_nor_post() -> None:
    r = engine.audit(_Stages(), torch.randn(2, 3, 5, 5))
    assert r.residual_adds == 2
    assert r.placements == {
        "stem_bn": findings.BETWEEN,  # residual blocks follow it
        "blocks.0.bn": BRANCH,
        "blocks.1.bn": findings.SKIPLESS,  # 4 → 8 channels: this block adds no skip
        "blocks.2.bn": BRANCH,
        "blocks.3.bn": findings.SKIPLESS,  # after the last add, yet not a final norm
        "head_bn": FINAL,
    }


class _Basic(nn.Module):
    """torchvision's BasicBlock: a projection shortcut (1×1 conv, BN) where shapes change."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample: nn.Module | None = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        identity = x if self.downsample is None else self.downsample(x)
        return F.relu(out + identity)


class _Rotary(nn.Module):
    """A rotary-embedding-like sum of two products of x: no residual connection."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm(x)
        return h * 0.5 + torch.flip(h, dims=(2,)) * 0.25


def test_a_projection_shortcut_is_a_skip_and_its_norm_sits_on_it() -> None:
    net = nn.Sequential(_Basic(8, 8, 1), _Basic(8, 16, 2), _Basic(16, 16, 1))
    r = engine.audit(net, torch.randn(2, 8, 8, 8))
    assert r.residual_adds == 3  # the projection block's add is a residual add too
    want = {f"{i}.bn{j}": BRANCH for i in range(3) for j in (1, 2)}
    want["1.downsample.1"] = findings.SHORTCUT
    assert r.placements == want
    rot = engine.audit(_Rotary(), torch.randn(2, 3, 8))
    assert rot.residual_adds == 0 and rot.placements == {"norm": findings.NONE}


def test_efficientnet_placements_follow_its_blocks() -> None:
    """Each MBConv's BatchNorms sit in its branch when it adds a skip, else in a block
    without one; only the head's norm comes after the last block."""
    from normviz.pretrained import efficientnet as ef

    r = zoo.audit_zoo_model("efficientnet_lite0")
    net = ef.model()
    want = {"_bn0": findings.BETWEEN, "_bn1": FINAL}
    for i, block in enumerate(net._blocks):
        for name, m in block.named_children():
            if isinstance(m, nn.BatchNorm2d):
                want[f"_blocks.{i}.{name}"] = BRANCH if block.skip else findings.SKIPLESS
    assert r.placements == want
    assert sum(p == findings.SKIPLESS for p in want.values()) == 20  # 7 blocks without a skip
    assert list(r.placements.values()).count(FINAL) == 1
    notes = model_audit.inspect_notes(model_audit.Inspection("efficientnet_lite0", r))[0]
    assert "final norm" in findings.PLACEMENT_HELP[FINAL] and notes.count("final norm") == 1
    assert "neither pre- nor post-norm" in notes


def test_untraceable_models_say_unknown() -> None:
    r = engine.audit(_Branchy(), torch.ones(2, 4))
    assert not r.traced and r.placements == {"norm": "unknown"}
    assert "unknown" in dict(r.checklist())["Before or after the residual add"]


def test_no_residual_and_a_linear_bias_before_batchnorm() -> None:
    r = engine.audit(_NoSkip(), torch.randn(5, 4))
    f = r.finding("bn")
    assert f.placement == findings.NONE and f.needless_bias and f.fed_by == "fc"
    assert f.axes == "every dim but dim 1 (per channel)"  # (N, C) fits no named layout


class _One(nn.Module):
    """One norm module, called on the input."""

    def __init__(self, norm: nn.Module) -> None:
        super().__init__()
        self.norm = norm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def _torch_modes(m: nn.Module, shape: tuple[int, ...]) -> tuple[float, float]:
    """(max |train − eval|, how far sample 0 moves in training when sample 1 changes),
    by torch on a fresh module and the audit's documented test input."""
    g = torch.Generator().manual_seed(findings.TEST_SEED)
    x = torch.randn((2, *shape[1:]), generator=g) * findings.TEST_STD + findings.TEST_MEAN
    y = x.clone()
    y[1] = -x[1] * 5
    with torch.no_grad():
        ev = m.eval()(x)
        tr, tr_y = m.train()(x), m(y)
    return float((tr - ev).abs().max()), float((tr[0] - tr_y[0]).abs().max())


MODE_CASES = {
    # module -> (uses the batch in training, differs train vs eval, distributed statistics)
    "InstanceNorm2d(track_running_stats=True)": (
        lambda: nn.InstanceNorm2d(4, track_running_stats=True),
        (False, True, findings.PER_EXAMPLE),
    ),
    "InstanceNorm2d()": (lambda: nn.InstanceNorm2d(4), (False, False, findings.PER_EXAMPLE)),
    "BatchNorm2d()": (lambda: nn.BatchNorm2d(4), (True, True, findings.LOCAL)),
    "BatchNorm2d(track_running_stats=False)": (
        lambda: nn.BatchNorm2d(4, track_running_stats=False),
        (True, False, findings.LOCAL),  # batch statistics in both modes: no difference
    ),
    "SyncBatchNorm()": (lambda: nn.SyncBatchNorm(4), (True, True, findings.SYNCED)),
    "GroupNorm(2, 4)": (lambda: nn.GroupNorm(2, 4), (False, False, findings.PER_EXAMPLE)),
}


@pytest.mark.parametrize("case", list(MODE_CASES))
def test_batch_and_train_eval_are_read_off_the_module(case: str) -> None:
    make, (batch, differs, stats) = MODE_CASES[case]
    shape = (3, 4, 4, 4)  # the test input is (2, 4, 4, 4): see test_shape below
    gap, moved = _torch_modes(make(), shape)
    assert (moved > 1e-3, gap > 1e-3) == (batch, differs)  # torch says so
    r = engine.audit(_One(make()), torch.randn(shape))
    f = r.finding("norm")
    assert f.modes.measured and f.modes.batch_dependent == batch
    assert f.modes.train_eval_gap == pytest.approx(gap, abs=1e-5)
    assert f.statistics == stats
    row = dict(r.checklist())["Depends on the batch / differs train vs eval"]
    assert row.startswith("yes" if batch or differs else "no (measured)"), row
    assert ("in training" in row) == batch and ("differently in evaluation" in row) == differs
    if differs:
        assert f"up to {gap:.3g} apart" in row
    assert dict(r.checklist())["Statistics under data-parallel training"].startswith(stats)


def test_the_test_input_keeps_what_the_module_fixes() -> None:
    assert findings.test_shape(nn.BatchNorm2d(4), (3, 4, 4, 4)) == (2, 4, 4, 4)
    assert findings.test_shape(nn.BatchNorm2d(3), (1, 3, 224, 224)) == (2, 3, 4, 4)
    assert findings.test_shape(nn.BatchNorm1d(4), (5, 4)) == (2, 4)
    assert findings.test_shape(nn.LayerNorm(32), (2, 6, 32)) == (2, 4, 32)
    assert findings.test_shape(nn.LayerNorm((6, 32)), (1, 6, 32)) == (2, 6, 32)


def test_an_unrunnable_module_is_read_off_its_attributes() -> None:
    bn = nn.BatchNorm1d(4)
    m = findings.measure_modes(bn, None)
    assert not m.measured and m.batch_dependent and m.train_eval_gap != 0.0  # NaN: unknown
    ln = findings.measure_modes(nn.LayerNorm(4), (7, 3))  # (2, 3): LayerNorm(4) cannot run
    assert ln == findings.Modes(False, 0.0, False)


def test_distributed_statistics_local_then_synced() -> None:
    """BatchNorm's statistics are local until convert_sync_batchnorm makes them synced."""
    model = zoo.ResNetBlock()
    before = engine.audit(model, torch.randn(2, 16, 8, 8))
    assert {f.statistics for f in before.findings} == {findings.LOCAL}
    synced = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    after = engine.audit(synced, torch.randn(2, 16, 8, 8))
    assert {f.module_type for f in after.findings} == {"SyncBatchNorm"}
    assert {f.statistics for f in after.findings} == {findings.SYNCED}
    row = dict(after.checklist())["Statistics under data-parallel training"]
    assert row.startswith("synced (2: SyncBatchNorm)")


def test_buffers_missing_from_the_state_dict_are_reported() -> None:
    class Lossy(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bn = nn.BatchNorm1d(4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.bn(x)

        def state_dict(self, *args: object, **kwargs: object) -> dict:  # type: ignore[override]
            return {k: v for k, v in super().state_dict().items() if "running" not in k}

    r = engine.audit(Lossy(), torch.randn(5, 4))
    assert not r.finding("bn").buffers_in_state_dict
    assert dict(r.checklist())["Running statistics saved in the checkpoint"].startswith("NO")


def test_audit_errors() -> None:
    with pytest.raises(findings.AuditError, match="no normalization"):
        engine.audit(nn.Linear(3, 3), torch.randn(2, 3))
    with pytest.raises(findings.AuditError, match="shape"):
        engine.audit(zoo.ResNetBlock(), torch.randn(2, 5, 8, 8))
    with pytest.raises(findings.AuditError, match="unknown model"):
        zoo.audit_zoo_model("vgg")
    assert issubclass(findings.AuditError, ValueError)


def test_bias_rule_reads_the_registry() -> None:
    assert [k for k in normviz.STANDARD_METHODS if findings.bias_is_needless(k)] == [
        "batch",
        "instance",
    ]


# ---- uploaded state_dicts ----------------------------------------------------------------


def _pt_bytes(obj: object) -> bytes:
    buf = pyio.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def test_sample_safetensors_through_the_safe_loader() -> None:
    data = zoo.zoo_safetensors("resnet")
    report = saved.audit_state_dict(io.load_tensors(data, "resnet.safetensors"))
    names = {n.prefix: n for n in report.norms}
    assert set(names) == {"bn1", "bn2"}
    bn1 = names["bn1"]
    assert bn1.method == "batch" and bn1.buffers == BN_BUFFERS
    assert bn1.params == ("weight (16,)", "bias (16,)")
    assert bn1.notes == (
        "updated in 3 training step(s)",
        "needless bias: conv1.bias, which its mean subtraction removes "
        "(a guess from names and shapes)",
    )
    assert report.needless_biases == ("conv1.bias",) and names["bn2"].fed_by is None
    assert set(report.decay) == {"conv1.weight", "conv2.weight"}
    assert "conv1.bias" in report.no_decay and "bn1.weight" in report.no_decay
    # the warm-up really moved the running statistics (data with mean 1, std 2)
    t = safetensors.torch.load(data)
    assert t["bn1.running_mean"].abs().mean() > 0.05


@pytest.mark.parametrize("key", list(EXPECTED))
def test_every_zoo_state_dict_through_torch_save(key: str) -> None:
    sd = zoo.zoo_state_dict(key)
    report = saved.audit_state_dict(io.load_tensors(_pt_bytes(sd), f"{key}.pt"))
    found = {n.prefix for n in report.norms}
    assert found == set(EXPECTED[key]), found
    for n in report.norms:
        buffers = EXPECTED[key][n.prefix][4]
        assert n.buffers == buffers
        assert any(p.startswith("weight") for p in n.params)
        assert any(p.startswith("bias") for p in n.params) == EXPECTED[key][n.prefix][3]
    fresh = {n.prefix: n for n in report.norms if n.buffers}
    for n in fresh.values():
        assert "never updated" in " ".join(n.notes)


def test_state_dict_guesses_and_damage() -> None:
    sd = {
        "encoder.layers.0.norm1.weight": torch.ones(8),
        "encoder.layers.0.norm1.bias": torch.zeros(8),
        "h.0.ln_1.weight": torch.ones(8),
        "blocks.0.gn.weight": torch.ones(8),
        "blocks.0.gn.bias": torch.zeros(8),
        "blocks.0.conv.weight": torch.ones(8, 8, 3, 3),
        "scale.weight": torch.ones(8),
        "bn.running_mean": torch.zeros(4),
        "bn.running_var": -torch.ones(4),
        "in_bn.running_mean": torch.zeros(4),
        "in_bn.running_var": torch.ones(4),
    }
    r = {n.prefix: n for n in saved.audit_state_dict(sd).norms}
    assert r["encoder.layers.0.norm1"].method == "layer"
    assert r["h.0.ln_1"].method == "rms" and "γ only" in r["h.0.ln_1"].kind
    assert r["blocks.0.gn"].method == "group"
    assert "blocks.0.conv" not in r
    assert r["scale"].method is None and "likely" in r["scale"].kind
    assert "damaged" in " ".join(r["bn"].notes) and "no γ/β" in " ".join(r["bn"].notes)
    assert "probably never updated" in " ".join(r["in_bn"].notes)
    frame = tables.saved_norms_frame(saved.audit_state_dict(sd))
    assert frame.loc["bn", "parameters"] == "none"
    lone = saved.audit_state_dict({"bn.running_mean": torch.zeros(3)})
    assert "evaluation mode cannot work" in " ".join(lone.norms[0].notes)


def test_state_dict_errors() -> None:
    with pytest.raises(findings.AuditError, match="no tensors"):
        saved.audit_state_dict({})
    with pytest.raises(findings.AuditError, match="not a tensor"):
        saved.audit_state_dict({"a": [1, 2]})  # type: ignore[dict-item]
    empty = saved.audit_state_dict({"fc.weight": torch.ones(3, 3)})
    assert empty.norms == () and empty.decay == ("fc.weight",)
    # a full checkpoint: optimizer state is neither decayed nor exempt
    ckpt = saved.audit_state_dict(
        {
            "model.fc.weight": torch.ones(3, 3),
            "model.ln.weight": torch.ones(3),
            "optimizer.state.0.exp_avg": torch.ones(3, 3),
            "optimizer.state.1.exp_avg": torch.ones(3),
        }
    )
    assert ckpt.decay == ("model.fc.weight",) and ckpt.no_decay == ("model.ln.weight",)


class _Evil:
    def __reduce__(self) -> tuple:
        return (print, ("this must never run",))


def test_a_pickle_that_runs_code_is_refused_not_loaded() -> None:
    data = pickle.dumps({"w": _Evil()})
    with pytest.raises(io.TensorLoadError):
        io.load_tensors(data, "evil.pt")
    buf = pyio.BytesIO()
    torch.save({"w": _Evil()}, buf)
    with pytest.raises(io.TensorLoadError):
        io.load_tensors(buf.getvalue(), "evil.pt")


class DynamicTanh(nn.Module):
    """DyT as its authors wrote it (their own class, not normviz.dyt.DyT): γ·tanh(α·x) + β
    over the last dim, one scalar α."""

    def __init__(self, normalized_shape: int, alpha_init_value: float = 0.5) -> None:
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(1) * alpha_init_value)
        self.weight = nn.Parameter(torch.ones(normalized_shape))
        self.bias = nn.Parameter(torch.zeros(normalized_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.alpha * x) * self.weight + self.bias


class _DytBlocks(nn.Module):
    """Two pre-norm residual MLP blocks with DyT where LayerNorm would be, and a final DyT."""

    def __init__(self, c: int = 8) -> None:
        super().__init__()
        self.n1, self.n2, self.out = DynamicTanh(c), DynamicTanh(c), DynamicTanh(c)
        self.f1, self.f2 = nn.Linear(c, c), nn.Linear(c, c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.f1(self.n1(x))
        x = x + self.f2(self.n2(x))
        return self.out(x)


def test_a_dyt_written_elsewhere_is_audited_as_dyt() -> None:
    r = engine.audit(_DytBlocks(), torch.randn(2, 3, 8))
    assert {f.name: f.method for f in r.findings} == {"n1": "dyt", "n2": "dyt", "out": "dyt"}
    assert r.placements == {"n1": PRE, "n2": PRE, "out": FINAL}
    assert all(f.axes == "nothing (no statistics)" for f in r.findings)
    assert findings.method_of(nn.Tanh()) is None  # a plain activation is not a norm


def test_a_saved_dyt_is_known_by_its_scalar_alpha() -> None:
    state = _DytBlocks().state_dict()
    state = {k.replace("n1", "blocks.0.norm1"): v for k, v in state.items()}  # names say nothing
    report = saved.audit_state_dict(state, ordered=True)
    kinds = {n.prefix: (n.method, n.kind) for n in report.norms}
    assert kinds["blocks.0.norm1"][0] == "dyt" and "scalar α" in kinds["blocks.0.norm1"][1]
    methods = {k: m for k, (m, _) in kinds.items()}
    assert methods == {"blocks.0.norm1": "dyt", "n2": "dyt", "out": "dyt"}
