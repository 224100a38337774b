#!/usr/bin/env python3
"""Writes run av's conv_gemm overrides (float32) under DIR (default
.xfer/s26): `old/` the kernel before commit "conv_gemm: named values, a
branch-free gather" (its private arrays `rows`, `gx`, `gw`, `acc` and
its branching gather), and two timing-only forms of the shipped kernel
(wrong outputs): `gnx/` its gather replaced by a contiguous load (no
index arithmetic, no padding test), `gnm/` one of each step's 16 k
products. Run from the repository root; needs git.
"""
import re
import subprocess
import sys
from pathlib import Path

OLD_COMMIT = "34bc125"
GEN = "crates/kernels/src/generated/shaders.rs"


def shader(text: str) -> str:
    m = re.search(r'pub const CONV_GEMM_F32: &str = r#"(.*?)"#;', text, re.S)
    if not m:
        sys.exit("s26-variants.py: no CONV_GEMM_F32")
    return m.group(1)


def swap(text: str, old: str, new: str) -> str:
    if text.count(old) != 1:
        sys.exit(f"s26-variants.py: expected one {old!r}")
    return text.replace(old, new)


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ".xfer/s26")
    now = shader(Path(GEN).read_text())
    old = shader(subprocess.run(["git", "show", f"{OLD_COMMIT}:{GEN}"], capture_output=True, text=True, check=True).stdout)
    gather = now[now.index("    // A window row or column before"):now.index("    return select(0.0, f32(v), inside);")]
    gnx = swap(now, gather, "    let v = x[min(r.base + pos.k, arrayLength(&x) - 1u)];\n    let inside = true;\n")
    gnx = swap(gnx, "        img * p.c_in * p.h * p.w,", "        m,")
    gnm = swap(now, "for (var kk = 0u; kk < TK; kk++) {", "for (var kk = 0u; kk < 1u; kk++) {")
    for name, text in [("old", old), ("gnx", gnx), ("gnm", gnm)]:
        (out / name).mkdir(parents=True, exist_ok=True)
        (out / name / "conv_gemm.f32.wgsl").write_text(text)
        print(out / name / "conv_gemm.f32.wgsl")


if __name__ == "__main__":
    main()
