"""The vision table of `tools/device/run.sh vision` / `vision-peers`: etwgpu next to PyTorch.

    python3 tools/device/vision_report.py table DIR [DIR ...]
    python3 tools/device/vision_report.py check --got OUT.npy --want GOLDEN.npy --model M --method F --precision P
    etwgpu bench ... -o json | python3 tools/device/vision_report.py tag --model M --batch B --precision P

`table` reads, from every DIR (later ones win):
- `vision_etwgpu.jsonl`: one `etwgpu bench -o json` object per line, with
  `model` (network), `batch` and `precision` (`f32`, or `f16`: run with
  `ETWGPU_PRECISION=f16`, float32 matrix products on f16 operands) added;
- `vision_check.jsonl`: `check` lines (etwgpu's logits against the eager
  fp32 goldens of `tools/export/vision.py`);
- `vision_peers.json`: `vision_peers.py --json`;
and prints Markdown: per network and batch, an fp32 row (etwgpu f32 next to
PyTorch fp32) and an f16/bf16 row (etwgpu f16 next to PyTorch bf16), in
images/s. etwgpu's number is batch / the median latency of a whole `run`
call (input upload, submit, wait, read-back) over the samples after the
first second of the bench (the GPU clocks up meanwhile; `etwgpu bench`
warms up with one call). PyTorch's columns time the same work (the batch
copied from host memory, the logits back); `compile on GPU` leaves the
batch and the logits on the device. `etwgpu / compile` divides etwgpu's
images/s by torch.compile's.

`tag` adds `model_name`, `batch` and `precision` to the bench's JSON object
read from stdin and prints it as one line (and its p50 on stderr).

`check` prints one JSON line: max |got - want| over max |want| and whether
it is within `LIMIT` (the fp32 limit of `vision.py`; `f16` rows are
reported, not judged).
"""
import argparse
import json
import os
import statistics
import sys

LIMIT = 1e-3


def steady_median_ms(samples, skip_ms=1000.0, keep_at_least=10):
    """Median of the samples after the first `skip_ms` of them (the last half
    when fewer than `keep_at_least` remain)."""
    total, start = 0.0, len(samples)
    for i, s in enumerate(samples):
        if total >= skip_ms:
            start = i
            break
        total += s
    rest = samples[start:]
    if len(rest) < keep_at_least:
        rest = samples[len(samples) // 2:]
    return statistics.median(rest)


def load_dirs(dirs):
    benches, checks, peers = {}, {}, {}
    for d in dirs:
        path = os.path.join(d, "vision_etwgpu.jsonl")
        if os.path.exists(path):
            for line in open(path):
                if line.strip():
                    b = json.loads(line)
                    benches[(b["model_name"], b["batch"], b["precision"])] = b
        path = os.path.join(d, "vision_check.jsonl")
        if os.path.exists(path):
            for line in open(path):
                if line.strip():
                    c = json.loads(line)
                    checks[(c["model"], c["batch"], c["precision"])] = c
        path = os.path.join(d, "vision_peers.json")
        if os.path.exists(path):
            with open(path) as f:
                r = json.load(f)
            for c in r.get("cells", []):
                if c.get("status") == "ok":
                    peers[(c["model"], c["batch"], c["dtype"], c["mode"])] = c
    return benches, checks, peers


def fmt(x, digits=1):
    return "-" if x is None else f"{x:,.{digits}f}"


def table(dirs):
    benches, checks, peers = load_dirs(dirs)
    keys = sorted({k[:2] for k in benches} | {k[:2] for k in peers})
    lines = ["| network | batch | precision | etwgpu img/s | etwgpu error | torch eager | torch.compile | "
             "etwgpu / compile | compile on GPU |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|"]
    for model, batch in keys:
        for ours, theirs in (("f32", "fp32"), ("f16", "bf16")):
            b = benches.get((model, batch, ours))
            mine = batch * 1e3 / steady_median_ms(b["samples_ms"]) if b else None
            c = checks.get((model, batch, ours))
            err = "-" if not c else c["error"] if "error" in c else \
                f"{c['max_abs_diff_over_max_logit']:.1e}" + (" FAIL" if c["ok"] is False else "")
            eager = peers.get((model, batch, theirs, "eager"))
            comp = peers.get((model, batch, theirs, "compile"))
            if mine is None and eager is None and comp is None:
                continue
            ratio = mine / comp["images_per_s"] if mine and comp else None
            label = "fp32" if ours == "f32" else "etwgpu f16 matmuls / torch bf16"
            lines.append(f"| {model} | {batch} | {label} | {fmt(mine)} | {err} | "
                         f"{fmt(eager and eager['images_per_s'])} | {fmt(comp and comp['images_per_s'])} | "
                         f"{fmt(ratio, 2)} | {fmt(comp and comp['device']['images_per_s'])} |")
    return "\n".join(lines)


def check(args):
    import numpy as np

    got, want = np.load(args.got).astype(np.float64), np.load(args.want).astype(np.float64)
    line = {"model": args.model, "method": args.method, "batch": int(want.shape[0]),
            "precision": args.precision}
    if got.shape != want.shape:
        line.update(ok=False, error=f"shape {list(got.shape)}, golden {list(want.shape)}")
    else:
        rel = float(np.abs(got - want).max() / np.abs(want).max())
        line.update(max_abs_diff_over_max_logit=rel, limit=LIMIT if args.precision == "f32" else None,
                    ok=rel <= LIMIT if args.precision == "f32" else None)
    print(json.dumps(line))
    return 1 if line["ok"] is False else 0


def tag(args):
    d = json.load(sys.stdin)
    d.update(model_name=args.model, batch=args.batch, precision=args.precision)
    print(json.dumps(d))
    print(f"{args.model} batch {args.batch} {args.precision}: p50 {d['p50_ms']:.3f} ms, "
          f"{args.batch * 1e3 / steady_median_ms(d['samples_ms']):,.1f} images/s", file=sys.stderr)
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("table")
    t.add_argument("dirs", nargs="+")
    c = sub.add_parser("check")
    for flag in ("--got", "--want", "--model", "--method", "--precision"):
        c.add_argument(flag, required=True)
    g = sub.add_parser("tag")
    g.add_argument("--model", required=True)
    g.add_argument("--batch", type=int, required=True)
    g.add_argument("--precision", required=True)
    args = p.parse_args(argv)
    if args.cmd == "tag":
        return tag(args)
    if args.cmd == "table":
        print(table(args.dirs))
        return 0
    return check(args)


if __name__ == "__main__":
    sys.exit(main())
