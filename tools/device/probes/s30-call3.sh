#!/usr/bin/env bash
# Run az, third call: the runtime's convolution tests with the
# cooperative-matrix route required (conv_gemm_coop has not run on a GPU
# since `clamp_act`, 1c30190), then `coop_probe dense new`: the shipped
# dense GEMMs and the new template tilings (padding, the shipped kernel's
# next loads in flight, K steps of 16 / 48 / 64 / 80), f16 4096^3, each
# checked against an f64 reference at sampled outputs. Carry .gl and
# .xfer/s30 (rt_it: the runtime's `it` tests at this commit, stripped;
# coop_probe: built with the new tilings, stripped).
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export XDG_RUNTIME_DIR=/tmp
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > "$OUT/gpu.txt" 2>&1
echo "== conv tests (coop route required)"
GPU_TESTS=require ETWGPU_COOP_MATRIX=1 timeout 90 .xfer/s30/rt_it conv:: > "$OUT/conv_tests.txt" 2>&1
grep -E "test result|panicked|FAILED" "$OUT/conv_tests.txt" | head -20
echo "== coop_probe dense new"
timeout 240 .xfer/s30/coop_probe dense new > "$OUT/coop_probe.txt" 2>&1
echo "exit $?"
grep -E "TFLOP/s|FAIL|skipped" "$OUT/coop_probe.txt" | head -80
echo "== coop_probe q4 new"
timeout 200 .xfer/s30/coop_probe q4 new > "$OUT/coop_probe_q4.txt" 2>&1
echo "exit $?"
grep -E "TFLOP/s  |FAIL|skipped" "$OUT/coop_probe_q4.txt" | head -40
