"""Small hand-written modules lowered with VulkanPartitioner.

Each `fx_<name>()` returns a FixtureResult. Every fixture seeds torch from its
own name, so re-running reproduces the same weights, inputs and `.pte`.
"""

from __future__ import annotations

import math
import zlib
from typing import Any, Callable, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.export import Dim

from fixture_io import Call, FixtureResult

# The portable CPU kernels and eager PyTorch run the same fp32 math on one machine.
PORTABLE_MAX_ABS_DIFF = 1e-5

EXPORT_API = "torch.export.export -> executorch.exir.to_edge_transform_and_lower -> to_executorch"


# worked_example uses seed 0: it reproduces the bias bytes quoted in FORMAT.md section 9.
SEED_OVERRIDES = {"worked_example": 0}


def seed_for(name: str) -> int:
    return SEED_OVERRIDES.get(name, zlib.crc32(name.encode()) & 0x7FFFFFFF)


def seed(name: str) -> torch.Generator:
    torch.manual_seed(seed_for(name))
    return torch.Generator().manual_seed(seed_for(name) + 1)


def lower(model: nn.Module, args: tuple, dynamic_shapes: Any = None,
          options: dict[str, Any] | None = None, vulkan: bool = True) -> bytes:
    from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner
    from executorch.exir import to_edge_transform_and_lower

    ep = torch.export.export(model, args, dynamic_shapes=dynamic_shapes, strict=True)
    partitioner = [VulkanPartitioner(dict(options or {}))] if vulkan else []
    return to_edge_transform_and_lower(ep, partitioner=partitioner).to_executorch().buffer


def run_eager(model: nn.Module, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    with torch.no_grad():
        out = model(*[t.clone() for t in inputs])
    if isinstance(out, torch.Tensor):
        return [out]
    return list(out)


def verify_on_portable_cpu(name: str, model: nn.Module, args: tuple, dynamic_shapes: Any,
                           calls: list[Call]) -> float:
    """Exports without a partitioner and runs the portable CPU kernels.

    Checks that the goldens agree with ExecuTorch's own reading of the same
    graph (input order, output order, decompositions). Returns the largest
    absolute float difference; raises on mismatching ints/bools/shapes.
    """
    from executorch.extension.pybindings import portable_lib

    pte = lower(model, args, dynamic_shapes, vulkan=False)
    method = portable_lib._load_for_executorch_from_buffer(pte)
    worst = 0.0
    for k, call in enumerate(calls):
        got = method.forward(tuple(t.clone() for t in call.inputs))
        if len(got) != len(call.outputs):
            raise AssertionError(f"{name} call{k}: portable gave {len(got)} outputs")
        for i, (g, e) in enumerate(zip(got, call.outputs)):
            if g.shape != e.shape or g.dtype != e.dtype:
                raise AssertionError(
                    f"{name} call{k}.out{i}: portable {g.dtype}{list(g.shape)} "
                    f"vs eager {e.dtype}{list(e.shape)}")
            if e.dtype.is_floating_point:
                worst = max(worst, float((g - e).abs().max()) if e.numel() else 0.0)
            elif not torch.equal(g, e):
                raise AssertionError(f"{name} call{k}.out{i}: portable differs from eager")
    return worst


def module_fixture(name: str, description: str, model: nn.Module,
                   call_inputs: list[tuple[torch.Tensor, ...]],
                   options: dict[str, Any] | None = None,
                   dynamic_shapes: Any = None,
                   dynamic_shapes_doc: Any = None,
                   verify: bool = True) -> FixtureResult:
    model = model.eval()
    example = call_inputs[-1]
    pte = lower(model, example, dynamic_shapes, options)
    calls = [Call(inputs=list(ins), outputs=run_eager(model, ins)) for ins in call_inputs]
    notes = []
    names = getattr(model, "NAMES", None)
    if names is not None and len(names) != len(calls[0].outputs):
        raise AssertionError(f"{name}: {len(names)} NAMES for {len(calls[0].outputs)} outputs")
    if verify:
        worst = verify_on_portable_cpu(name, model, example, dynamic_shapes, calls)
        if worst > PORTABLE_MAX_ABS_DIFF:
            raise AssertionError(f"{name}: portable CPU run differs from eager by {worst:.3g}")
        notes.append(f"portable CPU run of a non-delegated export: max |diff| {worst:.3g}")
    export = {
        "api": EXPORT_API,
        "partitioner": "VulkanPartitioner",
        "options": dict(options or {}),
        "seed": seed_for(name),
    }
    if dynamic_shapes_doc is not None:
        export["dynamic_shapes"] = dynamic_shapes_doc
    return FixtureResult(name=name, description=description, export=export,
                         pte=pte, calls=calls, notes=notes)


def randn(g: torch.Generator, *shape: int, scale: float = 1.0) -> torch.Tensor:
    return torch.randn(*shape, generator=g) * scale


def uniform(g: torch.Generator, lo: float, hi: float, *shape: int) -> torch.Tensor:
    return torch.rand(*shape, generator=g) * (hi - lo) + lo


# ---------------------------------------------------------------- fixtures


class Add(nn.Module):
    def forward(self, x, y):
        return x + y


def fx_one_op(verify: bool = True) -> FixtureResult:
    g = seed("one_op")
    ins = (randn(g, 2, 4), randn(g, 2, 4))
    return module_fixture("one_op", "x + y, float32 [2,4]: a single aten.add.Tensor.",
                          Add(), [ins], verify=verify)


class WorkedExample(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 3)

    def forward(self, x, y):
        return torch.relu(self.linear(x + y * 2.0))


def fx_worked_example(verify: bool = True) -> FixtureResult:
    g = seed("worked_example")
    model = WorkedExample()
    ins = (randn(g, 2, 4), randn(g, 2, 4))
    return module_fixture(
        "worked_example",
        "FORMAT.md section 9: relu(Linear(4,3)(x + y*2.0)), x and y float32 [2,4]. "
        "Delegate args are [y, x, out]: not the method's input order.",
        model, [ins], verify=verify)


class Mlp(nn.Module):
    def __init__(self, dims=(16, 32, 32, 8)):
        super().__init__()
        self.fc1 = nn.Linear(dims[0], dims[1])
        self.fc2 = nn.Linear(dims[1], dims[2])
        self.fc3 = nn.Linear(dims[2], dims[3])

    def forward(self, x):
        return self.fc3(torch.relu(self.fc2(F.gelu(self.fc1(x)))))


def fx_mlp(verify: bool = True) -> FixtureResult:
    g = seed("mlp")
    model = Mlp()
    ins = (randn(g, 3, 16),)
    return module_fixture("mlp", "Linear(16,32) -> GELU -> Linear(32,32) -> ReLU -> "
                          "Linear(32,8), batch 3.", model, [ins], verify=verify)


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=True)
        self.bn1 = nn.BatchNorm2d(8)
        self.pool1 = nn.MaxPool2d(2)
        self.bn2 = nn.BatchNorm2d(8)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=True)
        self.pool2 = nn.AvgPool2d(2)
        self.fc = nn.Linear(8 * 4 * 4, 10)

    def forward(self, x):
        x = self.pool1(torch.relu(self.bn1(self.conv1(x))))
        # A second batch norm after pooling has no conv to fold into.
        x = self.pool2(self.dw(self.bn2(x)))
        return self.fc(torch.flatten(x, 1))


