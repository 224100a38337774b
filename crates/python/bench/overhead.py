"""Overhead of the Python API: ``method.execute`` on the ``transformer_block``
fixture against the Rust ``run`` call of the CLI (``etwgpu run --repeat N``,
which times ``LoadedMethod::run`` alone), on the same machine and device.

Both sides time one call end to end (inputs in, outputs back on the host)
and report the median over ``--repeat`` calls after warm-up. Compare builds of
the same profile: the wheel from ``maturin build --release`` with
``target/release/etwgpu``, or CI's dev wheel with ``target/debug/etwgpu``.

    python crates/python/bench/overhead.py --etwgpu target/release/etwgpu --repeat 200

Prints both medians and the overhead in percent; exits 1 when it is above
``--max-overhead`` (default 5%).
"""

import argparse
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import etwgpu

FIXTURE = Path(__file__).resolve().parents[3] / "test_data" / "fixtures" / "transformer_block"


def python_median_ms(repeat: int, warmup: int) -> float:
    method = etwgpu.Runtime.get().load_program(FIXTURE / "model.pte").load_method("forward")
    x = np.load(FIXTURE / "call0.in0.npy")
    for _ in range(warmup):
        method.execute([x])
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        method.execute([x])
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def cli_median_ms(etwgpu_bin: str, repeat: int) -> float:
    out = subprocess.run(
        [etwgpu_bin, "run", str(FIXTURE / "model.pte"), "--input", str(FIXTURE / "call0.in0.npy"), "--repeat", str(repeat)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    m = re.search(r"median ([0-9.]+) ms", out)
    if not m:
        sys.exit(f"no median in the output of etwgpu run:\n{out}")
    return float(m.group(1))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--etwgpu", default="target/release/etwgpu", help="the etwgpu CLI binary")
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3, help="alternate Python and CLI this many times")
    ap.add_argument("--max-overhead", type=float, default=5.0, help="percent")
    args = ap.parse_args()
    print(f"device: {etwgpu.Runtime.get().device['name']}")
    py, cli = [], []
    for r in range(args.rounds):
        # The CLI's first calls warm up too: it runs warm-up + repeat, and the
        # median is robust to the slow first calls.
        cli.append(cli_median_ms(args.etwgpu, args.repeat + args.warmup))
        py.append(python_median_ms(args.repeat, args.warmup))
        print(f"round {r}: python execute median {py[-1]:.3f} ms, etwgpu run median {cli[-1]:.3f} ms")
    p, c = min(py), min(cli)
    overhead = (p - c) / c * 100
    print(f"best medians: python {p:.3f} ms, rust {c:.3f} ms: overhead {overhead:+.1f}% (limit {args.max_overhead}%)")
    return 0 if overhead <= args.max_overhead else 1


if __name__ == "__main__":
    sys.exit(main())
