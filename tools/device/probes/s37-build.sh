#!/usr/bin/env bash
# Builds the binaries of run bp (`s37-call1.sh`) into .xfer/s37 (one xz
# tarball and its SHA-256, as `lib.sh`'s `probe_unpack` reads them):
#   old/  `llm_bench` and `runtime-bench` of 7d48003 (session 36's last
#         commit: the float norms their own dispatches, step-level memory
#         plans);
#   new/  `etwgpu`, `llm_bench`, `runtime-bench` of REV (default HEAD).
# Each build keeps its own worktree and target folder (a shared target
# folder once mixed two trees' crates, session 35); session 36's worktrees
# and targets are reused when they exist, so only the changed crates
# build.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
new_rev=$(git -C "$root" rev-parse "${1:-HEAD}")
out=/tmp/s37-bins
rm -rf "$out" && mkdir -p "$out"/{old,new}
source "$root/tools/device/probes/build-lib.sh"
build() { # NAME REV WORKTREE TARGET
  local wt=$3
  if [ -d "$wt" ]; then git -C "$wt" checkout -q --detach "$2"
  else git -C "$root" worktree add -q -d "$wt" "$2"; fi
  (cd "$wt" && export CARGO_TARGET_DIR=$4 &&
    cargo build -q --release -p etwgpu-llm --example llm_bench &&
    cp "$CARGO_TARGET_DIR/release/examples/llm_bench" "$out/$1/" &&
    cp "$(bench_exe)" "$out/$1/runtime-bench" &&
    if [ "$1" = new ]; then cargo build -q --release -p etwgpu-cli && cp "$CARGO_TARGET_DIR/release/etwgpu" "$out/new/"; fi)
}
build old 7d48003 /tmp/s36-wt-new /tmp/s36-target-new
build new "$new_rev" /tmp/s36-wt-old /tmp/s36-target-old
strip "$out"/*/*
(cd "$out" && sha256sum */* > bin.sha256 && tar cJf bin.tar.xz old new)
mkdir -p "$root/.xfer/s37" && cp "$out/bin.tar.xz" "$out/bin.sha256" "$root/.xfer/s37/"
ls -la "$root/.xfer/s37"
