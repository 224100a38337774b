#!/usr/bin/env python3
"""Float32 vision programs for the H200 bench against PyTorch (not committed).

    python3 tools/export/vision.py [--out DIR] [--only NAME] [--check ETWGPU] [--xfer DIR]

Writes `DIR/<name>/` (default `artifacts/vision/`) for the networks of
`vision_nets.py` (`resnet18`: ResNet-18-class CNN; `vit_tiny`: ViT-Tiny/16),
random weights from a fixed seed, 224x224 images, 1000 classes:

- `model.pte`: one program with two methods of static shapes, `forward`
  (batch 1) and `forward_b8` (batch 8), both lowered whole by the
  `VulkanPartitioner`. The partitioner names every constant by the SHA-256
  of its bytes, so the two methods share one copy of the weights (the file
  is the size of one method's).
- `b<B>.in0.npy` / `b<B>.out0.npy`: the input image batch and the eager
  fp32 logits of the method of batch B. Image 0 of the batch-8 input is the
  batch-1 image, so row 0 of both goldens must agree too.
- `manifest.json`: as `fixture_io` writes it (`expected` from
  `pte_inspect.py`), with `methods` in place of `calls`.

Upstream's partitioner delegates a 2-D convolution only at batch 1 (its
C++ Vulkan kernel's limit), so at batch 8 every conv would be left to
the CPU portable kernels between 17 delegates (ResNet) or before the
delegate (ViT's patch conv). etwgpu's conv kernel takes any batch, so the
batch-8 method is lowered with that one rule lifted (`conv_any_batch`);
nothing else differs and the module is the same.

`--check PATH_TO_ETWGPU` runs each method with `etwgpu run` on its input
and compares with the golden: it passes when max |etwgpu - eager| <=
`REL_TOL` * max |eager| (fp32, different summation order over ~20 chained
layers). `--xfer .xfer` lays the programs out for the `vision` part of
`tools/device/run.sh`: the programs, each network's batch-8 input and
both goldens (`<name>.pte`, `<name>.b8.in0.npy`, ...) and `vision.sha256`
in `.xfer/vision-K/`, pieces of at most 45 MiB, one device call each.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.dont_write_bytecode = True

BATCHES = (1, 8)
REL_TOL = 1e-3
PIECE_BYTES = 45 * 2**20
# Carried to the device with the programs; the batch-1 image is image 0 of
# the batch-8 input, cut out there.
XFER_GOLDENS = ("b8.in0.npy", "b1.out0.npy", "b8.out0.npy")
EXPORT_API = ("torch.export.export(strict=True) per batch -> executorch.exir.to_edge_transform_and_lower("
              "{method: program}, VulkanPartitioner({})) -> to_executorch")


def method_name(batch: int) -> str:
    return "forward" if batch == 1 else f"forward_b{batch}"


@contextlib.contextmanager
def conv_any_batch():
    """Lets the VulkanPartitioner take 2-D convolutions of any batch (its
    rule delegates batch 1 only); 1-D convolutions keep upstream's rule."""
    from executorch.backends.vulkan import op_registry
    from executorch.exir.dialects._ops import ops as exir_ops

    features = op_registry.vulkan_supported_ops[exir_ops.edge.aten.convolution.default]
    upstream = features.are_node_inputs_supported_fn

    def check(node):
        return node.args[0].meta["val"].dim() == 4 or upstream(node)

    features.are_node_inputs_supported_fn = check
    try:
        yield
    finally:
        features.are_node_inputs_supported_fn = upstream


