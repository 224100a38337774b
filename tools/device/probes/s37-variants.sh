#!/usr/bin/env bash
# Builds the stream bench (`runtime-bench`) of REV (default HEAD) as
# shipped and in three variants of the float GEMV `linear_gemv.wgsl`, into
# .xfer/s37v (one xz tarball and its SHA-256) for `s37-call2.sh`:
#   base/  as shipped (8 columns a workgroup at N = 2,048, 4 words in
#          flight a lane);
#   u8/    eight words in flight a lane: `s38-linear-gemv-u8.patch`, a
#          loop of eight loads written out before the four-load loop
#          (checked on lavapipe: `linear_gemv_ragged_shapes_match_a_reference`
#          runs it at K = 8,192, and fails with one of its eight words
#          dropped). Run bs's u8 only raised a constant the loop's step
#          read, so it skipped half of each row; it is not this one;
#   c16/   16 columns a workgroup (16 lanes a column, twice the words a
#          lane) for 1,024 columns or more (N = 2,048 takes 8 as shipped);
#   hc/    the kernel marked host-checked, so `ETWGPU_TRUSTED_SHADERS=1`
#          creates it without runtime bounds checks (what they cost).
# Reuses session 36's worktree and target folder of the new build.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
rev=$(git -C "$root" rev-parse "${1:-HEAD}")
wt=/tmp/s36-wt-old
export CARGO_TARGET_DIR=/tmp/s36-target-old
out=/tmp/s37v-bins
rm -rf "$out" && mkdir -p "$out"/{base,u8,c16,hc}
[ -d "$wt" ] || git -C "$root" worktree add -q -d "$wt" "$rev"
source "$root/tools/device/probes/build-lib.sh"
build() { # NAME: the worktree as edited
  (cd "$wt" && cargo xtask codegen > /dev/null && cp "$(bench_exe)" "$out/$1/runtime-bench")
  git -C "$wt" checkout -q -- .
}
cd "$wt"
git checkout -q --detach "$rev"
build base
git apply "$root/tools/device/probes/s38-linear-gemv-u8.patch"
grep -q "7u \* lanes < k4" crates/kernels/wgsl/common/linear_gemv_body.wgsl
build u8
sed -i 's|^    let mut cols = 8;|    if columns >= 1024 \&\& k / 4 >= 4 * (GEMV_WG / 16) {\n        return 16;\n    }\n    let mut cols = 8;|' crates/kernels/src/ops/matmul.rs
grep -q "return 16;" crates/kernels/src/ops/matmul.rs
build c16
sed -i 's|^// variants: f32 f16$|//!\n//! Bounds: `partial` by `lid` and `lid + stride` below `WG`; the row sums\n//! by `r < m <= MAX_ROWS` (`GEMV_MAX_ROWS`).\n// variants: f32 f16\n// bounds: host-checked|' crates/kernels/wgsl/linear_gemv.wgsl
grep -q "bounds: host-checked" crates/kernels/wgsl/linear_gemv.wgsl
build hc
strip "$out"/*/*
(cd "$out" && sha256sum */* > bin.sha256 && tar cJf bin.tar.xz base u8 c16 hc)
mkdir -p "$root/.xfer/s37v" && cp "$out/bin.tar.xz" "$out/bin.sha256" "$root/.xfer/s37v/"
ls -la "$root/.xfer/s37v"