def _randomize_bn(bn: nn.BatchNorm2d, g: torch.Generator) -> None:
    n = bn.num_features
    with torch.no_grad():
        bn.running_mean.copy_(randn(g, n, scale=0.5))
        bn.running_var.copy_(uniform(g, 0.5, 2.0, n))
        bn.weight.copy_(uniform(g, 0.5, 1.5, n))
        bn.bias.copy_(randn(g, n, scale=0.2))


def fx_convnet(verify: bool = True) -> FixtureResult:
    g = seed("convnet")
    model = ConvNet()
    _randomize_bn(model.bn1, g)
    _randomize_bn(model.bn2, g)
    ins = (randn(g, 1, 3, 16, 16),)
    return module_fixture(
        "convnet",
        "Conv2d(3,8,3,pad 1) -> BatchNorm2d (eval, random running stats; folded into the "
        "conv at export) -> ReLU (fused: conv_with_clamp) -> MaxPool2d(2) -> BatchNorm2d "
        "(not foldable) -> depthwise Conv2d(8,8,3,groups 8) -> AvgPool2d(2) -> flatten -> "
        "Linear(128,10); input [1,3,16,16].",
        model, [ins], verify=verify)


def fx_convnet_fp16(verify: bool = True) -> FixtureResult:
    g = seed("convnet_fp16")
    model = ConvNet()
    _randomize_bn(model.bn1, g)
    _randomize_bn(model.bn2, g)
    ins = (randn(g, 1, 3, 16, 16),)
    return module_fixture(
        "convnet_fp16",
        "The convnet fixture's architecture with its own weights, exported with force_fp16: "
        "conv, pooling and batch norm run on float16 tensors, method I/O stays float32. "
        "Goldens are float32 eager.",
        model, [ins], options={"force_fp16": True}, verify=verify)


class Block(nn.Module):
    """Pre-norm transformer block with attention spelled out."""

    def __init__(self, dim=32, heads=4, hidden=64):
        super().__init__()
        self.heads = heads
        self.head_dim = dim // heads
        self.ln1 = nn.LayerNorm(dim)
        self.wq = nn.Linear(dim, dim)
        self.wk = nn.Linear(dim, dim)
        self.wv = nn.Linear(dim, dim)
        self.wo = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        b, s, d = x.shape
        h = self.ln1(x)
        q = self.wq(h).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.wk(h).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        v = self.wv(h).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(self.head_dim))
        att = torch.softmax(att, dim=-1)
        o = torch.matmul(att, v).transpose(1, 2).reshape(b, s, d)
        x = x + self.wo(o)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def fx_transformer_block(verify: bool = True) -> FixtureResult:
    g = seed("transformer_block")
    model = Block()
    with torch.no_grad():
        for ln in (model.ln1, model.ln2):
            ln.weight.copy_(uniform(g, 0.5, 1.5, 32))
            ln.bias.copy_(randn(g, 32, scale=0.1))
    ins = (randn(g, 1, 8, 32),)
    return module_fixture(
        "transformer_block",
        "Pre-norm block, seq 8, dim 32, 4 heads: LayerNorm, q/k/v linears, "
        "softmax(q k^T / sqrt(8)) v by matmul, output linear, residual, LayerNorm, "
        "Linear(32,64) -> GELU -> Linear(64,32), residual. Input [1,8,32].",
        model, [ins], verify=verify)


class Unary(nn.Module):
    # torch.log is not taken by the Vulkan partitioner (it would run on the CPU), so it
    # is left out; partial_delegate covers CPU fallbacks.
    NAMES = ["abs(x)", "neg(x)", "exp(x)", "sqrt(p)", "rsqrt(p)", "sin(x)", "cos(x)",
             "tanh(x)", "sigmoid(x)", "relu(x)", "gelu(x)", "gelu(x, tanh)", "hardswish(x)",
             "hardtanh(x, -0.75, 1.25)", "hardsigmoid(x)", "leaky_relu(x, 0.15)",
             "clamp(x, -0.5, 0.8)", "clamp(x, min=-0.25)", "round(2x)", "pow(p, 1.5)",
             "relu6(4x)", "silu(x)"]

    def forward(self, x, p):
        return (
            torch.abs(x),
            torch.neg(x),
            torch.exp(x),
            torch.sqrt(p),
            torch.rsqrt(p),
            torch.sin(x),
            torch.cos(x),
            torch.tanh(x),
            torch.sigmoid(x),
            torch.relu(x),
            F.gelu(x),
            F.gelu(x, approximate="tanh"),
            F.hardswish(x),
            F.hardtanh(x, -0.75, 1.25),
            F.hardsigmoid(x),
            F.leaky_relu(x, 0.15),
            torch.clamp(x, -0.5, 0.8),
            torch.clamp(x, min=-0.25),
            torch.round(x * 2.0),
            torch.pow(p, 1.5),
            F.relu6(x * 4.0),
            F.silu(x),
        )


def fx_unary(verify: bool = True) -> FixtureResult:
    g = seed("unary")
    x = uniform(g, -3.0, 3.0, 3, 5, 7)
    # Keep x*2 away from the .5 rounding boundaries.
    frac = (x * 2.0) - torch.floor(x * 2.0)
    x = torch.where((frac - 0.5).abs() < 0.02, x + 0.05, x)
    p = uniform(g, 0.1, 4.0, 3, 5, 7)
    return module_fixture(
        "unary",
        "Unary ops on float32 [3,5,7], one output each, in this order: "
        + "; ".join(Unary.NAMES)
        + ". x in [-3,3] (input 0), p in [0.1,4] (input 1) feeds sqrt, rsqrt, pow.",
        Unary(), [(x, p)], verify=verify)


class Binary(nn.Module):
    # torch.maximum is left out: the Vulkan partitioner does not take it (it would run
    # as aten::maximum.out on the CPU).
    NAMES = ["add(a, b, alpha=2)", "a - b", "sub(a, b, alpha=0.5)", "a * b", "a / b",
             "div(a, b, floor)", "div(a, b, trunc)", "pow(base, b)", "minimum(a, b)",
             "where(a > b, a, 3b)", "a > b (bool)", "ia == ib (bool)", "a * 0.5 + 1.25"]

    def forward(self, a, b, base, ia, ib):
        return (
            torch.add(a, b, alpha=2.0),
            a - b,
            torch.sub(a, b, alpha=0.5),
            a * b,
            a / b,
            torch.div(a, b, rounding_mode="floor"),
            torch.div(a, b, rounding_mode="trunc"),
            torch.pow(base, b),
            torch.minimum(a, b),
            torch.where(a > b, a, b * 3.0),
            a > b,
            ia == ib,
            a * 0.5 + 1.25,
        )


