"""Runs `etwgpu run` on every fixture and compares with its goldens.

Usage: python3 tools/device/goldens.py ETWGPU_BINARY FIXTURES_DIR OUT_DIR

Prints one line per fixture (max abs / rel error, pass/fail against the
manifest's per-dtype tolerance, or why it did not run) and writes the same as
JSON to OUT_DIR/goldens.json. Needs numpy; used on the device machine, where
there is no Rust toolchain.
"""
import json
import os
import subprocess
import sys

import numpy as np


def main():
    binary, fixtures, out = sys.argv[1:4]
    os.makedirs(out, exist_ok=True)
    results = []
    for name in sorted(os.listdir(fixtures)):
        d = os.path.join(fixtures, name)
        man_path = os.path.join(d, "manifest.json")
        if not os.path.exists(man_path):
            continue
        man = json.load(open(man_path))
        args = [binary, "run", os.path.join(d, "model.pte"), "--output-dir", os.path.join(out, name)]
        for call in man["calls"]:
            args += ["--call", ",".join(os.path.join(d, f) for f in call["inputs"])]
        p = subprocess.run(args, capture_output=True, text=True)
        if p.returncode != 0:
            results.append({"fixture": name, "status": "error", "message": p.stderr.strip().splitlines()[-1]})
            continue
        worst_abs, worst_rel, ok = 0.0, 0.0, True
        for k, call in enumerate(man["calls"]):
            for i, f in enumerate(call["outputs"]):
                want = np.load(os.path.join(d, f))
                got = np.load(os.path.join(out, name, f"call{k}.out{i}.npy"))
                tol = man["tolerance"].get(str(want.dtype), {"rtol": 0.0, "atol": 0.0})
                w, g = want.astype(np.float64), got.astype(np.float64)
                err = np.abs(g - w)
                worst_abs = max(worst_abs, float(err.max(initial=0.0)))
                worst_rel = max(worst_rel, float((err / np.maximum(np.abs(w), 1e-12)).max(initial=0.0)))
                ok &= got.shape == want.shape and bool(np.all(err <= tol["atol"] + tol["rtol"] * np.abs(w)))
        timing = [l for l in p.stdout.splitlines() if l.startswith("call")]
        results.append({"fixture": name, "status": "pass" if ok else "FAIL", "max_abs": worst_abs,
                        "max_rel": worst_rel, "calls": timing})
    json.dump(results, open(os.path.join(out, "goldens.json"), "w"), indent=1)
    for r in results:
        if r["status"] == "error":
            print(f"{r['fixture']:20} not run: {r['message']}")
        else:
            print(f"{r['fixture']:20} {r['status']:4}  max abs {r['max_abs']:.2e}  max rel {r['max_rel']:.2e}")


if __name__ == "__main__":
    main()
