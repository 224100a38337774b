"""One small program of each architecture family that real exports come from,
lowered with VulkanPartitioner at real structure and tiny sizes (random
weights): an HF BERT encoder with an attention mask, an HF GPT-2 decoder, an
HF Whisper encoder, a Swin-style vision transformer (shifted windows), a
ShuffleNet-style channel-shuffle CNN and a ConvNeXt-style block. Each shows
which portable ops the partitioner leaves outside the delegate.

Swin, ShuffleNet and ConvNeXt are written here (HF SwinModel fails in the Vulkan
preprocess) (torchvision is not among the pinned
packages), with the structure of torchvision's `InvertedResidual` and `CNBlock`.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from fixture_io import Call, FixtureResult
from fixtures_nn import EXPORT_API, PORTABLE_MAX_ABS_DIFF, randn, run_eager, seed, seed_for


STRICT = False


def _lower(model: nn.Module, args: tuple, vulkan: bool = True,
           options: dict[str, Any] | None = None) -> bytes:
    from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner
    from executorch.exir import to_edge_transform_and_lower

    # HF modules do not trace under strict (dynamo) export.
    ep = torch.export.export(model, args, strict=STRICT)
    partitioner = [VulkanPartitioner(dict(options or {}))] if vulkan else []
    return to_edge_transform_and_lower(ep, partitioner=partitioner).to_executorch().buffer


def _verify_portable(name: str, model: nn.Module, args: tuple, calls: list[Call]) -> float:
    from executorch.extension.pybindings import portable_lib

    method = portable_lib._load_for_executorch_from_buffer(_lower(model, args, vulkan=False))
    worst = 0.0
    for k, call in enumerate(calls):
        got = method.forward(tuple(t.clone() for t in call.inputs))
        for i, (g, e) in enumerate(zip(got, call.outputs)):
            if g.shape != e.shape or g.dtype != e.dtype:
                raise AssertionError(f"{name} call{k}.out{i}: portable {g.dtype}{list(g.shape)} "
                                     f"vs eager {e.dtype}{list(e.shape)}")
            if e.dtype.is_floating_point:
                worst = max(worst, float((g - e).abs().max()))
            elif not torch.equal(g, e):
                raise AssertionError(f"{name} call{k}.out{i}: portable differs from eager")
    return worst


class Outputs(nn.Module):
    """Wraps an HF model so that forward returns a tuple of tensors."""

    def __init__(self, inner: nn.Module, keys: tuple[str, ...]):
        super().__init__()
        self.inner = inner
        self.keys = keys

    def forward(self, *args):
        out = self.inner(*args, return_dict=True)
        return tuple(out[k] for k in self.keys)


def family_fixture(name: str, description: str, model: nn.Module,
                   call_inputs: list[tuple[torch.Tensor, ...]],
                   verify: bool = True, options: dict[str, Any] | None = None) -> FixtureResult:
    model = model.eval()
    example = call_inputs[-1]
    pte = _lower(model, example, options=options)
    calls = [Call(inputs=list(ins), outputs=run_eager(model, ins)) for ins in call_inputs]
    notes = []
    if verify:
        worst = _verify_portable(name, model, example, calls)
        if worst > PORTABLE_MAX_ABS_DIFF:
            raise AssertionError(f"{name}: portable CPU run differs from eager by {worst:.3g}")
        notes.append(f"portable CPU run of a non-delegated export: max |diff| {worst:.3g}")
    export = {"api": EXPORT_API.replace("export", "export(strict=STRICT)", 1),
              "partitioner": "VulkanPartitioner", "options": dict(options or {}), "seed": seed_for(name)}
    return FixtureResult(name=name, description=description, export=export, pte=pte,
                         calls=calls, notes=notes)


# ---------------------------------------------------------------- HF families


def fx_bert_encoder(verify: bool = True) -> FixtureResult:
    from transformers import BertConfig, BertModel

    g = seed("bert_encoder")
    config = BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=16, type_vocab_size=2,
                        attn_implementation="eager")
    model = Outputs(BertModel(config), ("last_hidden_state", "pooler_output"))
    ids = torch.randint(0, 64, (2, 9), generator=g)
    mask = torch.ones(2, 9, dtype=torch.int64)
    mask[1, 6:] = 0   # the second sequence is padded
    return family_fixture(
        "bert_encoder",
        "HF BertModel (2 layers, hidden 32, 2 heads, eager attention) on input_ids int64 [2,9] "
        "and attention_mask int64 [2,9] (row 1 padded after 6 tokens); outputs "
        "last_hidden_state [2,9,32] and pooler_output [2,32].",
        model, [(ids, mask)], verify=verify)


def fx_gpt2_decoder(verify: bool = True) -> FixtureResult:
    from transformers import GPT2Config, GPT2LMHeadModel

    g = seed("gpt2_decoder")
    # Eager attention fails in the Vulkan preprocess (FuseBatchNormPass: fake-mode
    # mismatch); SDPA attention exports.
    config = GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=2, n_head=2,
                        use_cache=False, attn_implementation="sdpa")
    model = Outputs(GPT2LMHeadModel(config), ("logits",))
    ids = torch.randint(0, 64, (1, 7), generator=g)
    return family_fixture(
        "gpt2_decoder",
        "HF GPT2LMHeadModel (2 layers, n_embd 32, 2 heads, SDPA attention, no cache) on "
        "input_ids int64 [1,7]; output logits [1,7,64].",
        model, [(ids,)], verify=verify)


def fx_whisper_encoder(verify: bool = True) -> FixtureResult:
    from transformers import WhisperConfig
    from transformers.models.whisper.modeling_whisper import WhisperEncoder

    g = seed("whisper_encoder")
    config = WhisperConfig(num_mel_bins=16, d_model=32, encoder_layers=2, encoder_attention_heads=2,
                           encoder_ffn_dim=64, max_source_positions=12, attn_implementation="eager")
    model = Outputs(WhisperEncoder(config), ("last_hidden_state",))
    feats = randn(g, 1, 16, 24)
    return family_fixture(
        "whisper_encoder",
        "HF WhisperEncoder (two convs, GELU, 2 layers, d_model 32, 2 heads, eager attention) "
        "on log-mel features float32 [1,16,24]; output last_hidden_state [1,12,32].",
        model, [(feats,)], verify=verify)


def window_partition(x: torch.Tensor, w: int) -> torch.Tensor:
    b, h, wd, c = x.shape
    x = x.view(b, h // w, w, wd // w, w, c)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, w * w, c)


def window_reverse(x: torch.Tensor, w: int, h: int, wd: int) -> torch.Tensor:
    c = x.shape[-1]
    x = x.view(-1, h // w, wd // w, w, w, c)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, h, wd, c)


class SwinBlock(nn.Module):
    """HF/Swin's block: layer norm, (shifted) window attention with a
    relative position bias looked up by index and, when shifted, the mask
    built from slice assignments as HF builds it in forward; MLP."""

    def __init__(self, dim: int, heads: int, window: int, shift: int):
        super().__init__()
        self.dim, self.heads, self.window, self.shift = dim, heads, window, shift
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        self.bias_table = nn.Parameter(torch.randn((2 * window - 1) ** 2, heads) * 0.5)
        coords = torch.stack(torch.meshgrid(torch.arange(window), torch.arange(window), indexing="ij"))
        flat = coords.flatten(1)
        rel = (flat[:, :, None] - flat[:, None, :]).permute(1, 2, 0) + (window - 1)
        self.register_buffer("rel_index", rel[..., 0] * (2 * window - 1) + rel[..., 1], persistent=False)

    def attn_mask(self, h: int, wd: int) -> torch.Tensor:
        w, s = self.window, self.shift
        img = torch.zeros(1, h, wd, 1)
        cnt = 0
        for hs in (slice(0, -w), slice(-w, -s), slice(-s, None)):
            for ws in (slice(0, -w), slice(-w, -s), slice(-s, None)):
                img[:, hs, ws, :] = cnt
                cnt += 1
        mw = window_partition(img, w).squeeze(-1)
        mask = mw.unsqueeze(1) - mw.unsqueeze(2)
        return mask.masked_fill(mask != 0, -100.0).masked_fill(mask == 0, 0.0)

    def forward(self, x):
        b, h, wd, c = x.shape
        w, n = self.window, self.window * self.window
        shortcut = x
        x = self.norm1(x)
        if self.shift:
            x = torch.roll(x, shifts=(-self.shift, -self.shift), dims=(1, 2))
        win = window_partition(x, w)
        qkv = self.qkv(win).view(-1, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        att = (q * (c // self.heads) ** -0.5) @ k.transpose(-2, -1)
        bias = self.bias_table[self.rel_index.view(-1)].view(n, n, -1).permute(2, 0, 1)
        att = att + bias.unsqueeze(0)
        if self.shift:
            mask = self.attn_mask(h, wd)
            nw = mask.shape[0]
            att = att.view(-1, nw, self.heads, n, n) + mask.unsqueeze(1).unsqueeze(0)
            att = att.view(-1, self.heads, n, n)
        out = (att.softmax(-1) @ v).transpose(1, 2).reshape(-1, n, c)
        x = window_reverse(self.proj(out), w, h, wd)
        if self.shift:
            x = torch.roll(x, shifts=(self.shift, self.shift), dims=(1, 2))
        x = shortcut + x
        return x + self.mlp(self.norm2(x))


class SwinTiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.patch = nn.Conv2d(3, 8, 2, 2)
        self.norm = nn.LayerNorm(8)
        self.blocks = nn.Sequential(SwinBlock(8, 2, 4, 0), SwinBlock(8, 2, 4, 2))
        self.head = nn.Linear(8, 10)

    def forward(self, x):
        x = self.norm(self.patch(x).permute(0, 2, 3, 1))
        x = self.blocks(x)
        return self.head(x.mean((1, 2)))


def fx_swin_tiny(verify: bool = True) -> FixtureResult:
    g = seed("swin_tiny")
    model = SwinTiny()
    x = randn(g, 1, 3, 16, 16)
    return family_fixture(
        "swin_tiny",
        "Swin-style vision transformer (HF Swin's block structure, written here: HF SwinModel "
        "fails in the Vulkan preprocess, FuseBatchNormPass fake-mode mismatch): patch conv "
        "2x2 to [1,8,8,8], a window-attention block (window 4) and a shifted one (torch.roll "
        "by 2, the mask built from slice assignments), relative position bias by index, mean, "
        "linear, on an image float32 [1,3,16,16]; output logits [1,10].",
        model, [(x,)], verify=verify)


# ---------------------------------------------------------------- CNN families


def channel_shuffle(x: torch.Tensor, groups: int) -> torch.Tensor:
    b, c, h, w = x.shape
    x = x.view(b, groups, c // groups, h, w).transpose(1, 2).contiguous()
    return x.view(b, c, h, w)


class ShuffleUnit(nn.Module):
    """torchvision's ShuffleNetV2 InvertedResidual: split or downsample, two
    branches (1x1, depthwise 3x3, 1x1, batch norms), concat, channel shuffle."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.stride = stride
        half = cout // 2
        if stride > 1:
            self.branch1 = nn.Sequential(
                nn.Conv2d(cin, cin, 3, stride, 1, groups=cin, bias=False), nn.BatchNorm2d(cin),
                nn.Conv2d(cin, half, 1, bias=False), nn.BatchNorm2d(half), nn.ReLU())
        b2_in = cin if stride > 1 else half
        self.branch2 = nn.Sequential(
            nn.Conv2d(b2_in, half, 1, bias=False), nn.BatchNorm2d(half), nn.ReLU(),
            nn.Conv2d(half, half, 3, stride, 1, groups=half, bias=False), nn.BatchNorm2d(half),
            nn.Conv2d(half, half, 1, bias=False), nn.BatchNorm2d(half), nn.ReLU())

    def forward(self, x):
        if self.stride == 1:
            x1, x2 = x.chunk(2, dim=1)
            out = torch.cat((x1, self.branch2(x2)), dim=1)
        else:
            out = torch.cat((self.branch1(x), self.branch2(x)), dim=1)
        return channel_shuffle(out, 2)


class ShuffleNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        self.stage = nn.Sequential(ShuffleUnit(8, 16, 2), ShuffleUnit(16, 16, 1))
        self.conv5 = nn.Sequential(nn.Conv2d(16, 32, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU())
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = self.conv5(self.stage(self.stem(x)))
        return self.fc(x.mean([2, 3]))


def _randomize_norms(model: nn.Module, g: torch.Generator) -> None:
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            n = m.num_features
            m.running_mean.copy_(randn(g, n, scale=0.1))
            m.running_var.copy_(torch.rand(n, generator=g) + 0.5)
            m.weight.data.copy_(torch.rand(n, generator=g) + 0.5)
            m.bias.data.copy_(randn(g, n, scale=0.1))


def fx_shufflenet(verify: bool = True) -> FixtureResult:
    g = seed("shufflenet")
    model = ShuffleNet()
    _randomize_norms(model, g)
    x = randn(g, 1, 3, 32, 32)
    return family_fixture(
        "shufflenet",
        "ShuffleNetV2-style CNN (stem conv + max pool, a downsampling and a split shuffle unit "
        "with depthwise convs and channel shuffle, 1x1 conv, global mean, linear) on an image "
        "float32 [1,3,32,32]; output logits [1,10]. Not cross-checked on the portable CPU: "
        "ExecuTorch 1.5.1's portable runtime crashes (SIGSEGV) running its non-delegated export.",
        model, [(x,)], verify=False)


class LayerNorm2d(nn.LayerNorm):
    """torchvision's channels-first layer norm: permute, norm, permute back."""

    def forward(self, x):
        x = x.permute(0, 2, 3, 1)
        x = F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        return x.permute(0, 3, 1, 2)


class CNBlock(nn.Module):
    """torchvision's ConvNeXt block: depthwise 7x7, channels-last layer norm,
    1x1 up (4x) with GELU and down, layer scale, residual."""

    def __init__(self, dim: int, g: torch.Generator):
        super().__init__()
        self.block = nn.Sequential(
            nn.Conv2d(dim, dim, 7, padding=3, groups=dim),
            _Permute([0, 2, 3, 1]),
            nn.LayerNorm(dim, eps=1e-6),
            nn.Linear(dim, 4 * dim),
            nn.GELU(),
            nn.Linear(4 * dim, dim),
            _Permute([0, 3, 1, 2]))
        self.layer_scale = nn.Parameter(torch.rand(dim, 1, 1, generator=g) + 0.5)

    def forward(self, x):
        return x + self.layer_scale * self.block(x)


class _Permute(nn.Module):
    def __init__(self, dims: list[int]):
        super().__init__()
        self.dims = dims

    def forward(self, x):
        return torch.permute(x, self.dims)


class ConvNeXt(nn.Module):
    def __init__(self, g: torch.Generator):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 4, 4), LayerNorm2d(16, eps=1e-6))
        self.stage1 = CNBlock(16, g)
        self.down = nn.Sequential(LayerNorm2d(16, eps=1e-6), nn.Conv2d(16, 32, 2, 2))
        self.stage2 = CNBlock(32, g)
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), LayerNorm2d(32, eps=1e-6), nn.Flatten(1),
                                  nn.Linear(32, 10))

    def forward(self, x):
        return self.head(self.stage2(self.down(self.stage1(self.stem(x)))))