def fx_binary(verify: bool = True) -> FixtureResult:
    g = seed("binary")
    b = uniform(g, 0.5, 2.0, 4, 5) * torch.where(torch.rand(4, 5, generator=g) < 0.5, -1.0, 1.0)
    # Resample a until no quotient a/b sits near an integer: floor/trunc must not flip.
    for _ in range(1000):
        a = uniform(g, -4.0, 4.0, 3, 1, 5)
        q = a / b
        f = q - torch.floor(q)
        if bool(((f > 0.02) & (f < 0.98)).all()):
            break
    else:
        raise RuntimeError("could not draw well-separated quotients")
    base = uniform(g, 0.5, 2.0, 3, 1, 5)
    # Integer-valued floats so that eq has both outcomes.
    ia = torch.randint(-2, 3, (3, 1, 5), generator=g).float()
    ib = torch.randint(-2, 3, (4, 5), generator=g).float()
    return module_fixture(
        "binary",
        "Broadcasting binary ops, a [3,1,5] with b [4,5] -> [3,4,5]; outputs in order: "
        + "; ".join(Binary.NAMES)
        + ". Inputs: a, b (|b| in [0.5,2]), base in [0.5,2] for pow, ia/ib integer-valued "
        "floats for eq. a/b stays >= 0.02 away from integers.",
        Binary(), [(a, b, base, ia, ib)], verify=verify)


class CompareLogic(nn.Module):
    # a != b (aten.ne.Tensor), logical_not and logical_xor are not taken by the Vulkan
    # partitioner (they would run on the CPU), so they are left out.
    NAMES = ["a >= b", "a < b", "a <= b", "a == 0.5", "a != 0.5", "a > 0.25",
             "a >= -0.5", "a < 1", "a <= 0", "ia == 2", "ia > ib", "ia <= -1",
             "m & n", "m | n", "~m", "logical_and(m, a > b)", "logical_or(m, n)",
             "where(m, a, b)", "(a > b).float()"]

    def forward(self, a, b, ia, ib, m, n):
        return (
            a >= b,
            a < b,
            a <= b,
            a == 0.5,
            a != 0.5,
            a > 0.25,
            a >= -0.5,
            a < 1,
            a <= 0.0,
            ia == 2,
            ia > ib,
            ia <= -1,
            m & n,
            m | n,
            ~m,
            torch.logical_and(m, a > b),
            torch.logical_or(m, n),
            torch.where(m, a, b),
            (a > b).float(),
        )


def fx_compare_logic(verify: bool = True) -> FixtureResult:
    g = seed("compare_logic")
    # Multiples of 0.25 so that the scalar and tensor equalities have both outcomes.
    a = torch.round(uniform(g, -2.0, 2.0, 2, 3, 5) * 4.0) / 4.0
    b = torch.round(uniform(g, -2.0, 2.0, 3, 1) * 4.0) / 4.0
    ia = torch.randint(-3, 4, (2, 3, 5), generator=g)
    ib = torch.randint(-3, 4, (5,), generator=g)
    m = torch.rand(2, 3, 5, generator=g) < 0.5
    n = torch.rand(3, 5, generator=g) < 0.5
    return module_fixture(
        "compare_logic",
        "Comparisons (Tensor and Scalar overloads), bool bitwise/logical ops and where, "
        "broadcasting a [2,3,5] with b [3,1], int64 ia [2,3,5] with ib [5], bool m [2,3,5] "
        "with n [3,5]; outputs in order: " + "; ".join(CompareLogic.NAMES)
        + ". a and b are multiples of 0.25.",
        CompareLogic(), [(a, b, ia, ib, m, n)], verify=verify)


class ShapeOps(nn.Module):
    NAMES = ["permute", "reshape", "transpose_reshape", "slice_step_neg", "select_neg",
             "cat", "expand", "unsqueeze", "squeeze", "repeat", "flip", "split0", "split1"]

    def forward(self, x, y, z, w):
        s0, s1 = torch.split(x, [1, 2], dim=1)
        return (
            x.permute(0, 2, 3, 1),
            x.reshape(6, 20),
            x.transpose(1, 3).reshape(2, -1),
            x[:, 1:, ::2, -4:-1],
            x.select(2, -1),
            torch.cat([x, y], dim=1),
            z.expand(2, 3, 4, 5),
            w.unsqueeze(1),
            z.squeeze(2),
            w.repeat(2, 1, 3),
            torch.flip(x, [1, 3]),
            s0,
            s1,
        )


def fx_shape_ops(verify: bool = True) -> FixtureResult:
    g = seed("shape_ops")
    ins = (randn(g, 2, 3, 4, 5), randn(g, 2, 2, 4, 5), randn(g, 1, 3, 1, 5), randn(g, 3, 4, 5))
    return module_fixture(
        "shape_ops",
        "Shape ops; inputs x [2,3,4,5], y [2,2,4,5], z [1,3,1,5], w [3,4,5]; outputs: "
        "x.permute(0,2,3,1), x.reshape(6,20), x.transpose(1,3).reshape(2,-1), "
        "x[:,1:,::2,-4:-1], x.select(2,-1), cat([x,y],1), z.expand(2,3,4,5), "
        "w.unsqueeze(1), z.squeeze(2), w.repeat(2,1,3), flip(x,[1,3]), split(x,[1,2],1).",
        ShapeOps(), [ins], verify=verify)


class PadCatRepeat(nn.Module):
    NAMES = ["pad(x, (1, 2))", "pad(x, (0, 1, 2, 1), value=0.5)", "cat([x, y, x], -1)",
             "cat([ia, ib], 0)", "y.repeat(2, 1, 1, 3)", "split0", "split1", "split2"]

    def forward(self, x, y, ia, ib):
        s0, s1, s2 = torch.split(x, [2, 4, 1], dim=-1)
        return (
            F.pad(x, (1, 2)),
            F.pad(x, (0, 1, 2, 1), value=0.5),
            torch.cat([x, y, x], dim=-1),
            torch.cat([ia, ib], dim=0),
            y.repeat(2, 1, 1, 3),
            s0,
            s1,
            s2,
        )


def fx_pad_cat_repeat(verify: bool = True) -> FixtureResult:
    g = seed("pad_cat_repeat")
    ins = (randn(g, 3, 5, 7), randn(g, 3, 5, 2), torch.randint(-9, 9, (2, 3), generator=g),
           torch.randint(-9, 9, (3, 3), generator=g))
    return module_fixture(
        "pad_cat_repeat",
        "x [3,5,7], y [3,5,2], int64 ia [2,3], ib [3,3]; outputs: pad(x, (1,2)), "
        "pad(x, (0,1,2,1), value=0.5), cat([x,y,x], -1), "
        "cat([ia,ib], 0), y.repeat(2,1,1,3) (adds a dim), split(x, [2,4,1], -1).",
        PadCatRepeat(), [ins], verify=verify)


class CreationOps(nn.Module):
    # zeros/ones(_like) arrive as full(_like); torch.scalar_tensor is not taken by the
    # Vulkan partitioner (it would run as aten::scalar_tensor.out on the CPU). Integer
    # results are concatenated rather than added: Vulkan exports int add, but the
    # fixture tests creation, not integer arithmetic.
    def forward(self, x, i):
        return (
            x + torch.full((3, 4), 1.5),
            x * torch.zeros_like(x),
            x + torch.ones_like(x),
            torch.full_like(x, -2.25) - x,
            x + torch.ones(4),
            torch.cat([i, torch.zeros(3, 4, dtype=torch.int64)]),
            torch.cat([i, torch.full_like(i, 7)], dim=1),
            x[0] + torch.arange(0.5, 2.5, 0.5),
            torch.cat([i[0], torch.arange(-3, 9, 3)]),
        )


