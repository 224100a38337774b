"""PyTorch peer for etwgpu's vision numbers: images/s of a CNN and a ViT.

Runs on the lent GPU machine (torch and numpy only: no executorch, no timm)
in the same call as `etwgpu bench`, on the modules `tools/export/vision.py`
exported: `tools/export/vision_nets.py` (ResNet-18-class CNN, ViT-Tiny/16;
224x224, 1000 classes, random weights from the same seeds), imported from
there, so both sides run the same network.

Cells: model x dtype x mode x batch. dtype `fp32` is what the `.pte`
programs compute; `bf16` (weights and activations bfloat16, the fp32 image
cast on the device, logits cast back) is what a PyTorch user would run.
PyTorch's own defaults are kept and recorded (cuDNN convolutions may use
TF32 in fp32; matmuls do not). Modes: `eager`, and `compile` =
`torch.compile(mode="reduce-overhead", fullgraph=True, dynamic=False)`
(Inductor plus CUDA graphs; one compilation per model and dtype, recompiled
per batch; its first call's time, compilation included, is `first_call_s`).

Each cell: untimed calls for at least --warmup-s seconds and --warmup calls
(so the GPU clocks are up), then two timings of --repeats calls each, every
call between device synchronizes, the median reported as images/s:
- `device`: the image batch already on the GPU, logits left there;
- `host` (the table's number): the call copies the float32 batch from host
  memory and the logits back, as `etwgpu bench` times a whole call.
Also per cell: peak `torch.cuda.max_memory_allocated` (reset before the
cell; weights included) and the largest |logit - eager fp32 logit| over the
largest |eager fp32 logit| (a check that the compiled or bf16 module computes
the same network).

A cell that raises is reported as "error: ..." and the run goes on; cells
that would start after --budget-s seconds are reported as skipped (a started
cell runs to its end). The JSON is rewritten after every cell.

Usage:
  python3 tools/device/vision_peers.py --json OUT.json
  python3 tools/device/vision_peers.py --device cpu --tiny --modes eager --repeats 3   # a check on the CPU
"""
import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "export"))
sys.dont_write_bytecode = True

import vision_nets  # noqa: E402

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def seed_for(name):
    """`fixtures_nn.seed_for` of `vision.py`'s export (crc32 of the name),
    without importing executorch."""
    import zlib

    return zlib.crc32(f"vision_{name}".encode()) & 0x7FFFFFFF


def short_error(e):
    lines = str(e).strip().splitlines()
    return f"error: {type(e).__name__}: {lines[0][:160] if lines else ''}".rstrip(": ")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=",".join(vision_nets.NAMES))
    p.add_argument("--batches", default="1,8")
    p.add_argument("--dtypes", default="fp32,bf16")
    p.add_argument("--modes", default="eager,compile", help="comma list of eager, compile")
    p.add_argument("--device", default="cuda")
    p.add_argument("--res", type=int, default=224)
    p.add_argument("--tiny", action="store_true", help="narrow versions of the networks (CPU checks)")
    p.add_argument("--warmup", type=int, default=3, help="untimed calls per cell, at least")
    p.add_argument("--warmup-s", type=float, default=1.0, help="untimed seconds per cell, at least")
    p.add_argument("--repeats", type=int, default=30, help="timed calls per timing, median reported (>= 3)")
    p.add_argument("--budget-s", type=float, default=420.0, help="no cell starts after this many seconds")
    p.add_argument("--json", help="write all results and raw timings here")
    args = p.parse_args(argv)
    args.models = args.models.split(",")
    args.batches = [int(b) for b in args.batches.split(",")]
    args.dtypes = args.dtypes.split(",")
    args.modes = args.modes.split(",")
    for what, got, known in (("--models", args.models, vision_nets.NAMES), ("--dtypes", args.dtypes, DTYPES),
                             ("--modes", args.modes, ("eager", "compile"))):
        if not set(got) <= set(known):
            p.error(f"{what}: {got} not all in {sorted(known)}")
    if args.warmup < 1 or args.repeats < 3 or min(args.batches) < 1:
        p.error("need --warmup >= 1, --repeats >= 3, batches >= 1")
    return args