def fx_convnext(verify: bool = True) -> FixtureResult:
    g = seed("convnext")
    model = ConvNeXt(g)
    x = randn(g, 1, 3, 32, 32)
    return family_fixture(
        "convnext",
        "ConvNeXt-style network (patchify stem + LayerNorm2d, a CNBlock: depthwise 7x7, "
        "channels-last layer norm, 4x MLP with GELU, layer scale, residual; downsample; a "
        "second CNBlock; average pool, norm, linear) on an image float32 [1,3,32,32]; "
        "output logits [1,10].",
        model, [(x,)], verify=verify)


class Uint8Image(nn.Module):
    NAMES = ["img.float() / 255", "img.int() * 2", "img.half() * 0.5"]

    def forward(self, img):
        return img.float() / 255.0, img.to(torch.int32) * 2, img.half() * 0.5


def fx_uint8_image(verify: bool = True) -> FixtureResult:
    from fixtures_nn import module_fixture

    g = seed("uint8_image")
    img = torch.randint(0, 256, (1, 3, 5, 7), generator=g, dtype=torch.uint8)
    img[0, 0, 0, :2] = torch.tensor([0, 255], dtype=torch.uint8)
    return module_fixture(
        "uint8_image",
        "Casts from uint8 (the partitioner leaves them outside the delegate as "
        "dim_order_ops::_to_dim_order_copy.out): " + "; ".join(Uint8Image.NAMES)
        + ". img uint8 [1,3,5,7] with 0 and 255.",
        Uint8Image(), [(img,)], verify=verify)


FIXTURES: dict[str, Callable[..., FixtureResult]] = {
    "bert_encoder": fx_bert_encoder,
    "gpt2_decoder": fx_gpt2_decoder,
    "whisper_encoder": fx_whisper_encoder,
    "swin_tiny": fx_swin_tiny,
    "shufflenet": fx_shufflenet,
    "convnext": fx_convnext,
    "uint8_image": fx_uint8_image,
}


def _explore(names: list[str]) -> None:
    import pte_inspect

    for name in names:
        try:
            r = FIXTURES[name](verify=False)
        except Exception as e:  # noqa: BLE001
            print(f"{name}: FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
            continue
        s = pte_inspect.summarize_pte(r.pte)["methods"][0]
        ops = sorted({op for d in s["delegates"] for op in d.get("ops", {})})
        print(f"{name}: {len(r.pte)} bytes, {len(s['delegates'])} delegates, "
              f"inputs {s['inputs']}\n  CPU: {s['kernel_calls']}\n  VK: {ops}", flush=True)


if __name__ == "__main__":
    import logging
    import sys
    import warnings

    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")
    _explore(sys.argv[1:] or list(FIXTURES))
