"""Runs `etwgpu run` on every fixture and compares with its goldens.

Usage:
    python3 tools/device/goldens.py ETWGPU_BINARY FIXTURES_DIR OUT_DIR
    python3 tools/device/goldens.py ETWGPU_BINARY FIXTURES_DIR OUT_DIR --families [--repeat N] [--only A,B]
    python3 tools/device/goldens.py ETWGPU_BINARY FIXTURES_DIR OUT_DIR --precision f32|mixed|f16

Prints one line per fixture (max abs / rel error, pass/fail against the
manifest's per-dtype tolerance, or why it did not run) and writes the same as
JSON to OUT_DIR/goldens.json.

`--precision P` runs every fixture with `etwgpu run --precision P` (without
it, the binary's default: `ETWGPU_PRECISION`, else mixed). At `f16` (every
float32 matrix product on f16 operands, f32 accumulation, where the GPU has
matrix units) outputs are judged by the manifest's `tolerance_f16_operands`
rows (tools/export/tolerances.py: 2e-3 relative and absolute for float32,
never tighter than the float32 row); at `f32` and `mixed` (only 4-bit weight
linears on f16 operands), and by default, by the `tolerance` rows. Set
`ETWGPU_COOP_MATRIX=1` to require the matrix units (the route is taken only
where the adapter has them; elsewhere every precision computes float32).

`--families` prints one markdown table instead: per program, the delegates
(from the manifest's `expected` block, which the exporter read from the file),
the GPU calls and CPU fallback calls of the method, the host round trips of
its last call and its compute dispatches per call (all as `etwgpu run` reports
them), the max error against the goldens, and the wall time of one call as
`etwgpu run --repeat` measures it (upload, submit, wait, read-back): the
median of `--repeat` + 1 runs of each call in a second `etwgpu run` (its first
run is among them; pipelines are compiled at load, so it is warm but for
caches); a program of several calls gives each call's median.

Needs numpy; used on the device machine, where there is no Rust toolchain.
"""
import argparse
import json
import os
import re
import subprocess

import numpy as np


def run_args(binary, d, man, extra):
    args = [binary, "run", os.path.join(d, "model.pte")] + extra
    for call in man["calls"]:
        args += ["--call", ",".join(os.path.join(d, f) for f in call["inputs"])]
    return args


def last_line(p):
    lines = (p.stderr.strip() or p.stdout.strip() or f"exit status {p.returncode}").splitlines()
    return lines[-1]


def precision_args(precision):
    return ["--precision", precision] if precision else []


def tolerance_rows(man, precision):
    """The manifest's rows that judge a run at `precision`, or None."""
    return man.get("tolerance_f16_operands") if precision == "f16" else man["tolerance"]


def check(binary, name, d, man, out, precision=None):
    """Runs the calls once and compares every output with its golden."""
    rows = tolerance_rows(man, precision)
    if rows is None:
        return {"fixture": name, "status": "error",
                "message": "the manifest has no tolerance_f16_operands rows (tools/export/tolerances.py --write-manifests)"}
    p = subprocess.run(run_args(binary, d, man, ["--output-dir", os.path.join(out, name)] + precision_args(precision)),
                       capture_output=True, text=True)
    if p.returncode != 0:
        return {"fixture": name, "status": "error", "message": last_line(p)}
    worst_abs, worst_rel, ok = 0.0, 0.0, True
    for k, call in enumerate(man["calls"]):
        for i, f in enumerate(call["outputs"]):
            want = np.load(os.path.join(d, f))
            got = np.load(os.path.join(out, name, f"call{k}.out{i}.npy"))
            tol = rows.get(str(want.dtype), {"rtol": 0.0, "atol": 0.0})
            if got.shape != want.shape or got.dtype != want.dtype:
                ok = False
                continue
            w, g = want.astype(np.float64), got.astype(np.float64)
            err = np.abs(g - w)
            worst_abs = max(worst_abs, float(err.max(initial=0.0)))
            worst_rel = max(worst_rel, float((err / np.maximum(np.abs(w), 1e-12)).max(initial=0.0)))
            ok &= bool(np.all(err <= tol["atol"] + tol["rtol"] * np.abs(w)))
    timing = [l for l in p.stdout.splitlines() if l.startswith("call")]
    r = {"fixture": name, "status": "pass" if ok else "FAIL", "max_abs": worst_abs,
         "max_rel": worst_rel, "calls": timing}
    # `loaded "forward" on ADAPTER in T ms (D dispatches per call, fusion on; G GPU call(s), C CPU fallback call(s))`
    m = re.search(r"\((\d+) dispatches per call.*; (\d+) GPU call\(s\), (\d+) CPU fallback call\(s\)\)", p.stdout)
    if m:
        r["dispatches"], r["gpu_calls"], r["cpu_calls"] = (int(x) for x in m.groups())
    trips = re.findall(r"; (\d+) host round trip\(s\)\)", p.stdout)
    if trips:
        r["host_round_trips"] = int(trips[-1])
    return r