class Bench:
    def __init__(self, args):
        self.args, self.started = args, time.perf_counter()
        self.device = torch.device(args.device)
        self.cuda = self.device.type == "cuda"
        self.results = {
            "device": torch.cuda.get_device_name(self.device) if self.cuda else str(self.device),
            "torch": torch.__version__, "args": vars(args),
            "defaults": {"cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
                         "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
                         "cudnn_benchmark": torch.backends.cudnn.benchmark,
                         "float32_matmul_precision": torch.get_float32_matmul_precision()},
            "models": {}, "cells": [],
        }

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def save(self):
        if self.args.json:
            tmp = self.args.json + ".tmp"
            with open(tmp, "w") as f:
                json.dump(self.results, f, indent=1)
            os.replace(tmp, self.args.json)

    def images(self, batch):
        g = torch.Generator().manual_seed(batch)
        return torch.randn(batch, 3, self.args.res, self.args.res, generator=g)

    def run(self):
        for name in self.args.models:
            base = vision_nets.build(name, seed_for(name), image=self.args.res, tiny=self.args.tiny)
            self.results["models"][name] = {"params": sum(p.numel() for p in base.parameters()),
                                            "seed": seed_for(name), "tiny": self.args.tiny}
            with torch.no_grad():
                reference = {b: base(self.images(b)) for b in self.args.batches}
            for dtype in self.args.dtypes:
                for mode in self.args.modes:
                    self.run_group(name, base, dtype, mode, reference)
        self.save()

    def run_group(self, name, base, dtype, mode, reference):
        """One model, dtype and mode: its batches, sharing one compiled function."""
        model = vision_nets.build(name, seed_for(name), image=self.args.res, tiny=self.args.tiny)
        model.load_state_dict(base.state_dict())
        model = model.to(self.device, DTYPES[dtype]).requires_grad_(False)

        def forward(x):
            return model(x.to(DTYPES[dtype])).float()

        fn = forward
        if mode == "compile":
            fn = torch.compile(forward, mode="reduce-overhead", fullgraph=True, dynamic=False)
        for batch in self.args.batches:
            cell = {"model": name, "dtype": dtype, "mode": mode, "batch": batch}
            self.results["cells"].append(cell)
            if time.perf_counter() - self.started > self.args.budget_s:
                cell["status"] = f"skipped: --budget-s {self.args.budget_s:g} exceeded"
            else:
                try:
                    with torch.no_grad():
                        self.cell(cell, fn, mode == "compile", reference[batch])
                    cell["status"] = "ok"
                except Exception as e:  # reported per cell; the run goes on
                    cell["status"] = short_error(e)
            rate = f" {cell['images_per_s']:9.1f} img/s (input on the device: {cell['device']['images_per_s']:9.1f})" \
                if "images_per_s" in cell else ""
            print(f"  {name:9} {dtype} {mode:7} batch {batch}: {cell['status']}{rate}", flush=True)
            self.save()
        if mode == "compile":
            torch._dynamo.reset()  # frees the CUDA graphs and their memory pools
        del model
        if self.cuda:
            torch.cuda.empty_cache()

    def cell(self, cell, fn, compiled, reference):
        host = self.images(cell["batch"])
        x = host.to(self.device)
        if self.cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(self.device)

        def on_device():
            if compiled:
                torch.compiler.cudagraph_mark_step_begin()
            return fn(x)

        def from_host():
            if compiled:
                torch.compiler.cudagraph_mark_step_begin()
            return fn(host.to(self.device)).cpu()

        def timed(call):
            self.sync()
            t0 = time.perf_counter()
            call()
            self.sync()
            return time.perf_counter() - t0

        cell["first_call_s"] = timed(on_device)
        start, calls = time.perf_counter(), 1
        while calls < self.args.warmup or time.perf_counter() - start < self.args.warmup_s:
            on_device()
            from_host()
            calls += 1
        self.sync()
        cell["warmup_calls"], cell["warmup_s"] = calls, time.perf_counter() - start
        out = from_host()
        scale = float(reference.abs().max())
        cell["max_abs_diff_over_max_logit"] = float((out - reference).abs().max()) / scale
        for key, call in (("device", on_device), ("host", from_host)):
            times = [timed(call) for _ in range(self.args.repeats)]
            median = statistics.median(times)
            cell[key] = {"times_s": times, "median_s": median, "images_per_s": cell["batch"] / median}
        cell["images_per_s"] = cell["host"]["images_per_s"]
        cell["peak_memory_bytes"] = torch.cuda.max_memory_allocated(self.device) if self.cuda else None


def table(results):
    """Markdown: one row per model, dtype and batch; images/s per mode."""
    modes = list(dict.fromkeys(c["mode"] for c in results["cells"]))
    cells = {(c["model"], c["dtype"], c["batch"], c["mode"]): c for c in results["cells"]}
    head = "| model | dtype | batch | " + "".join(f"{m} img/s | {m} on GPU | " for m in modes) + "peak memory |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for key in dict.fromkeys(k[:3] for k in cells):
        row = f"| {key[0]} | {key[1]} | {key[2]} | "
        peak = []
        for m in modes:
            c = cells.get((*key, m), {})
            ok = c.get("status") == "ok"
            row += (f"{c['images_per_s']:,.1f} | {c['device']['images_per_s']:,.1f} | " if ok
                    else f"{c.get('status', '-')} | - | ")
            if ok and c.get("peak_memory_bytes"):
                peak.append(c["peak_memory_bytes"])
        lines.append(row + (f"{max(peak) / 2**20:,.0f} MiB |" if peak else "- |"))
    return "\n".join(lines)


def main(argv=None):
    args = parse_args(argv)
    bench = Bench(args)
    print(f"{bench.results['device']}, torch {torch.__version__}, {bench.results['defaults']}", flush=True)
    bench.run()
    print(table(bench.results))
    bad = [c for c in bench.results["cells"] if c.get("status", "").startswith("error")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
