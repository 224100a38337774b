#!/usr/bin/env bash
# Run ar, second call: q4_gemv_sdpa.wgsl's attention in variants, through
# the `shader-override` build of llm_bench (ETWGPU_SHADER_OVERRIDE), the
# GEMV route forced (ETWGPU_GEMV_ATTENTION=1), the split route (=0) beside:
# v0 as shipped; v4 without the storage barrier (the new row from
# workgroup memory, chosen by select), the scores head-major as v0; v3 = v4
# with 16 values in flight, v5 with 32; v6 = v3 with two score pairs an
# iteration (32 key loads in flight); v7 = v6 with 32 values in flight.
# Kernel profiles at positions 0 and 256.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=/tmp/bins
X=.xfer/s22b
mkdir -p $B && tar xzf $X/bins.tgz -C $B
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,persistence_mode --format=csv > "$OUT/gpu.txt" 2>&1
timeout 60 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 128 --steps 64 --repeats 1 > /dev/null 2>&1
for r in 1 2; do
  for v in v0 v3 v4 v5 v6 v7 split; do
    if [ $v = split ]; then e="ETWGPU_GEMV_ATTENTION=0 ETWGPU_SHADER_OVERRIDE=$X/v0"; else e="ETWGPU_GEMV_ATTENTION=1 ETWGPU_SHADER_OVERRIDE=$X/$v"; fi
    echo "== $v $r"
    env $e timeout 60 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 32,128,256 --steps 32 \
      --repeats 3 --json "$OUT/sm_${v}_$r.json" 2>&1 | grep -E "^decode|shader q4" | cut -c1-60
  done
done
cd "$OUT" && tar czf /tmp/s22c2.tgz . && rm -rf "$OUT"/* && mv /tmp/s22c2.tgz "$OUT/"