def fx_creation_ops(verify: bool = True) -> FixtureResult:
    g = seed("creation_ops")
    ins = (randn(g, 3, 4), torch.randint(-9, 9, (3, 4), generator=g))
    return module_fixture(
        "creation_ops",
        "Creation ops combined with inputs x float32 [3,4] and i int64 [3,4]: "
        "x + full((3,4), 1.5), x * zeros_like(x), x + ones_like(x), full_like(x, -2.25) - x, "
        "x + ones(4), cat([i, zeros(3,4, int64)]), cat([i, full_like(i, 7)], 1), "
        "x[0] + arange(0.5, 2.5, 0.5), cat([i[0], arange(-3, 9, 3)]).",
        CreationOps(), [ins], verify=verify)


class Reductions(nn.Module):
    # Vulkan takes a reduction over the last dim, or over one or two dims with
    # keepdim=True; mean(0) or argmin(0) without keepdim stay on the CPU.
    def forward(self, x):
        return (
            x.sum(dim=-1),
            x.sum(dim=1, keepdim=True),
            x.sum(dim=[0, 1], keepdim=True),
            x.mean(dim=-1),
            x.mean(dim=-2, keepdim=True),
            x.mean(dim=0, keepdim=True),
            x.amax(dim=-1),
            x.amin(dim=1, keepdim=True),
            x.argmax(dim=-1),
            x.argmin(dim=0, keepdim=True),
            torch.softmax(x, dim=-1),
            torch.log_softmax(x, dim=1),
        )


def fx_reductions(verify: bool = True) -> FixtureResult:
    g = seed("reductions")
    ins = (randn(g, 3, 5, 7),)
    return module_fixture(
        "reductions",
        "Reductions over x float32 [3,5,7]; outputs: sum(-1), sum(1, keepdim), "
        "sum([0,1], keepdim), mean(-1), mean(-2, keepdim), mean(0, keepdim), amax(-1), "
        "amin(1, keepdim), argmax(-1) (int64), argmin(0, keepdim) (int64), softmax(-1), "
        "log_softmax(1).",
        Reductions(), [ins], verify=verify)


