#!/usr/bin/env bash
# Builds the binaries of run bo (`s36-call1.sh`) into .xfer/s36 (one xz
# tarball and its SHA-256, as `lib.sh`'s `probe_unpack` reads them):
#   old/  `llm_bench` and `runtime-bench` of 2212242 (run bk's table build:
#         the float decode GEMVs before they kept loads in flight);
#   new/  `etwgpu`, `llm_bench`, `runtime-bench` of HEAD;
#   e/    `llm_bench` of HEAD with `LARGE_SPLIT_MIN_INPUTS` 1,024 (run bn,
#         never started in session 35).
# Each build has its own worktree and target folder: a shared target
# folder takes a worktree's crates as fresh when their files are older
# than the artifacts of another worktree (session 35 found a mixed build
# that way). First builds take ~4 min each on 2 cores.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
out=/tmp/s36-bins
rm -rf "$out" && mkdir -p "$out"/{old,new,e}
source "$root/tools/device/probes/build-lib.sh"
build() { # NAME REV [CONSTANT]
  local wt=/tmp/s36-wt-$1
  git -C "$root" worktree remove --force "$wt" 2>/dev/null || true
  git -C "$root" worktree add -q -d "$wt" "$2"
  if [ -n "${3:-}" ]; then
    sed -i "s/^pub const LARGE_SPLIT_MIN_INPUTS: u64 = [0-9]*;/pub const LARGE_SPLIT_MIN_INPUTS: u64 = $3;/" \
      "$wt/crates/kernels/src/ops/gemm.rs"
    grep -q "LARGE_SPLIT_MIN_INPUTS: u64 = $3;" "$wt/crates/kernels/src/ops/gemm.rs"
  fi
  (cd "$wt" && export CARGO_TARGET_DIR=/tmp/s36-target-$1 &&
    cargo build -q --release -p etwgpu-llm --example llm_bench &&
    cp "$CARGO_TARGET_DIR/release/examples/llm_bench" "$out/$1/" &&
    if [ "$1" != e ]; then cp "$(bench_exe)" "$out/$1/runtime-bench"; fi &&
    if [ "$1" = new ]; then cargo build -q --release -p etwgpu-cli && cp "$CARGO_TARGET_DIR/release/etwgpu" "$out/new/"; fi)
}
build old 2212242
build new HEAD
build e HEAD 1024
strip "$out"/*/*
(cd "$out" && sha256sum */* > bin.sha256 && tar cJf bin.tar.xz old new e)
mkdir -p "$root/.xfer/s36" && cp "$out/bin.tar.xz" "$out/bin.sha256" "$root/.xfer/s36/"
ls -la "$root/.xfer/s36"
