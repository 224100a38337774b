#!/usr/bin/env python3
"""Prints one generated shader's text (a `pub const NAME: &str` of
crates/kernels/src/generated/shaders.rs, its includes and variant expanded),
for `ETWGPU_SHADER_OVERRIDE` trials: write it to DIR/<label>.wgsl, edit or
patch it, and run a `shader-override` build with the variable set to DIR.

    python3 tools/device/probes/shader_text.py Q4_GEMV_SDPA_F32_KVF16 > DIR/q4_gemv_sdpa.f32_kvf16.wgsl
"""
import re
import sys
from pathlib import Path

GENERATED = Path(__file__).resolve().parents[3] / "crates/kernels/src/generated/shaders.rs"


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    name = sys.argv[1]
    text = GENERATED.read_text()
    m = re.search(r"pub const " + re.escape(name) + r': &str = r#"(.*?)"#;', text, re.S)
    if not m:
        print(f"shader_text.py: no shader {name} in {GENERATED}", file=sys.stderr)
        return 1
    sys.stdout.write(m.group(1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
