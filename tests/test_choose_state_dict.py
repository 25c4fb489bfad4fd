"""The state_dict audit finds a needless bias as the model audit does, from the file alone."""

from __future__ import annotations

import io as pyio

import pytest
import safetensors.torch
import torch
from hostile_payloads import MARKDOWN, assert_inert
from torch import nn

from normviz.choose import engine, saved, state_dict, zoo
from normviz.sections import no_progress


class _Stem(nn.Module):
    """A conv stem that keeps its bias before BatchNorm, then a bias-free conv block."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.conv1 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.head = nn.Linear(8, 4)  # a bias with no norm after it: needed

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (N, 3, H, W)
        h = self.bn1(self.conv1(self.stem(x)))
        return self.head(h.mean(dim=(2, 3)))


def _pt(sd: dict[str, torch.Tensor]) -> bytes:
    buf = pyio.BytesIO()
    torch.save(sd, buf)
    return buf.getvalue()


def _safetensors(sd: dict[str, torch.Tensor]) -> bytes:
    return safetensors.torch.save({k: v.contiguous() for k, v in sd.items()})


def _upload(name: str, data: bytes) -> state_dict.SavedAudit:
    """The page's path: an uploaded file, read by the app's safe loader, audited."""
    setup = state_dict.Setup(state_dict.Upload(name, data))
    return state_dict.STATE_DICT.run(setup, {"use_sample": False}, no_progress)


@pytest.mark.parametrize(("name", "write"), [("stem.pt", _pt), ("stem.safetensors", _safetensors)])
def test_an_uploaded_stem_bias_before_batchnorm_is_needless(name: str, write: object) -> None:
    model = _Stem()
    want = engine.audit(model, torch.randn(2, 3, 6, 6)).needless_biases  # the traced model
    assert want == ("stem.0",)
    res = _upload(name, write(model.state_dict()))  # type: ignore[operator]
    assert res.report is not None
    assert res.report.needless_biases == ("stem.0.bias",)
    by_prefix = {n.prefix: n for n in res.report.norms}
    assert by_prefix["stem.1"].fed_by == "stem.0" and by_prefix["bn1"].fed_by is None
    assert "needless bias: stem.0.bias" in " ".join(by_prefix["stem.1"].notes)
    note = state_dict.STATE_DICT.notes(res)[-1]
    assert note.startswith("Likely needless bias (1): `stem.0.bias` → `stem.1`.")


def test_the_bias_really_is_cancelled() -> None:
    """torch: changing stem.0.bias leaves the BatchNorm's training-mode output unchanged."""
    model = _Stem().train()
    x = torch.randn(4, 3, 6, 6)
    with torch.no_grad():
        before = model.stem[1](model.stem[0](x))
        model.stem[0].bias.add_(torch.linspace(-3, 3, 8))
        after = model.stem[1](model.stem[0](x))
    torch.testing.assert_close(after, before, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("key", [k for k in zoo.ZOO if k not in zoo.PRETRAINED])
def test_every_zoo_file_agrees_with_the_zoo_audit(key: str) -> None:
    want = tuple(f"{b}.bias" for b in zoo.audit_zoo_model(key).needless_biases)
    sd = zoo.zoo_state_dict(key)
    for name, data in ((f"{key}.pt", _pt(sd)), (f"{key}.safetensors", _safetensors(sd))):
        report = _upload(name, data).report
        assert report is not None and report.needless_biases == want, (name, want)


def test_a_bias_before_groupnorm_or_with_other_channels_is_not_flagged() -> None:
    sd = {
        "0.weight": torch.ones(8, 3, 3, 3),
        "0.bias": torch.zeros(8),
        "1.weight": torch.ones(8),  # "1" is no norm name: kind unknown, no claim
        "1.bias": torch.zeros(8),
        "a.conv1.weight": torch.ones(6, 3, 3, 3),
        "a.conv1.bias": torch.zeros(6),
        "a.bn1.weight": torch.ones(8),  # 8 channels, conv1 makes 6: not its input
        "a.bn1.running_mean": torch.zeros(8),
        "a.bn1.running_var": torch.ones(8),
        "b.conv1.weight": torch.ones(8, 3, 3, 3),
        "b.conv1.bias": torch.zeros(8),
        "b.gn1.weight": torch.ones(8),  # GroupNorm pools channels: the bias is not needless
        "b.gn1.bias": torch.zeros(8),
        "c.conv1.weight": torch.ones(8, 3, 3, 3),
        "c.conv1.bias": torch.zeros(8),
        "c.bn1.weight": torch.ones(8),
        "c.bn1.running_mean": torch.zeros(8),
        "c.bn1.running_var": torch.ones(8),
    }
    assert saved.audit_state_dict(sd).needless_biases == ("c.conv1.bias",)


@pytest.mark.parametrize("evil", MARKDOWN)
def test_hostile_module_names_stay_inert_in_the_notes(evil: str) -> None:
    """Names of a file's tensors come back in the notes as code spans, never live."""
    sd = {
        f"{evil}.0.weight": torch.ones(4, 3, 3, 3),
        f"{evil}.0.bias": torch.zeros(4),
        f"{evil}.1.weight": torch.ones(4),
        f"{evil}.1.running_mean": torch.zeros(4),
        f"{evil}.1.running_var": torch.ones(4),
    }
    res = _upload(f"{evil}.pt", _pt(sd))
    assert res.report is not None and res.report.needless_biases == (f"{evil}.0.bias",)
    for note in state_dict.STATE_DICT.notes(res):
        assert_inert(note)
