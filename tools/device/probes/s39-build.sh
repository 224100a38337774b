#!/usr/bin/env bash
# Builds run by's binaries into .xfer/s39 (one xz tarball and its SHA-256):
#   base/  `llm_bench` and `runtime-bench` of REV (default HEAD);
#   i16/   `llm_bench` of REV with `s39-q4-gemv-i16-split.patch`: the
#          opt-in int8 activations' rounding made a 16-bit split (x per
#          32-input block rounded to `round(x * 16256 / max|x|) = 128 * hi
#          + lo`, two int8 planes, two `dot4I8Packed` a byte group).
#          Checked on lavapipe: the int8 tests pass with their CPU
#          reference rounding the same way, and the plain GEMV's fails
#          with the `lo` plane dropped; `tools/export/x_rounding_emulation.py`
#          gives it 591/591 top-1 positions on SmolLM2 (int8: 574/591).
# Reuses session 36's worktree and target folder.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
rev=$(git -C "$root" rev-parse "${1:-HEAD}")
wt=/tmp/s36-wt-old
export CARGO_TARGET_DIR=/tmp/s36-target-old
out=/tmp/s39-bins
rm -rf "$out" && mkdir -p "$out"/{base,i16}
[ -d "$wt" ] || git -C "$root" worktree add -q -d "$wt" "$rev"
source "$root/tools/device/probes/build-lib.sh"
cd "$wt"
git checkout -q --detach "$rev"
cargo xtask codegen > /dev/null
cargo build -q --release -p etwgpu-llm --example llm_bench
cp "$CARGO_TARGET_DIR/release/examples/llm_bench" "$out/base/"
cp "$(bench_exe)" "$out/base/runtime-bench"
git apply "$root/tools/device/probes/s39-q4-gemv-i16-split.patch"
cargo xtask codegen > /dev/null
cargo build -q --release -p etwgpu-llm --example llm_bench
cp "$CARGO_TARGET_DIR/release/examples/llm_bench" "$out/i16/"
git checkout -q -- .
strip "$out"/*/*
(cd "$out" && sha256sum */* > bin.sha256 && tar cJf bin.tar.xz base i16)
mkdir -p "$root/.xfer/s39" && cp "$out/bin.tar.xz" "$out/bin.sha256" "$root/.xfer/s39/"
ls -la "$root/.xfer/s39"