class MatmulOps(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(7, 11, bias=False)

    def forward(self, a, b, c, d, bias, x):
        return (
            torch.mm(a, b),
            torch.bmm(c, d),
            torch.addmm(bias, a, b, beta=0.5, alpha=2.0),
            self.linear(x),
            torch.matmul(x, self.linear.weight.t() * 0.5),
        )


def fx_matmul(verify: bool = True) -> FixtureResult:
    g = seed("matmul")
    ins = (randn(g, 5, 7), randn(g, 7, 3), randn(g, 2, 5, 7), randn(g, 2, 7, 6),
           randn(g, 5, 3), randn(g, 5, 7))
    return module_fixture(
        "matmul",
        "mm a[5,7] @ b[7,3]; bmm c[2,5,7] @ d[2,7,6]; addmm(bias[5,3], a, b, beta=0.5, "
        "alpha=2); Linear(7,11, no bias)(x[5,7]); x @ (W^T * 0.5) with the constant weight.",
        MatmulOps(), [ins], verify=verify)


class Indexing(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 6)

    def forward(self, tok, x, sel, src, gidx, t, tidx):
        return (
            self.emb(tok),
            torch.index_select(x, 0, sel),
            torch.gather(src, 1, gidx),
            t[tidx],
        )


def fx_indexing(verify: bool = True) -> FixtureResult:
    g = seed("indexing")
    ins = (
        torch.randint(0, 20, (2, 3), generator=g),
        randn(g, 5, 4),
        torch.tensor([4, 0, 2]),
        randn(g, 3, 4),
        torch.randint(0, 4, (3, 2), generator=g),
        randn(g, 6, 5),
        torch.tensor([5, 1, 1, 3]),
    )
    return module_fixture(
        "indexing",
        "embedding(20x6)(tok int64 [2,3]); index_select(x[5,4], 0, [4,0,2]); "
        "gather(src[3,4], 1, idx int64 [3,2]); t[6,5][idx int64 [4]] (aten.index.Tensor).",
        Indexing(), [ins], verify=verify)


class IndexWrap(nn.Module):
    def forward(self, t, i0, i1):
        return t[i0], t[:, i1], t[:, :, i0]


def fx_index_wrap(verify: bool = True) -> FixtureResult:
    g = seed("index_wrap")
    ins = (randn(g, 5, 6, 7), torch.tensor([-1, 0, -5, 3, -2]), torch.tensor([-6, 5, -1]))
    return module_fixture(
        "index_wrap",
        "aten.index.Tensor with negative int64 indices, which count from the end: "
        "t[5,6,7][i0], t[:, i1], t[:, :, i0] with i0 = [-1,0,-5,3,-2], i1 = [-6,5,-1].",
        IndexWrap(), [ins], verify=verify)


class DynamicSeq(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x):
        b, s, d = x.shape
        # Rank-3 linear: view_copy -> linear -> view_copy, sizes carry a SymInt.
        # A softmax sits between the two reshapes: with only an elementwise op there,
        # FuseViewCopyTransform merges the views and breaks the graph (it uses the
        # SymInt `s * 2` before its definition).
        h = torch.softmax(self.proj(x), dim=-1)
        h = torch.softmax(h.reshape(b, s * 2, d // 2), dim=-1)   # s*2: a SymInt `mul`
        h = h.reshape(b, s, d)
        return h - h.mean(dim=1, keepdim=True) + x[:, -1:, :]


def fx_dynamic_seq(verify: bool = True) -> FixtureResult:
    g = seed("dynamic_seq")
    seq = Dim("seq", min=1, max=16)
    calls = [(randn(g, 1, n, 8),) for n in (1, 5, 16)]
    return module_fixture(
        "dynamic_seq",
        "x float32 [1,S,8] with S in 1..16 (calls at S = 1, 5, 16): softmax(Linear(8,8)(x), "
        "-1), reshape to [1,2S,4] (SymInt mul), softmax(-1), reshape back, subtract the mean "
        "over S, add the last row x[:, -1:]. Output [1,S,8].",
        DynamicSeq(), calls, options={"require_dynamic_shapes": True},
        dynamic_shapes=({1: seq},), dynamic_shapes_doc={"x": {"1": {"min": 1, "max": 16}}},
        verify=verify)


class DynamicSymInt(nn.Module):
    def forward(self, x):
        s = x.shape[1]
        # s // 2 is a SymInt `floordiv` feeding a view size; a softmax keeps the
        # two views apart (see DynamicSeq).
        h = torch.softmax(x.reshape(1, s // 2, 16), dim=-1).reshape(1, s, 8)
        return h, x[:, 1:] - x[:, :-1]


def fx_dynamic_symint(verify: bool = True) -> FixtureResult:
    g = seed("dynamic_symint")
    k = Dim("k", min=1, max=8)
    calls = [(randn(g, 1, n, 8),) for n in (2, 6, 16)]
    return module_fixture(
        "dynamic_symint",
        "x float32 [1,S,8] with S = 2k, k in 1..8 (calls at S = 2, 6, 16): softmax over "
        "x viewed as [1,S//2,16] (SymInt floordiv), viewed back; and x[:,1:] - x[:,:-1] "
        "([1,S-1,8], slices at live shapes).",
        DynamicSymInt(), calls, options={"require_dynamic_shapes": True},
        dynamic_shapes=({1: 2 * k},), dynamic_shapes_doc={"x": {"1": {"min": 2, "max": 16, "multiple_of": 2}}},
        verify=verify)


def fx_fp16_mlp(verify: bool = True) -> FixtureResult:
    g = seed("fp16_mlp")
    model = Mlp((16, 32, 32, 8))
    ins = [(randn(g, 3, 16, scale=4.0),)]   # outputs of order 1, not 0.1
    return module_fixture(
        "fp16_mlp",
        "The mlp fixture's architecture with its own weights, exported with force_fp16: "
        "float16 on the device, float32 method I/O. Goldens are float32 eager.",
        model, ins, options={"force_fp16": True}, verify=verify)


class ConvMore(nn.Module):
    """Convolution variants, pooling edge cases and spatial ops, on odd sizes."""

    NAMES = ["conv1d", "conv_clamp", "conv_grouped", "max_pool", "avg_pool_no_pad_count",
             "avg_pool_divisor", "nearest", "bilinear", "bilinear_corners", "pixel_shuffle",
             "group_norm", "conv_transposed", "nearest_fractional", "bilinear_scales",
             "max_pool_dilated"]

    def __init__(self):
        super().__init__()
        self.c1d = nn.Conv1d(3, 4, 3, stride=2, padding=2, dilation=2, bias=False)
        self.c2d = nn.Conv2d(4, 6, 3, stride=2, padding=1, bias=True)
        self.cg = nn.Conv2d(4, 4, 3, padding=2, dilation=2, groups=2, bias=True)
        self.gn = nn.GroupNorm(2, 4)
        self.ct = nn.ConvTranspose2d(4, 4, 3, stride=2, padding=1, output_padding=1, groups=2)

    def forward(self, x, s):
        return (
            self.c1d(s),
            F.hardtanh(self.c2d(x), -0.5, 0.5),
            self.cg(x),
            F.max_pool2d(x, 3, stride=2, padding=1, ceil_mode=True),
            F.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
            F.avg_pool2d(x, 2, stride=1, divisor_override=3),
            F.interpolate(x, scale_factor=2, mode="nearest"),
            F.interpolate(x, size=(9, 7), mode="bilinear", align_corners=False),
            F.interpolate(x, size=(4, 8), mode="bilinear", align_corners=True),
            F.pixel_shuffle(x, 2),
            self.gn(x),
            self.ct(x),
            F.interpolate(x, scale_factor=1.5, mode="nearest"),
            F.interpolate(x, scale_factor=(0.5, 1.7), mode="bilinear", align_corners=False),
            F.max_pool2d(x, 2, stride=1, dilation=2),
        )


def fx_conv_more(verify: bool = True) -> FixtureResult:
    g = seed("conv_more")
    model = ConvMore()
    with torch.no_grad():
        model.gn.weight.copy_(uniform(g, 0.5, 1.5, 4))
        model.gn.bias.copy_(randn(g, 4, scale=0.2))
    ins = (randn(g, 1, 4, 6, 5), randn(g, 1, 3, 11))
    return module_fixture(
        "conv_more",
        "x float32 [1,4,6,5], s float32 [1,3,11]: Conv1d(3,4,3,stride 2,pad 2,dilation 2,"
        "no bias)(s); hardtanh(-0.5,0.5) of Conv2d(4,6,3,stride 2,pad 1) (conv_with_clamp); "
        "grouped Conv2d(4,4,3,pad 2,dilation 2,groups 2); max_pool2d(3,2,pad 1,ceil_mode); "
        "avg_pool2d(3,2,pad 1,ceil_mode,count_include_pad=False); avg_pool2d(2,1,"
        "divisor_override 3); nearest x2; bilinear to (9,7); bilinear align_corners to (4,8); "
        "pixel_shuffle(2); GroupNorm(2,4); ConvTranspose2d(4,4,3,stride 2,pad 1,output_padding 1,"
        "groups 2); nearest x1.5; bilinear x(0.5,1.7); max_pool2d(2,stride 1,dilation 2).",
        model, [ins], verify=verify)


class PartialDelegate(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x):
        h = torch.relu(self.fc(x))
        c = torch.cumsum(h, dim=-1)      # not taken by the Vulkan partitioner
        return torch.sigmoid(c) * 2.0 - 1.0


def fx_partial_delegate(verify: bool = True) -> FixtureResult:
    g = seed("partial_delegate")
    ins = (randn(g, 4, 6),)
    return module_fixture(
        "partial_delegate",
        "relu(Linear(6,6)(x)) on Vulkan, cumsum(-1) on the CPU (aten::cumsum.out kernel "
        "call), then sigmoid(c)*2-1 on Vulkan again: two delegates around one KernelCall. "
        "x float32 [4,6].",
        PartialDelegate(), [ins], verify=verify)


class RopeHf(nn.Module):
    """HF rotate-half RoPE on q/k at a live position: full tables [16, 8] and
    partial ones [16, 6] (the last 2 dims pass through), sliced at
    input_pos[0] as in the Llama export."""

    def __init__(self):
        super().__init__()
        from executorch.backends.vulkan.patterns.rope_hf import HfRotaryEmbeddingPattern

        self.rope = HfRotaryEmbeddingPattern()
        for name, dim in (("full", 8), ("part", 6)):
            inv = 1.0 / (10000.0 ** (torch.arange(0, dim, 2).float() / dim))
            angles = torch.outer(torch.arange(16).float(), inv)
            angles = torch.cat((angles, angles), dim=-1)
            self.register_buffer(f"cos_{name}", angles.cos())
            self.register_buffer(f"sin_{name}", angles.sin())

    def forward(self, xq, xk, input_pos):
        pos = input_pos[0].item()
        torch._check_is_size(pos)
        torch._check(pos + 3 <= 16)
        q1, k1 = self.rope(xq, xk, self.cos_full[pos:pos + 3], self.sin_full[pos:pos + 3])
        q2, k2 = self.rope(xq, xk, self.cos_part[pos:pos + 3], self.sin_part[pos:pos + 3])
        return q1, k1, q2, k2


def fx_rope_hf(verify: bool = True) -> FixtureResult:
    g = seed("rope_hf")
    calls = [(randn(g, 1, 3, 4, 8), randn(g, 1, 3, 2, 8), torch.tensor([p])) for p in (0, 5, 13)]
    return module_fixture(
        "rope_hf",
        "HF rotate-half RoPE (et_vk.apply_rotary_emb_hf): xq [1,3,4,8], xk [1,3,2,8], "
        "input_pos int64 [1] at 0, 5, 13 (the table end); cos/sin tables [16,8] (full) and "
        "[16,6] (partial: dims 6..8 pass through), sliced at input_pos[0].item().",
        RopeHf(), calls, verify=verify)


class RopeInterleaved(nn.Module):
    """EdgeTAM-style pair-interleaved RoPE through the et_vk custom op, with
    a 4-D [1, N, C/2, 2] (cos, sin) table as EdgeTAM passes it."""

    def __init__(self):
        super().__init__()
        import executorch.backends.vulkan.custom_ops_lib  # noqa: F401  (registers et_vk ops)

        inv = 1.0 / (100.0 ** (torch.arange(0, 10, 2).float() / 10))
        angles = torch.outer(torch.arange(7).float(), inv)
        self.register_buffer("freqs_cis", torch.stack((angles.cos(), angles.sin()), dim=-1).unsqueeze(0))

    def forward(self, x):
        return torch.ops.et_vk.apply_rotary_emb_interleaved(x, self.freqs_cis)


def fx_rope_interleaved(verify: bool = True) -> FixtureResult:
    g = seed("rope_interleaved")
    # No portable CPU kernel exists for the et_vk op, so the portable cross-check is skipped:
    # the golden is the op's own eager CPU implementation (custom_ops_lib.py).
    del verify
    return module_fixture(
        "rope_interleaved",
        "et_vk.apply_rotary_emb_interleaved (EdgeTAM pair-interleaved RoPE): x [2,7,10], "
        "freqs_cis [1,7,5,2] holding (cos, sin) pairs; out[2k] = x[2k]c - x[2k+1]s, "
        "out[2k+1] = x[2k]s + x[2k+1]c.",
        RopeInterleaved(), [(randn(g, 2, 7, 10),)], verify=False)


class EtVkSdpa(nn.Module):
    """The fused et_vk.sdpa custom op (non-causal, no cache): one kv head
    broadcast over the query heads with an additive [Sq, Skv] mask, and plain
    heads with a scale and no mask."""

    def __init__(self):
        super().__init__()
        import executorch.backends.vulkan.custom_ops_lib  # noqa: F401  (registers et_vk ops)

    def forward(self, q, k, v, mask, q2, k2):
        a = torch.ops.et_vk.sdpa(q, k, v, mask)
        b = torch.ops.et_vk.sdpa(q2, k2, k2, None, 0.3)
        return a, b


def fx_et_vk_sdpa(verify: bool = True) -> FixtureResult:
    g = seed("et_vk_sdpa")
    mask = torch.zeros(5, 70)
    mask[:, 60:] = float("-inf")
    mask[1, :3] = -1.5
    ins = (randn(g, 2, 4, 5, 6), randn(g, 2, 1, 70, 6), randn(g, 2, 1, 70, 6), mask,
           randn(g, 1, 3, 4, 66), randn(g, 1, 3, 9, 66))
    # No portable CPU kernel exists for the et_vk op, so the portable cross-check is skipped:
    # the golden is the op's own eager CPU implementation (custom_ops_lib.py).
    del verify
    return module_fixture(
        "et_vk_sdpa",
        "et_vk.sdpa (non-causal attention, [B,H,S,D]): q [2,4,5,6] over k, v [2,1,70,6] "
        "(one kv head broadcast, 70 keys: past one 64-wide chunk) with an additive mask [5,70] "
        "(-inf past key 60, -1.5 on a few keys); and q [1,3,4,66] over k = v [1,3,9,66] "
        "(head dim past 64) with scale 0.3 and no mask.",
        EtVkSdpa(), [ins], verify=False)


class UpdateCache(nn.Module):
    """ExecuTorch's `llama::update_cache` on two registered [1,8,2,4] cache
    buffers (the layout of export_llama's custom KV cache), written at a
    position read from an input tensor; the outputs read the caches back."""

    def __init__(self):
        super().__init__()
        import executorch.extension.llm.custom_ops.custom_ops  # noqa: F401  (registers llama ops)

        self.register_buffer("k_cache", torch.zeros(1, 8, 2, 4))
        self.register_buffer("v_cache", torch.zeros(1, 8, 2, 4))

    def forward(self, k, v, input_pos):
        start = input_pos[0].item()
        torch._check_is_size(start)
        torch._check(start + k.shape[1] <= 8)
        torch.ops.llama.update_cache(k, self.k_cache, start)
        torch.ops.llama.update_cache(v, self.v_cache, start)
        return self.k_cache + 0.5, self.v_cache * 2.0


def fx_update_cache(verify: bool = True) -> FixtureResult:
    g = seed("update_cache")
    s = Dim("s", min=1, max=4)
    calls = [(randn(g, 1, n, 2, 4), randn(g, 1, n, 2, 4), torch.tensor([pos])) for n, pos in ((3, 0), (1, 3), (4, 4))]
    # No portable CPU kernel exists for the llama op, so the portable cross-check is skipped:
    # the golden is the op's own eager implementation (extension/llm/custom_ops).
    del verify
    result = module_fixture(
        "update_cache",
        "llama::update_cache (update_cache.default) on two cache buffers [1,8,2,4] (through "
        "et_vk.prepack, updated in place): k, v float32 [1,S,2,4], S in 1..4, written at rows "
        "input_pos[0].item() (et_vk.select_as_symint).. of the caches; outputs k_cache + 0.5 and "
        "v_cache * 2. Calls in order on one loaded method: (S 3, pos 0), (S 1, pos 3), (S 4, "
        "pos 4: up to the cache end); each golden holds every earlier write.",
        UpdateCache(), calls, options={"require_dynamic_shapes": True},
        dynamic_shapes=({1: s}, {1: s}, None), dynamic_shapes_doc={"k": {"1": {"min": 1, "max": 4}},
                                                                  "v": {"1": {"min": 1, "max": 4}}},
        verify=False)
    result.stateful = True
    return result


class MhaEncoder(nn.Module):
    """Post-norm encoder block around nn.MultiheadAttention (batch_first)."""

    def __init__(self, dim: int = 16, heads: int = 2, hidden: int = 24):
        super().__init__()
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.ln1 = nn.LayerNorm(dim)
        self.ff1 = nn.Linear(dim, hidden)
        self.ff2 = nn.Linear(hidden, dim)
        self.ln2 = nn.LayerNorm(dim)

    def forward(self, x):
        a, _ = self.attn(x, x, x, need_weights=False)
        h = self.ln1(x + a)
        return self.ln2(h + self.ff2(torch.relu(self.ff1(h))))


def _init_mha_encoder(g: torch.Generator, block: MhaEncoder) -> None:
    dim = block.ln1.weight.shape[0]
    with torch.no_grad():
        block.attn.in_proj_bias.copy_(randn(g, 3 * dim, scale=0.1))
        block.attn.out_proj.bias.copy_(randn(g, dim, scale=0.1))
        for ln in (block.ln1, block.ln2):
            ln.weight.copy_(uniform(g, 0.5, 1.5, dim))
            ln.bias.copy_(randn(g, dim, scale=0.1))


def fx_mha_encoder(verify: bool = True) -> FixtureResult:
    g = seed("mha_encoder")
    model = MhaEncoder()
    _init_mha_encoder(g, model)
    ins = (randn(g, 2, 5, 16),)
    return module_fixture(
        "mha_encoder",
        "Post-norm encoder block: nn.MultiheadAttention(16, 2 heads, batch_first, "
        "non-zero biases), residual, LayerNorm, Linear(16,24) -> ReLU -> Linear(24,16), "
        "residual, LayerNorm. Input [2,5,16] (batch 2, odd sequence 5).",
        model, [ins], verify=verify)


class TinyVit(nn.Module):
    """Patch-embedding conv, class token, position embedding, one MHA encoder
    block, LayerNorm and a linear head on the class token."""

    def __init__(self, dim: int = 16, patch: int = 4, image: int = 12, n_classes: int = 5):
        super().__init__()
        self.embed = nn.Conv2d(3, dim, patch, stride=patch)
        n = (image // patch) ** 2
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(torch.zeros(1, n + 1, dim))
        self.block = MhaEncoder(dim, 2, 32)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, n_classes)

    def forward(self, img):
        p = self.embed(img).flatten(2).transpose(1, 2)
        t = torch.cat([self.cls.expand(p.shape[0], -1, -1), p], dim=1) + self.pos
        return self.head(self.norm(self.block(t))[:, 0])


def fx_tiny_vit(verify: bool = True) -> FixtureResult:
    g = seed("tiny_vit")
    model = TinyVit()
    _init_mha_encoder(g, model.block)
    with torch.no_grad():
        model.cls.copy_(randn(g, 1, 1, 16, scale=0.5))
        model.pos.copy_(randn(g, 1, 10, 16, scale=0.5))
        model.norm.weight.copy_(uniform(g, 0.5, 1.5, 16))
        model.norm.bias.copy_(randn(g, 16, scale=0.1))
    ins = (randn(g, 2, 3, 12, 12),)
    return module_fixture(
        "tiny_vit",
        "ViT-like, torchvision-free: Conv2d(3,16,4,stride 4) patch embedding of a "
        "[2,3,12,12] image (9 patches), class token + position embedding (random, "
        "non-zero), one post-norm nn.MultiheadAttention encoder block (2 heads), "
        "LayerNorm, Linear(16,5) head on the class token. Output [2,5].",
        model, [ins], verify=verify)


class CpuLeftovers(nn.Module):
    NAMES = ["log(cumsum(relu(fc(x)), -1) + 1) * 0.5", "cumsum(x, 0)"]

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(7, 7)

    def forward(self, x):
        c = torch.cumsum(torch.relu(self.fc(x)), dim=-1)   # cumsum: not partitioned
        return torch.log(c + 1.0) * 0.5, torch.cumsum(x, dim=0)  # log: not partitioned


def fx_cpu_leftovers(verify: bool = True) -> FixtureResult:
    g = seed("cpu_leftovers")
    ins = (randn(g, 3, 7),)
    return module_fixture(
        "cpu_leftovers",
        "Ops the Vulkan partitioner leaves outside: cumsum over the last dim (7, odd) "
        "and over dim 0 (aten::cumsum.out), and log (aten::log.out) between two "
        "delegates. x float32 [3,7].",
        CpuLeftovers(), [ins], verify=verify)


class ThreeDelegates(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 10)
        self.fc2 = nn.Linear(10, 10)
        self.fc3 = nn.Linear(10, 4)

    def forward(self, x):
        h = torch.cumsum(torch.relu(self.fc1(x)), dim=-1)    # delegate 0, then CPU
        h = torch.log(torch.sigmoid(self.fc2(h)))            # delegate 1, then log
        return torch.tanh(self.fc3(h))                       # delegate 2


def fx_three_delegates(verify: bool = True) -> FixtureResult:
    g = seed("three_delegates")
    ins = (randn(g, 5, 6),)
    return module_fixture(
        "three_delegates",
        "fc1 -> relu | cumsum(-1) | fc2 -> sigmoid | log | fc3 -> tanh: three Vulkan "
        "delegates split by aten::cumsum.out and aten::log.out kernel calls. x [5,6].",
        ThreeDelegates(), [ins], verify=verify)


def lower_with_config(model: nn.Module, args: tuple, config: Any = None,
                      keep: Sequence[Any] = ()) -> bytes:
    """As `lower`, with an `EdgeCompileConfig` (say, dim order skipped) and ops
    `keep` that the partitioner asks the export to keep whole (not decomposed),
    in addition to the ones VulkanPartitioner keeps itself."""
    from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner
    from executorch.exir import to_edge_transform_and_lower

    class KeepingPartitioner(VulkanPartitioner):
        def ops_to_not_decompose(self, ep):
            ops, filter_fn = super().ops_to_not_decompose(ep)
            return list(ops) + list(keep), filter_fn

    ep = torch.export.export(model, args, strict=True)
    kwargs = {} if config is None else {"compile_config": config}
    return to_edge_transform_and_lower(ep, partitioner=[KeepingPartitioner({})],
                                       **kwargs).to_executorch().buffer


def configured_fixture(name: str, description: str, model: nn.Module,
                       call_inputs: list[tuple[torch.Tensor, ...]], config: Any,
                       config_doc: dict[str, Any], keep: Sequence[Any] = (),
                       verify: bool = True) -> FixtureResult:
    """A module fixture whose `.pte` is lowered by `lower_with_config`.

    The goldens are eager outputs, checked against the portable CPU run of
    the default (decomposed) export as for every module fixture.
    """
    result = module_fixture(name, description, model, call_inputs, verify=verify)
    result.pte = lower_with_config(model.eval(), call_inputs[-1], config, keep)
    result.export["compile_config"] = config_doc
    return result


class FloatOps(nn.Module):
    NAMES = ["log10(p)", "x.unfold(3, 3, 2)", "x.unfold(1, 2, 1)",
             "grid_sample(x, grid, bilinear, border, align_corners=True)"]

    def forward(self, x, p, grid):
        return (
            torch.log10(p),
            x.unfold(3, 3, 2),
            x.unfold(1, 2, 1),
            F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=True),
        )


def fx_float_ops(verify: bool = True) -> FixtureResult:
    g = seed("float_ops")
    x = randn(g, 2, 3, 5, 7)
    p = uniform(g, 0.05, 50.0, 3, 4, 5)
    # Points past [-1, 1] exercise the border clamp.
    grid = uniform(g, -1.3, 1.3, 2, 4, 6, 2)
    return module_fixture(
        "float_ops",
        "Float ops of the Vulkan delegate: " + "; ".join(FloatOps.NAMES)
        + ". x float32 [2,3,5,7], p in [0.05,50] [3,4,5], grid [2,4,6,2] in [-1.3,1.3] "
        "(the only grid_sampler_2d configuration the partitioner delegates).",
        FloatOps(), [(x, p, grid)], verify=verify)


class KeptOps(nn.Module):
    NAMES = ["hardshrink(x, 0.5)", "max_pool2d(x, 2)", "max_pool2d(x, 3, 2, 1, ceil_mode=True)",
             "hardshrink(x, 1.25)", "ones_like(x) + x", "zeros_like(x) - x", "ones(3, 9) * y",
             "zeros(3, 9) + y", "y.permute(1, 0)"]

    def forward(self, x, y):
        return (
            F.hardshrink(x, 0.5),
            F.max_pool2d(x, 2),
            F.max_pool2d(x, 3, 2, 1, ceil_mode=True),
            F.hardshrink(x, 1.25),
            torch.ones_like(x) + x,
            torch.zeros_like(x) - x,
            torch.ones(3, 9) * y,
            torch.zeros(3, 9) + y,
            y.permute(1, 0),
        )


def fx_kept_ops(verify: bool = True) -> FixtureResult:
    g = seed("kept_ops")
    x = randn(g, 2, 3, 7, 9)
    # Keep |x| away from the shrink thresholds.
    for t in (0.5, 1.25):
        x = torch.where((x.abs() - t).abs() < 0.02, x * 1.05, x)
    y = randn(g, 3, 9)
    aten = torch.ops.aten
    keep = [aten.hardshrink.default, aten.max_pool2d.default, aten.ones_like.default,
            aten.zeros_like.default, aten.ones.default, aten.zeros.default,
            aten.permute.default]
    return configured_fixture(
        "kept_ops",
        "Delegable ops that exports decompose unless the partitioner asks to keep them "
        "whole (ops_to_not_decompose extended by these): " + "; ".join(KeptOps.NAMES)
        + ". x float32 [2,3,7,9] with |x| >= 0.02 from 0.5 and 1.25, y [3,9].",
        KeptOps(), [(x, y)], None, {"ops_to_not_decompose": [str(op) for op in keep]},
        keep=keep, verify=verify)


class GridPriors(nn.Module):
    NAMES = ["grid_priors(x, 8, 0.5)", "grid_priors(x, 4, 0.0)"]

    def forward(self, x):
        return torch.ops.et_vk.grid_priors(x, 8, 0.5), torch.ops.et_vk.grid_priors(x * 2.0, 4, 0.0)


def fx_grid_priors(verify: bool = True) -> FixtureResult:
    import executorch.backends.vulkan.custom_ops_lib  # noqa: F401  (defines et_vk.grid_priors)

    g = seed("grid_priors")
    x = randn(g, 1, 3, 5, 6)
    # No portable kernel exists for et_vk.grid_priors: the goldens are the op's eager
    # reference implementation only.
    return module_fixture(
        "grid_priors",
        "et_vk.grid_priors (YOLO-style anchor points: [(x + offset) * stride, (y + offset) "
        "* stride] per pixel, [H*W, 2]): " + "; ".join(GridPriors.NAMES)
        + ". x float32 [1,3,5,6]. Not cross-checked on the portable CPU (no kernel there).",
        GridPriors(), [(x,)], verify=False)


class Int32Ops(nn.Module):
    NAMES = ["a + b", "add(a, b, alpha=2)", "a - b", "sub(a, b, alpha=3)", "a * b",
             "div(a, b, floor)", "div(a, b, trunc)", "minimum(a, b)", "pow(a, e)",
             "clamp(a, -2, 3)", "clamp(a, min=-1)", "clamp(a, max=4)", "(a + 1) * (b - 2)"]

    def forward(self, a, b, e):
        return (
            a + b,
            torch.add(a, b, alpha=2),
            a - b,
            torch.sub(a, b, alpha=3),
            a * b,
            torch.div(a, b, rounding_mode="floor"),
            torch.div(a, b, rounding_mode="trunc"),
            torch.minimum(a, b),
            torch.pow(a, e),
            torch.clamp(a, -2, 3),
            torch.clamp(a, min=-1),
            torch.clamp(a, max=4),
            (a + 1) * (b - 2),
        )


def fx_int32_ops(verify: bool = True) -> FixtureResult:
    g = seed("int32_ops")
    a = torch.randint(-9, 10, (3, 4, 5), generator=g, dtype=torch.int32)
    b = torch.randint(1, 5, (4, 5), generator=g, dtype=torch.int32)
    b = b * torch.where(torch.rand(4, 5, generator=g) < 0.5, -1, 1).to(torch.int32)
    e = torch.randint(0, 4, (3, 4, 5), generator=g, dtype=torch.int32)
    return module_fixture(
        "int32_ops",
        "int32 arithmetic (a [3,4,5] in [-9,9], b [4,5] nonzero in +-[1,4], broadcast; "
        "e [3,4,5] in [0,3]); outputs in order: " + "; ".join(Int32Ops.NAMES) + ".",
        Int32Ops(), [(a, b, e)], verify=verify)


class Casts(nn.Module):
    NAMES = ["x.half()", "x.int()", "x.bool()", "h.float()", "h.int()", "h.bool()",
             "i.float()", "i.half()", "i.bool()", "m.float()", "m.half()", "m.int()"]

    def forward(self, x, h, i, m):
        return (x.half(), x.int(), x.bool(), h.float(), h.int(), h.bool(),
                i.float(), i.half(), i.bool(), m.float(), m.half(), m.int())


def _cast_inputs(g: torch.Generator) -> tuple[torch.Tensor, ...]:
    # Floats with some exact zeros and integral values, kept 0.05 away from the
    # other integers so that truncation is unambiguous; an odd element count
    # tests the half-word tail of float16. (Casts from uint8 are left out: the
    # partitioner leaves them on the CPU.)
    x = uniform(g, -20.0, 20.0, 3, 5, 7)
    frac = x - torch.trunc(x)
    x = torch.where(frac.abs() < 0.05, torch.trunc(x), x)
    x[0, 0, :3] = torch.tensor([0.0, -0.0, 3.0])
    h = x.flip(0).half()
    i = torch.randint(-300, 300, (3, 5, 7), generator=g, dtype=torch.int32)
    i[0, 0, 0] = 0
    m = torch.rand(3, 5, 7, generator=g) < 0.5
    return x, h, i, m


def fx_casts(verify: bool = True) -> FixtureResult:
    g = seed("casts")
    return module_fixture(
        "casts",
        "dim_order_ops._to_dim_order_copy between float32 x, float16 h, int32 i and bool m "
        "(each [3,5,7]); outputs in order: " + "; ".join(Casts.NAMES)
        + ". x in [-20,20] with zeros and integral values, else >= 0.05 from an integer.",
        Casts(), [_cast_inputs(g)], verify=verify)


class ToCopy(nn.Module):
    NAMES = ["x.half()", "x.int()", "i.float()", "m.float()", "h.float()", "x.bool()"]

    def forward(self, x, h, i, m):
        return x.half(), x.int(), i.float(), m.float(), h.float(), x.bool()


def fx_to_copy(verify: bool = True) -> FixtureResult:
    from executorch.exir import EdgeCompileConfig

    g = seed("to_copy")
    return configured_fixture(
        "to_copy",
        "aten._to_copy.default (exported with EdgeCompileConfig(_skip_dim_order=True), so "
        "casts are not dim-order copies); inputs as the casts fixture; outputs in order: "
        + "; ".join(ToCopy.NAMES) + ".",
        ToCopy(), [_cast_inputs(g)], EdgeCompileConfig(_skip_dim_order=True),
        {"_skip_dim_order": True}, verify=verify)


FIXTURES: dict[str, Callable[..., FixtureResult]] = {
    "one_op": fx_one_op,
    "worked_example": fx_worked_example,
    "mlp": fx_mlp,
    "convnet": fx_convnet,
    "transformer_block": fx_transformer_block,
    "unary": fx_unary,
    "binary": fx_binary,
    "compare_logic": fx_compare_logic,
    "shape_ops": fx_shape_ops,
    "pad_cat_repeat": fx_pad_cat_repeat,
    "creation_ops": fx_creation_ops,
    "reductions": fx_reductions,
    "matmul": fx_matmul,
    "indexing": fx_indexing,
    "index_wrap": fx_index_wrap,
    "dynamic_seq": fx_dynamic_seq,
    "fp16_mlp": fx_fp16_mlp,
    "partial_delegate": fx_partial_delegate,
    "conv_more": fx_conv_more,
    "dynamic_symint": fx_dynamic_symint,
    "convnet_fp16": fx_convnet_fp16,
    "rope_hf": fx_rope_hf,
    "rope_interleaved": fx_rope_interleaved,
    "et_vk_sdpa": fx_et_vk_sdpa,
    "update_cache": fx_update_cache,
    "mha_encoder": fx_mha_encoder,
    "tiny_vit": fx_tiny_vit,
    "cpu_leftovers": fx_cpu_leftovers,
    "three_delegates": fx_three_delegates,
    "float_ops": fx_float_ops,
    "kept_ops": fx_kept_ops,
    "grid_priors": fx_grid_priors,
    "int32_ops": fx_int32_ops,
    "casts": fx_casts,
    "to_copy": fx_to_copy,
}
