#!/usr/bin/env bash
# Run ay, the last call: the runtime's conv tests with the cooperative-
# matrix route required (`conv_gemm_coop.wgsl` since `store_out`, 73ff207:
# not run on a GPU since run ax), then the PyTorch vision peers
# (`run.sh vision-peers`, which also brings back the `vision` part's
# results left in /tmp/vision/results by the call before). Carry `.gl` and
# `.xfer/s29` (the runtime's `it` test binary, release, stripped).
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export XDG_RUNTIME_DIR=/tmp
OUT=${OUT:-/tmp/etwgpu-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > "$OUT/gpu.txt" 2>&1
echo "== conv tests (coop route required)"
GPU_TESTS=require ETWGPU_COOP_MATRIX=1 timeout 90 .xfer/s29/rt_it conv:: > "$OUT/conv_tests.txt" 2>&1
grep -E "^test |test result|panicked" "$OUT/conv_tests.txt" | head -20
bash tools/device/run.sh vision-peers
