"""The vision networks of `vision.py` and `tools/device/vision_peers.py`.

Imports only torch (and `q8_cnn.py`, which imports torch inside its
functions), so the GPU machine, which has torch but neither executorch nor
timm, builds exactly the modules that were exported:

- `resnet18`: `q8_cnn.resnet18` (ResNet-18's topology, 64..512 channels,
  1000 classes) with `q8_cnn.randomize_bn`'s batch norms;
- `vit_tiny`: ViT-Tiny/16 in plain `torch.nn` (224x224, 16x16 patches as a
  strided conv, dim 192, 12 pre-norm blocks of 3 heads, MLP 768 with erf
  GELU, LayerNorm eps 1e-6, a class token, learned position embeddings,
  1000 classes), its attention written out as matmuls and a softmax: the
  Vulkan partitioner takes those; `nn.MultiheadAttention` leaves pieces on
  the CPU (`fixtures_nn.py`'s `tiny_vit`).

`build(name, seed)` gives the module in eval mode with random weights from
`seed` (torch's default initialisation after `torch.manual_seed(seed)`,
then the non-default parameters drawn from a generator seeded `seed + 1`).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))

import q8_cnn  # noqa: E402  (imports torch only inside its functions)

NAMES = ("resnet18", "vit_tiny")


class Attention(nn.Module):
    """Multi-head self-attention on `[B, N, dim]`, every tensor at most 4-D
    (the Vulkan delegate's limit): one qkv linear, split on the last dim."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.scale = self.head_dim ** -0.5
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, dim = x.shape
        q, k, v = self.qkv(x).split(dim, dim=-1)

        def heads(t):
            return t.reshape(b, n, self.heads, self.head_dim).transpose(1, 2)

        attn = torch.softmax(torch.matmul(heads(q) * self.scale, heads(k).transpose(-2, -1)), dim=-1)
        y = torch.matmul(attn, heads(v)).transpose(1, 2).reshape(b, n, dim)
        return self.proj(y)


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, mlp: int):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.fc1 = nn.Linear(dim, mlp)
        self.fc2 = nn.Linear(mlp, dim)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class ViT(nn.Module):
    def __init__(self, image: int = 224, patch: int = 16, dim: int = 192, depth: int = 12, heads: int = 3,
                 mlp: int = 768, num_classes: int = 1000):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, dim, patch, stride=patch)
        n = (image // patch) ** 2
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, n + 1, dim))
        self.blocks = nn.Sequential(*[Block(dim, heads, mlp) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, img):
        p = self.patch_embed(img).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(p.shape[0], -1, -1), p], dim=1) + self.pos_embed
        return self.head(self.norm(self.blocks(x))[:, 0])


def vit_tiny(num_classes: int = 1000, image: int = 224) -> ViT:
    return ViT(image=image, num_classes=num_classes)


def build(name: str, seed: int, image: int = 224, tiny: bool = False) -> nn.Module:
    """The named network in eval mode with seeded random weights. `tiny`:
    narrow versions of the same topologies, for CPU self-checks."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed + 1)
    if name == "resnet18":
        model = q8_cnn.resnet18(num_classes=10 if tiny else 1000, width=4 if tiny else 64)
        q8_cnn.randomize_bn(model, g)
    elif name == "vit_tiny":
        model = ViT(image=image, patch=16, dim=24 if tiny else 192, depth=2 if tiny else 12,
                    heads=3, mlp=48 if tiny else 768, num_classes=10 if tiny else 1000)
        with torch.no_grad():
            model.cls_token.copy_(torch.randn(model.cls_token.shape, generator=g) * 0.02)
            model.pos_embed.copy_(torch.randn(model.pos_embed.shape, generator=g) * 0.02)
            for m in model.modules():
                if isinstance(m, nn.LayerNorm):
                    m.weight.copy_(torch.rand(m.weight.shape, generator=g) * 0.5 + 0.75)
                    m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.1)
    else:
        raise ValueError(f"unknown network {name!r}; known: {', '.join(NAMES)}")
    return model.eval()
