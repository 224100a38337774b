#!/usr/bin/env bash
# Run az, first call: the Performance table at the default precision
# (`mixed` since run ay): `run.sh etwgpu extra coop f32` (the `etwgpu`
# part's prefill rows are now `mixed`; `coop` is the goldens at mixed and
# f16 with the cooperative-matrix route required, `f32` the prefill at
# float32 end to end), everything packed into one file (a call brings
# back at most 8). Carry .gl, .device/etwgpu and .device/llm_bench.
set -u
REAL=${OUT:-/tmp/out}
mkdir -p "$REAL"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > /tmp/gpu.txt 2>&1
OUT=/tmp/o1 bash tools/device/run.sh etwgpu extra coop f32
cp /tmp/gpu.txt /tmp/o1/
(cd /tmp/o1 && tar czf "$REAL/call1.tgz" .)