def export(name: str, out: Path, res: int = 224) -> None:
    import numpy as np
    import torch
    from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner
    from executorch.exir import to_edge_transform_and_lower

    import fixtures_nn
    import pte_inspect
    import vision_nets

    seed = fixtures_nn.seed_for(f"vision_{name}")
    model = vision_nets.build(name, seed, image=res)
    g = torch.Generator().manual_seed(seed + 2)
    image0 = torch.randn(1, 3, res, res, generator=g)
    inputs = {1: image0, 8: torch.cat([image0, torch.randn(7, 3, res, res, generator=g)])}
    start = time.time()
    programs = {method_name(b): torch.export.export(model, (inputs[b],), strict=True) for b in BATCHES}
    with conv_any_batch():
        pte = to_edge_transform_and_lower(programs, partitioner=[VulkanPartitioner({})]).to_executorch().buffer
    print(f"[{name}] exported {len(pte) / 2**20:.2f} MiB in {time.time() - start:.0f} s", flush=True)
    with torch.no_grad():
        goldens = {b: model(inputs[b].clone()) for b in BATCHES}
    d = out / name
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    (d / "model.pte").write_bytes(pte)
    for b in BATCHES:
        np.save(d / f"b{b}.in0.npy", inputs[b].numpy(), allow_pickle=False)
        np.save(d / f"b{b}.out0.npy", goldens[b].numpy(), allow_pickle=False)
    params = sum(p.numel() for p in model.parameters())
    manifest = {
        "name": name,
        "description": f"{name} (tools/export/vision_nets.py): float32, {params / 1e6:.2f}M parameters, "
                       f"random weights (seed {seed}), {res}x{res} images, 1000 classes; methods "
                       + ", ".join(f"{method_name(b)} (batch {b})" for b in BATCHES),
        "export": {"api": EXPORT_API, "conv_any_batch": [method_name(b) for b in BATCHES if b != 1], "res": res},
        "methods": {method_name(b): {"batch": b, "inputs": [f"b{b}.in0.npy"], "outputs": [f"b{b}.out0.npy"]}
                    for b in BATCHES},
        "tolerance": {"float32": {"max_abs_over_max_golden": REL_TOL}},
        "expected": pte_inspect.summarize_pte(pte),
    }
    (d / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")


def check(out: Path, etwgpu: str) -> int:
    import numpy as np

    bad = 0
    for d in sorted(p for p in out.iterdir() if (p / "manifest.json").exists()):
        manifest = json.loads((d / "manifest.json").read_text())
        rows0 = {}
        for method, m in manifest["methods"].items():
            with tempfile.TemporaryDirectory() as tmp:
                start = time.time()
                subprocess.run([etwgpu, "run", str(d / "model.pte"), "--method", method,
                                "--input", str(d / m["inputs"][0]), "--output-dir", tmp],
                               check=True, stdout=subprocess.DEVNULL)
                took = time.time() - start
                got = np.load(Path(tmp) / "call0.out0.npy")
            want = np.load(d / m["outputs"][0])
            if got.shape != want.shape:
                print(f"{d.name} {method}: shape {got.shape}, golden {want.shape}: FAIL")
                bad += 1
                continue
            rows0[method] = want[0]
            err = float(np.abs(got.astype(np.float64) - want).max())
            scale = float(np.abs(want).max())
            ok = err <= REL_TOL * scale
            bad += not ok
            print(f"{d.name} {method} (batch {m['batch']}): max |diff| {err:.3g}, logits up to {scale:.3g}, "
                  f"ratio {err / scale:.2e} (limit {REL_TOL:g}): {'ok' if ok else 'FAIL'}; {took:.0f} s")
        first = list(rows0.values())
        if len(first) > 1 and not all(np.allclose(r, first[0], rtol=1e-4, atol=1e-4 * np.abs(first[0]).max())
                                      for r in first[1:]):
            print(f"{d.name}: eager row 0 differs between batch sizes")
            bad += 1
    return 1 if bad else 0


def lay_out_xfer(out: Path, xfer: Path, budget: int = PIECE_BYTES) -> None:
    """`out/<name>/model.pte` as `xfer/vision-K/<name>.pte`, with the goldens
    `XFER_GOLDENS` as `<name>.<file>`, in pieces of at most `budget` bytes
    (largest first; a file larger than a piece is cut into `<file>.partNN`),
    `vision.sha256` (sha256sum format) in the last."""
    files = []
    for d in sorted(p.parent for p in out.glob("*/model.pte")):
        files.append((f"{d.name}.pte", (d / "model.pte").read_bytes()))
        files += [(f"{d.name}.{f}", (d / f).read_bytes()) for f in XFER_GOLDENS]
    files.sort(key=lambda f: -len(f[1]))
    chunks: list[tuple[str, bytes]] = []
    for fname, data in files:
        if len(data) <= budget:
            chunks.append((fname, data))
        else:
            chunks += [(f"{fname}.part{i:02d}", data[o:o + budget])
                       for i, o in enumerate(range(0, len(data), budget))]
    pieces: list[list[tuple[str, bytes]]] = []
    for c in chunks:
        piece = next((p for p in pieces if sum(len(x[1]) for x in p) + len(c[1]) <= budget), None)
        if piece is None:
            pieces.append([c])
        else:
            piece.append(c)
    for old in xfer.glob("vision-*"):
        shutil.rmtree(old)
    for k, piece in enumerate(pieces, 1):
        d = xfer / f"vision-{k}"
        d.mkdir(parents=True)
        for fname, data in piece:
            (d / fname).write_bytes(data)
        print(f"{d}: " + ", ".join(f"{f} {len(b) / 2**20:.1f} MiB" for f, b in piece))
    sums = "".join(f"{hashlib.sha256(data).hexdigest()}  {fname}\n" for fname, data in files)
    (xfer / f"vision-{len(pieces)}" / "vision.sha256").write_text(sums)


def main() -> int:
    import vision_nets

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE.parents[1] / "artifacts" / "vision")
    parser.add_argument("--res", type=int, default=224)
    parser.add_argument("--only", choices=vision_nets.NAMES, action="append")
    parser.add_argument("--skip-export", action="store_true")
    parser.add_argument("--check", metavar="ETWGPU", help="run each method with this etwgpu binary")
    parser.add_argument("--xfer", type=Path, metavar="DIR",
                        help="lay the programs out as DIR/vision-K/ for tools/device/run.sh vision")
    args = parser.parse_args()
    if not args.skip_export:
        import logging
        import warnings

        logging.disable(logging.WARNING)
        warnings.filterwarnings("ignore")
        for name in args.only or vision_nets.NAMES:
            export(name, args.out, args.res)
    if args.xfer:
        lay_out_xfer(args.out, args.xfer)
    return check(args.out, args.check) if args.check else 0


if __name__ == "__main__":
    sys.exit(main())
