"""Overhead of the Python API: ``method.execute`` on the ``transformer_block``
fixture against the Rust ``run`` call of the CLI (``etwgpu run --repeat N``,
which times ``LoadedMethod::run`` alone), on the same machine and device.

Two measurements, medians over ``--repeat`` calls after warm-up:

- in process, per call: the wall time of ``method.execute`` against the time
  the same call spent inside the runtime's ``run`` (``method.last_run_s``,
  timed in Rust around ``LoadedMethod::run``, as ``etwgpu run`` times it).
  Both see the same device, load and calls, so this is the overhead of the
  Python API itself; it decides the exit status.
- across processes: the median over rounds of ``execute``'s median against
  that of the median ``etwgpu run --repeat`` prints, the two alternating
  round by round, each going first in turn (noisier: the two processes see
  different moments of a shared machine, and on a busy one each round's
  median swings with the load: more ``--rounds`` steady it, and the best
  rounds of each side show the two on an idle machine).

Compare builds of the same profile: the wheel from ``maturin build
--release`` with ``target/release/etwgpu``, or CI's dev wheel with
``target/debug/etwgpu``.

    python crates/python/bench/overhead.py --etwgpu target/release/etwgpu --rounds 20 --repeat 100

Prints the medians and the overheads in percent; exits 1 when the in-process
overhead is above ``--max-overhead`` (default 5%).
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


def python_medians_ms(method: etwgpu.Method, x: np.ndarray, repeat: int, warmup: int) -> tuple:
    """Medians of execute's wall time and of its time inside Rust's run."""
    for _ in range(warmup):
        method.execute([x])
    wall, run = [], []
    for _ in range(repeat):
        t = time.perf_counter()
        method.execute([x])
        wall.append(time.perf_counter() - t)
        run.append(method.last_run_s)
    return statistics.median(wall) * 1e3, statistics.median(run) * 1e3


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
    ap.add_argument("--repeat", type=int, default=100, help="timed calls per round and side")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=20, help="alternate the CLI and Python this many times")
    ap.add_argument("--max-overhead", type=float, default=5.0, help="percent")
    args = ap.parse_args()
    print(f"device: {etwgpu.Runtime.get().device['name']}")
    # Loaded once, as the CLI loads it once per process.
    method = etwgpu.Runtime.get().load_program(FIXTURE / "model.pte").load_method("forward")
    x = np.load(FIXTURE / "call0.in0.npy")
    py, inner, cli = [], [], []
    for r in range(args.rounds):
        # The CLI's first calls warm up too: it runs warm-up + repeat, and the
        # median is robust to the slow first calls. The order alternates:
        # whichever side runs just after a CLI process has exited is slower
        # on a busy machine (measured on lavapipe), whatever it is.
        if r % 2 == 0:
            cli.append(cli_median_ms(args.etwgpu, args.repeat + args.warmup))
        wall, run = python_medians_ms(method, x, args.repeat, args.warmup)
        if r % 2 == 1:
            cli.append(cli_median_ms(args.etwgpu, args.repeat + args.warmup))
        py.append(wall)
        inner.append(run)
        print(
            f"round {r}: python execute median {wall:.3f} ms (of which Rust run {run:.3f} ms), "
            f"etwgpu run median {cli[-1]:.3f} ms"
        )
    in_process = statistics.median((w - i) / i * 100 for w, i in zip(py, inner))
    p, c = statistics.median(py), statistics.median(cli)
    across = (p - c) / c * 100
    best = (min(py) - min(cli)) / min(cli) * 100
    print(f"in process: execute costs {in_process:+.2f}% over its own Rust run call (median of rounds)")
    print(
        f"across processes ({args.rounds} rounds x {args.repeat} calls each side): median of round medians "
        f"python execute {p:.3f} ms, etwgpu run {c:.3f} ms: {across:+.2f}%; "
        f"best rounds {min(py):.3f} ms vs {min(cli):.3f} ms: {best:+.2f}%"
    )
    ok = in_process <= args.max_overhead
    print(f"limit {args.max_overhead}% (in process): {'ok' if ok else 'OVER'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
