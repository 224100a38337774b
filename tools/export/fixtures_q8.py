"""PT2E static-int8 fixtures, quantized as ExecuTorch's own Vulkan tests do it.

Recipe (upstream `backends/vulkan/test/test_vulkan_delegate.py`,
`quantize_and_lower_module`): `torch.export.export(...).module()`,
`prepare_pt2e` with `XNNPACKQuantizer` +
`get_symmetric_quantization_config(is_per_channel=True, is_dynamic=False)`,
one calibration call, `convert_pt2e`, export again, then
`to_edge_transform_and_lower` with `VulkanPartitioner`.

Goldens come from the converted module run eagerly in PyTorch (the
quantize/dequantize ops of `quantized_decomposed` around float ops), which
is the quantized reference the delegate is judged against.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn as nn

import tolerances
from fixture_io import Call, FixtureResult
from fixtures_nn import randn, seed, seed_for, uniform

EXPORT_API = ("torch.export.export(strict=True).module -> prepare_pt2e(XNNPACKQuantizer, "
              "symmetric per-channel static) -> calibrate -> convert_pt2e -> torch.export.export "
              "-> to_edge_transform_and_lower(VulkanPartitioner) -> to_executorch")


def static_int8_quantizer():
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )

    quantizer = XNNPACKQuantizer()
    quantizer.set_global(get_symmetric_quantization_config(is_per_channel=True, is_dynamic=False))
    return quantizer


def weight_only_quantizer(weight_bits: int):
    from executorch.backends.vulkan.quantizer.vulkan_quantizer import (
        VulkanQuantizer,
        get_symmetric_quantization_config,
    )

    quantizer = VulkanQuantizer()
    quantizer.set_global(get_symmetric_quantization_config(is_dynamic=False, weight_bits=weight_bits))
    return quantizer


def float_output_quantizer(float_modules: list[str]):
    """`static_int8_quantizer`, but the named modules (linears) keep a float
    output: the same symmetric per-channel config with `output_activation`
    left out, so the partitioner fuses them into `et_vk.linear_q8ta_q8csw`
    (int8 input, int8 weights, float output)."""
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import get_symmetric_quantization_config
    from torchao.quantization.pt2e.quantizer import QuantizationConfig

    base = get_symmetric_quantization_config(is_per_channel=True, is_dynamic=False)
    float_out = QuantizationConfig(input_activation=base.input_activation, output_activation=None,
                                   weight=base.weight, bias=base.bias, is_qat=False)
    quantizer = static_int8_quantizer()
    for name in float_modules:
        quantizer.set_module_name(name, float_out)
    return quantizer


def quantize(model: nn.Module, calibration: list[tuple[torch.Tensor, ...]], example: tuple,
             quantizer=None):
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    quantizer = quantizer if quantizer is not None else static_int8_quantizer()
    gm = torch.export.export(model, example, strict=True).module()
    gm = prepare_pt2e(gm, quantizer)
    with torch.no_grad():
        for ins in calibration:
            gm(*ins)
    return convert_pt2e(gm)


def lower_quantized(converted, example: tuple, options: dict[str, Any]) -> bytes:
    from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

    ep = torch.export.export(converted, example, strict=True)
    config = EdgeCompileConfig(_skip_dim_order=False)
    lowered = to_edge_transform_and_lower(
        ep, compile_config=config, partitioner=[VulkanPartitioner(dict(options))])
    return lowered.to_executorch().buffer


def output_step(converted) -> float:
    """The scale of the dequantize that produces the (single) output."""
    out = next(n for n in converted.graph.nodes if n.op == "output")
    (node,) = out.args[0] if isinstance(out.args[0], (tuple, list)) else (out.args[0],)
    if node.target != torch.ops.quantized_decomposed.dequantize_per_tensor.default:
        raise AssertionError(f"the output comes from {node.target}, not a dequantize")
    return float(node.args[1])


def q8_fixture(name: str, description: str, model: nn.Module,
               calibration: list[tuple[torch.Tensor, ...]],
               call_inputs: list[tuple[torch.Tensor, ...]],
               options: dict[str, Any] | None = None, weight_bits: int | None = None,
               float_modules: list[str] | None = None) -> FixtureResult:
    """`weight_bits` set: VulkanQuantizer weight-only at that width instead.
    `float_modules` set: those modules keep a float output
    (`float_output_quantizer`), the last of them producing the output, which
    is then judged by the float32 row."""
    model = model.eval()
    example = call_inputs[0]
    quantizer = (weight_only_quantizer(weight_bits) if weight_bits else
                 float_output_quantizer(float_modules) if float_modules else None)
    converted = quantize(model, calibration, example, quantizer)
    pte = lower_quantized(converted, example, options or {})
    calls = []
    for ins in call_inputs:
        with torch.no_grad():
            out = converted(*[t.clone() for t in ins])
        outs = [out] if isinstance(out, torch.Tensor) else list(out)
        calls.append(Call(inputs=list(ins), outputs=outs))
    export = {
        "api": EXPORT_API,
        "partitioner": "VulkanPartitioner",
        "options": dict(options or {}),
        "quantizer": (f"VulkanQuantizer(get_symmetric_quantization_config(is_dynamic=False, "
                      f"weight_bits={weight_bits}))" if weight_bits else
                      "XNNPACKQuantizer(get_symmetric_quantization_config(is_per_channel=True, "
                      "is_dynamic=False))" + "".join(
                          f"; set_module_name({m!r}, the same config with output_activation=None)"
                          for m in float_modules or [])),
        "seed": seed_for(name),
    }
    notes = ["goldens: the convert_pt2e module run eagerly (quantized reference)"]
    if weight_bits is None and not float_modules:
        step = output_step(converted)
        tol = tolerances.tolerance(name, "float32")
        if not step <= tol.atol <= step * 1.001:
            raise AssertionError(f"{name}: tolerance atol {tol.atol} is not one output step {step}")
        notes.append(f"output quantization step {step:.6g}; tolerance atol {tol.atol}")
    return FixtureResult(name=name, description=description, export=export, pte=pte,
                         calls=calls, notes=notes)


class Q8Mlp(nn.Module):
    def __init__(self, g: torch.Generator):
        super().__init__()
        self.fc1 = nn.Linear(32, 64)
        self.fc2 = nn.Linear(64, 16)
        with torch.no_grad():
            for fc in (self.fc1, self.fc2):
                fc.weight.copy_(uniform(g, -0.25, 0.75, *fc.weight.shape) / fc.in_features ** 0.5)
                fc.bias.copy_(randn(g, fc.out_features, scale=0.1))

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def fx_q8_mlp(verify: bool = True) -> FixtureResult:
    del verify  # no portable cross-check: the goldens are the quantized reference itself
    g = seed("q8_mlp")
    model = Q8Mlp(g)
    calibration = [(uniform(g, -1.0, 1.0, 4, 32),) for _ in range(4)]
    ins = [(uniform(g, -1.0, 1.0, 4, 32),)]
    return q8_fixture("q8_mlp", "PT2E static int8: Linear(32,64) -> ReLU -> Linear(64,16), "
                      "batch 4, per-channel symmetric int8 weights, per-tensor int8 activations.",
                      model, calibration, ins)


def fx_q8_gemv(verify: bool = True) -> FixtureResult:
    del verify
    g = seed("q8_gemv")
    model = Q8Mlp(g)
    calibration = [(uniform(g, -1.0, 1.0, 1, 32),) for _ in range(8)]
    ins = [(uniform(g, -1.0, 1.0, 1, 32),)]
    return q8_fixture("q8_gemv", "PT2E static int8 as q8_mlp at batch 1, which the partitioner "
                      "lowers to et_vk.q8ta_linear_gemv.", model, calibration, ins)


def fx_q8_weight_only(verify: bool = True) -> FixtureResult:
    del verify
    g = seed("q8_weight_only")
    model = Q8Mlp(g)
    calibration = [(uniform(g, -1.0, 1.0, 3, 32),)]
    ins = [(uniform(g, -1.0, 1.0, 3, 32),)]
    return q8_fixture("q8_weight_only", "VulkanQuantizer weight-only int8 (weight_bits=8): "
                      "Linear(32,64) -> ReLU -> Linear(64,16) with float activations, batch 3.",
                      model, calibration, ins, weight_bits=8)


def fx_q4_weight_only(verify: bool = True) -> FixtureResult:
    del verify
    g = seed("q4_weight_only")
    model = Q8Mlp(g)
    calibration = [(uniform(g, -1.0, 1.0, 3, 32),)]
    ins = [(uniform(g, -1.0, 1.0, 3, 32),)]
    return q8_fixture("q4_weight_only", "VulkanQuantizer weight-only 4-bit per channel "
                      "(weight_bits=4): Linear(32,64) -> ReLU -> Linear(64,16), batch 3.",
                      model, calibration, ins, weight_bits=4)


class Q8ConvNet(nn.Module):
    def __init__(self, g: torch.Generator):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.pw = nn.Conv2d(8, 8, 1)
        with torch.no_grad():
            for conv in (self.conv1, self.dw, self.pw):
                fan_in = conv.weight[0].numel()
                conv.weight.copy_(randn(g, *conv.weight.shape) / fan_in ** 0.5)
                conv.bias.copy_(randn(g, conv.out_channels, scale=0.1))

    def forward(self, x):
        y = torch.relu(self.conv1(x))
        z = torch.relu(self.dw(y))
        return self.pw(z) + y


def fx_q8_convnet(verify: bool = True) -> FixtureResult:
    del verify
    g = seed("q8_convnet")
    model = Q8ConvNet(g)
    calibration = [(randn(g, 1, 3, 8, 8),) for _ in range(4)]
    ins = [(randn(g, 1, 3, 8, 8),)]
    return q8_fixture("q8_convnet", "PT2E static int8: Conv2d(3,8,3,p1) -> ReLU -> depthwise "
                      "Conv2d(8,8,3,p1,g8) -> ReLU -> pointwise Conv2d(8,8,1) + skip add, "
                      "input [1,3,8,8].", model, calibration, ins)


class Q8ReluPool(nn.Module):
    def __init__(self, g: torch.Generator):
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 3, padding=1)
        self.pw = nn.Conv2d(8, 8, 1)
        with torch.no_grad():
            for conv in (self.conv, self.pw):
                conv.weight.copy_(randn(g, *conv.weight.shape) / conv.weight[0].numel() ** 0.5)
                conv.bias.copy_(randn(g, conv.out_channels, scale=0.1))

    def forward(self, x):
        return self.pw(torch.relu(nn.functional.max_pool2d(self.conv(x), 2)))


def fx_q8_relu_pool(verify: bool = True) -> FixtureResult:
    del verify
    g = seed("q8_relu_pool")
    model = Q8ReluPool(g)
    calibration = [(randn(g, 1, 4, 8, 8),) for _ in range(4)]
    ins = [(randn(g, 1, 4, 8, 8),)]
    return q8_fixture("q8_relu_pool", "PT2E static int8: Conv2d(4,8,3,p1) -> max_pool2d(2) -> "
                      "ReLU -> pointwise Conv2d(8,8,1); the relu after the pool is a separate "
                      "et_vk.q8ta_relu, input [1,4,8,8].", model, calibration, ins)


class Q8Block(nn.Module):
    """A pre-norm transformer block (one head) of linears, layer norms, softmax."""

    def __init__(self, g: torch.Generator, dim: int = 32):
        super().__init__()
        self.dim = dim
        self.ln1 = nn.LayerNorm(dim)
        self.ln2 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.fc1 = nn.Linear(dim, 2 * dim)
        self.fc2 = nn.Linear(2 * dim, dim)
        with torch.no_grad():
            for fc in (self.qkv, self.proj, self.fc1, self.fc2):
                fc.weight.copy_(randn(g, *fc.weight.shape) / fc.in_features ** 0.5)
                fc.bias.copy_(randn(g, fc.out_features, scale=0.1))

    def forward(self, x):
        q, k, v = self.qkv(self.ln1(x)).chunk(3, -1)
        att = torch.softmax(q @ k.transpose(-1, -2) / self.dim ** 0.5, -1)
        x = x + self.proj(att @ v)
        return x + self.fc2(torch.relu(self.fc1(self.ln2(x))))


def fx_q8_block(verify: bool = True) -> FixtureResult:
    del verify
    g = seed("q8_block")
    model = Q8Block(g)
    calibration = [(randn(g, 8, 32),) for _ in range(8)]
    ins = [(randn(g, 8, 32),)]
    return q8_fixture("q8_block", "PT2E static int8 transformer block (one head, dim 32, 8 "
                      "tokens): int8 linears and residual adds, float layer norms, attention "
                      "matmuls and softmax between dequantize/quantize pairs.",
                      model, calibration, ins)


def fx_q8_float_head(verify: bool = True) -> FixtureResult:
    del verify
    g = seed("q8_float_head")
    model = Q8Mlp(g)
    calibration = [(uniform(g, -1.0, 1.0, 4, 32),) for _ in range(4)]
    ins = [(uniform(g, -1.0, 1.0, 4, 32),)]
    return q8_fixture("q8_float_head", "PT2E static int8 MLP whose last linear keeps a float "
                      "output (fc2 quantized with output_activation=None): Linear(32,64)+ReLU "
                      "as et_vk.q8ta_linear, then Linear(64,16) as et_vk.linear_q8ta_q8csw "
                      "(int8 in, float out), batch 4.", model, calibration, ins,
                      float_modules=["fc2"])


class Q8ConvTranspose(nn.Module):
    """An upsampling decoder: conv, two transposed convs (one with output
    padding, one with a non-square kernel and stride), pointwise conv."""

    def __init__(self, g: torch.Generator):
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 3, padding=1)
        self.up1 = nn.ConvTranspose2d(8, 8, 3, stride=2, padding=1, output_padding=1)
        self.up2 = nn.ConvTranspose2d(8, 4, (4, 2), stride=(2, 1), padding=(1, 0))
        with torch.no_grad():
            for conv in (self.conv, self.up1, self.up2):
                fan_in = conv.weight[0].numel()
                conv.weight.copy_(randn(g, *conv.weight.shape) / fan_in ** 0.5)
                conv.bias.copy_(randn(g, conv.bias.shape[0], scale=0.1))

    def forward(self, x):
        return self.up2(torch.relu(self.up1(torch.relu(self.conv(x)))))


def fx_q8_conv_transpose(verify: bool = True) -> FixtureResult:
    del verify
    g = seed("q8_conv_transpose")
    model = Q8ConvTranspose(g)
    calibration = [(randn(g, 1, 4, 6, 6),) for _ in range(4)]
    ins = [(randn(g, 1, 4, 6, 6),)]
    return q8_fixture("q8_conv_transpose", "PT2E static int8 decoder: Conv2d(4,8,3,p1) -> ReLU "
                      "-> ConvTranspose2d(8,8,3,s2,p1,output_padding 1) -> ReLU -> "
                      "ConvTranspose2d(8,4,(4,2),s(2,1),p(1,0)), input [1,4,6,6], output "
                      "[1,4,24,13]; both as et_vk.q8ta_conv2d_transposed.",
                      model, calibration, ins)


class Q8PixelShuffle(nn.Module):
    """ESPCN-style upsampling: conv to 4 r^2 channels, PixelShuffle(2), conv."""

    def __init__(self, g: torch.Generator):
        super().__init__()
        self.conv = nn.Conv2d(4, 16, 3, padding=1)
        self.shuffle = nn.PixelShuffle(2)
        self.out = nn.Conv2d(4, 8, 3, padding=1)
        with torch.no_grad():
            for conv in (self.conv, self.out):
                conv.weight.copy_(randn(g, *conv.weight.shape) / conv.weight[0].numel() ** 0.5)
                conv.bias.copy_(randn(g, conv.out_channels, scale=0.1))

    def forward(self, x):
        return self.out(self.shuffle(self.conv(x)))


def fx_q8_pixel_shuffle(verify: bool = True) -> FixtureResult:
    del verify
    g = seed("q8_pixel_shuffle")
    model = Q8PixelShuffle(g)
    calibration = [(randn(g, 1, 4, 6, 6),) for _ in range(4)]
    ins = [(randn(g, 1, 4, 6, 6),)]
    return q8_fixture("q8_pixel_shuffle", "PT2E static int8 sub-pixel upsampling: Conv2d(4,16,3,"
                      "p1) -> PixelShuffle(2) (et_vk.q8ta_pixel_shuffle: the conv's output "
                      "quantization in, the next conv's input quantization out) -> "
                      "Conv2d(4,8,3,p1), input [1,4,6,6].", model, calibration, ins)


def fx_q8_resnet_tiny(verify: bool = True) -> FixtureResult:
    """ResNet-18's topology (stem 7x7/2 + max pool, eight basic blocks with
    1x1 downsampling shortcuts, global average pool, linear) at widths
    4..32 and 32x32: the committed small variant of `q8_cnn.py`'s real-shape
    ResNet-18 (widths 64..512 at 224x224)."""
    del verify
    import q8_cnn

    g = seed("q8_resnet_tiny")
    model = q8_cnn.resnet18(num_classes=10, width=4)
    q8_cnn.randomize_bn(model, g)
    calibration = [(randn(g, 1, 3, 32, 32),) for _ in range(4)]
    ins = [(randn(g, 1, 3, 32, 32),)]
    return q8_fixture("q8_resnet_tiny", "PT2E static int8 ResNet-18 topology at widths 4..32, "
                      "input [1,3,32,32], 10 classes (random weights, batch norms folded by the "
                      "quantizer): int8 convs with fused relu, 1x1 shortcuts, q8ta_add, float "
                      "max pool and average pool between dequantize/quantize pairs.",
                      model, calibration, ins)


FIXTURES = {
    "q8_mlp": fx_q8_mlp,
    "q8_gemv": fx_q8_gemv,
    "q8_convnet": fx_q8_convnet,
    "q8_relu_pool": fx_q8_relu_pool,
    "q8_block": fx_q8_block,
    "q8_float_head": fx_q8_float_head,
    "q8_conv_transpose": fx_q8_conv_transpose,
    "q8_pixel_shuffle": fx_q8_pixel_shuffle,
    "q8_resnet_tiny": fx_q8_resnet_tiny,
    "q8_weight_only": fx_q8_weight_only,
    "q4_weight_only": fx_q4_weight_only,
}