def wall_times(binary, d, man, repeat, precision=None):
    """Median wall time (ms) of each call over `repeat` runs, or an error line."""
    p = subprocess.run(run_args(binary, d, man, ["--repeat", str(repeat + 1)] + precision_args(precision)),
                       capture_output=True, text=True)
    if p.returncode != 0:
        return last_line(p)
    # `call K: ... (median X ms, min Y ms over N runs; ...)`.
    return [float(x) for x in re.findall(r"median ([0-9.]+) ms", p.stdout)]


def families_table(results, times):
    rows = ["| program | delegates | GPU calls | CPU calls | host round trips | dispatches/call "
            "| max abs err | max rel err | goldens | wall ms/call (median) |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
    for r in results:
        name = r["fixture"]
        if r["status"] == "error":
            rows.append(f"| {name} | {r.get('delegates', '?')} | | | | | | | not run: {r['message']} | |")
            continue
        t = times.get(name)
        if isinstance(t, str):
            wall = f"error: {t}"
        elif t:
            wall = " / ".join(f"{x:.3f}" for x in t) if len(t) <= 3 else f"{min(t):.3f} .. {max(t):.3f} ({len(t)} calls)"
        else:
            wall = "-"
        rows.append(f"| {name} | {r.get('delegates', '?')} | {r.get('gpu_calls', '?')} | {r.get('cpu_calls', '?')} "
                    f"| {r.get('host_round_trips', '?')} | {r.get('dispatches', '?')} | {r['max_abs']:.2e} "
                    f"| {r['max_rel']:.2e} | {r['status']} | {wall} |")
    return "\n".join(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("binary")
    ap.add_argument("fixtures")
    ap.add_argument("out")
    ap.add_argument("--families", action="store_true", help="print the per-program markdown table")
    ap.add_argument("--repeat", type=int, default=10, help="timed runs per call (with --families)")
    ap.add_argument("--only", default="", help="comma-separated fixture names (default: all)")
    ap.add_argument("--precision", choices=["f32", "mixed", "f16"], default=None,
                    help="pass `--precision P` to etwgpu run; f16 is judged by the manifests' "
                         "tolerance_f16_operands rows (default: the binary's precision, the tolerance rows)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    only = [n for n in a.only.split(",") if n]
    results, times = [], {}
    for name in sorted(os.listdir(a.fixtures)):
        d = os.path.join(a.fixtures, name)
        man_path = os.path.join(d, "manifest.json")
        if not os.path.exists(man_path) or (only and name not in only):
            continue
        man = json.load(open(man_path))
        r = check(a.binary, name, d, man, a.out, a.precision)
        methods = man.get("expected", {}).get("methods", [])
        forward = next((m for m in methods if m.get("name") == man.get("method", "forward")), None)
        if forward is not None:
            r["delegates"] = len(forward.get("delegates", []))
        results.append(r)
        if a.families and r["status"] != "error":
            times[name] = wall_times(a.binary, d, man, a.repeat, a.precision)
    if a.families:
        doc = {"results": results, "wall_ms": times, "precision": a.precision}
    elif a.precision:
        doc = {"results": results, "precision": a.precision}
    else:
        doc = results
    json.dump(doc, open(os.path.join(a.out, "goldens.json"), "w"), indent=1)
    if a.families:
        print(families_table(results, times))
        return
    for r in results:
        if r["status"] == "error":
            print(f"{r['fixture']:20} not run: {r['message']}")
        else:
            print(f"{r['fixture']:20} {r['status']:4}  max abs {r['max_abs']:.2e}  max rel {r['max_rel']:.2e}")


if __name__ == "__main__":
    main()
