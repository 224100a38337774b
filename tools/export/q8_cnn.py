#!/usr/bin/env python3
"""Real-shape int8 CNNs for end-to-end checks and benches (not committed).

    python3 tools/export/q8_cnn.py [--out DIR] [--res 224] [--check ETWGPU]

Writes `DIR/<name>/` (default `artifacts/q8_cnn/`) as `fixture_io` does
(model.pte, call0.in0.npy, call0.out0.npy, manifest.json) for:

- `mobilenet_q8` / `mobilenet_fp32`: a MobileNetV2-class network (random
  weights, the real widths and strides: 17 inverted-residual blocks, ReLU6,
  1280-wide head, 1000 classes) at `--res`x`--res`;
- `resnet_q8` / `resnet_fp32`: a ResNet-18-class network (basic blocks,
  64..512 channels).

`_q8` is quantized with the PT2E static-int8 flow of `fixtures_q8.py`
(XNNPACKQuantizer symmetric per-channel, VulkanPartitioner), its golden the
`convert_pt2e` module run eagerly; `_fp32` is the float network lowered
as is, its golden eager fp32. With `--check PATH_TO_ETWGPU`, every program
is run with `etwgpu run` and compared: for `_q8`, the share of logits more
than one output quantization step from the reference and the largest
difference in steps; for `_fp32`, the largest absolute difference.
Time both with `etwgpu bench DIR/<name>/model.pte`. `--xfer .xfer` lays
the programs out for the `int8` part of `tools/device/run.sh`: each as
`.xfer/int8-K/<name>.pte`, K numbering pieces of at most 45 MiB, one device
call each (see that script).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.dont_write_bytecode = True


def global_pool(x):
    """Global average pooling as one `avg_pool2d` (the partitioner keeps a 4-D
    `mean` over H, W on the CPU)."""
    import torch.nn.functional as F

    return F.avg_pool2d(x, x.shape[-2:])


def mobilenet_v2(num_classes: int = 1000):
    import torch
    import torch.nn as nn

    def conv_bn(cin, cout, k, s, groups=1, act=True):
        layers = [nn.Conv2d(cin, cout, k, s, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
        if act:
            layers.append(nn.ReLU6())
        return layers

    class Inverted(nn.Module):
        def __init__(self, cin, cout, s, t):
            super().__init__()
            hidden = cin * t
            layers = [] if t == 1 else conv_bn(cin, hidden, 1, 1)
            layers += conv_bn(hidden, hidden, 3, s, groups=hidden)
            layers += conv_bn(hidden, cout, 1, 1, act=False)
            self.body = nn.Sequential(*layers)
            self.skip = s == 1 and cin == cout

        def forward(self, x):
            return x + self.body(x) if self.skip else self.body(x)

    layers = conv_bn(3, 32, 3, 2)
    cin = 32
    for t, c, n, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                       (6, 160, 3, 2), (6, 320, 1, 1)]:
        for i in range(n):
            layers.append(Inverted(cin, c, s if i == 0 else 1, t))
            cin = c
    layers += conv_bn(cin, 1280, 1, 1)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(*layers)
            self.fc = nn.Linear(1280, num_classes)

        def forward(self, x):
            return self.fc(torch.flatten(global_pool(self.features(x)), 1))

    return Net()


def resnet18(num_classes: int = 1000, width: int = 64):
    """ResNet-18's topology; `width` the stem's channels (64 as published),
    doubled at each of the three downsampling stages."""
    import torch
    import torch.nn as nn

    class Basic(nn.Module):
        def __init__(self, cin, cout, s):
            super().__init__()
            self.c1 = nn.Conv2d(cin, cout, 3, s, 1, bias=False)
            self.b1 = nn.BatchNorm2d(cout)
            self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.b2 = nn.BatchNorm2d(cout)
            self.down = None
            if s != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, s, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            y = self.b2(self.c2(torch.relu(self.b1(self.c1(x)))))
            return torch.relu(y + (x if self.down is None else self.down(x)))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width),
                                      nn.ReLU(), nn.MaxPool2d(3, 2, 1))
            blocks, cin = [], width
            for c, s in [(1, 1), (1, 1), (2, 2), (2, 1), (4, 2), (4, 1), (8, 2), (8, 1)]:
                blocks.append(Basic(cin, c * width, s))
                cin = c * width
            self.blocks = nn.Sequential(*blocks)
            self.fc = nn.Linear(cin, num_classes)

        def forward(self, x):
            return self.fc(torch.flatten(global_pool(self.blocks(self.stem(x))), 1))

    return Net()


def randomize_bn(model, g) -> None:
    import torch

    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            n = m.num_features
            with torch.no_grad():
                m.running_mean.copy_(torch.randn(n, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(n, generator=g) * 0.5 + 0.75)
                m.weight.copy_(torch.rand(n, generator=g) * 0.5 + 0.75)
                m.bias.copy_(torch.randn(n, generator=g) * 0.1)


def export_pair(name: str, model, res: int, out: Path) -> None:
    import torch

    import fixture_io
    import fixtures_nn
    import fixtures_q8

    g = fixtures_nn.seed(name)
    randomize_bn(model, g)
    model = model.eval()
    calibration = [(torch.randn(1, 3, res, res, generator=g),) for _ in range(4)]
    ins = (torch.randn(1, 3, res, res, generator=g),)
    converted = fixtures_q8.quantize(model, calibration, ins)
    step = fixtures_q8.output_step(converted)
    pte_q8 = fixtures_q8.lower_quantized(converted, ins, {})
    with torch.no_grad():
        golden_q8 = converted(ins[0].clone())
        golden_fp32 = model(ins[0].clone())
    pte_fp32 = fixtures_nn.lower(model, ins)
    for suffix, pte, golden, desc in [
        ("q8", pte_q8, golden_q8, f"PT2E static int8 {name} at {res}x{res}; output step {step:.6g}"),
        ("fp32", pte_fp32, golden_fp32, f"float32 {name} at {res}x{res}"),
    ]:
        result = fixture_io.FixtureResult(
            name=f"{name}_{suffix}", description=desc,
            export={"api": fixtures_q8.EXPORT_API if suffix == "q8" else fixtures_nn.EXPORT_API,
                    "output_step": step if suffix == "q8" else None, "res": res},
            pte=pte, calls=[fixture_io.Call(inputs=list(ins), outputs=[golden])])
        fixture_io.write_fixture(result, out)
        print(f"[{name}_{suffix}] {len(pte) / 2**20:.2f} MiB", flush=True)


def check(out: Path, etwgpu: str) -> int:
    import json

    import numpy as np

    bad = 0
    for d in sorted(p for p in out.iterdir() if (p / "manifest.json").exists()):
        manifest = json.loads((d / "manifest.json").read_text())
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([etwgpu, "run", str(d / "model.pte"), "--input", str(d / "call0.in0.npy"),
                            "--output-dir", tmp], check=True, stdout=subprocess.DEVNULL)
            got = np.load(next(Path(tmp).glob("*.npy")))
        want = np.load(d / "call0.out0.npy")
        diff = np.abs(got.astype(np.float64) - want)
        step = manifest["export"].get("output_step")
        if step:
            steps = diff / step
            off = float((steps > 1.001).mean())
            print(f"{d.name}: max {steps.max():.2f} steps; {100 * off:.2f}% of {diff.size} logits "
                  f"more than one step off; {100 * float((steps > 0.001).mean()):.2f}% off at all")
            bad += off > 0.0
        else:
            print(f"{d.name}: max |diff| {diff.max():.3g} (logits up to {np.abs(want).max():.3g})")
    return 1 if bad else 0


def lay_out_xfer(out: Path, xfer: Path, budget: int = 45 * 2**20) -> None:
    """Copies `out/<name>/model.pte` to `xfer/int8-K/<name>.pte`, filling
    pieces of at most `budget` bytes, largest programs first."""
    import shutil

    programs = sorted((p / "model.pte" for p in out.iterdir() if (p / "model.pte").exists()),
                      key=lambda p: -p.stat().st_size)
    pieces: list[list[Path]] = []
    for pte in programs:
        piece = next((q for q in pieces if sum(p.stat().st_size for p in q) + pte.stat().st_size <= budget),
                     None)
        if piece is None:
            pieces.append([pte])
        else:
            piece.append(pte)
    for old in xfer.glob("int8-*"):
        shutil.rmtree(old)
    for k, piece in enumerate(pieces, 1):
        d = xfer / f"int8-{k}"
        d.mkdir(parents=True)
        for pte in piece:
            shutil.copyfile(pte, d / f"{pte.parent.name}.pte")
        print(f"{d}: " + ", ".join(f"{p.parent.name} {p.stat().st_size / 2**20:.1f} MiB" for p in piece))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE.parents[1] / "artifacts" / "q8_cnn")
    parser.add_argument("--res", type=int, default=224)
    parser.add_argument("--only", choices=["mobilenet", "resnet"], action="append")
    parser.add_argument("--skip-export", action="store_true")
    parser.add_argument("--check", metavar="ETWGPU", help="run each program with this etwgpu binary")
    parser.add_argument("--xfer", type=Path, metavar="DIR",
                        help="lay the programs out as DIR/int8-K/<name>.pte for tools/device/run.sh int8")
    args = parser.parse_args()
    if not args.skip_export:
        import logging
        import warnings

        logging.disable(logging.WARNING)
        warnings.filterwarnings("ignore")
        nets = {"mobilenet": mobilenet_v2, "resnet": resnet18}
        for name in args.only or list(nets):
            export_pair(name, nets[name](), args.res, args.out)
    if args.xfer:
        lay_out_xfer(args.out, args.xfer)
    return check(args.out, args.check) if args.check else 0


if __name__ == "__main__":
    sys.exit(main())
