#!/usr/bin/env bash
# Run ar, first call: q4_gemv_sdpa.wgsl's attention (SmolLM2's decode route
# below 80 keys) in variants, loaded through the `shader-override` build of
# llm_bench (ETWGPU_SHADER_OVERRIDE): v0 as shipped (5180555), v1 without
# the storage barrier (the new row's key and value from workgroup memory),
# v2 = v1 with the first round of keys and values loaded before the
# query, d1 no attention at all (the kernel's floor; wrong output). The
# GEMV route forced at every position (ETWGPU_GEMV_ATTENTION=1), the split
# route (=0) beside it; kernel profiles at positions 0 and 256.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=/tmp/bins
X=.xfer/s22a
mkdir -p $B && tar xzf $X/bins.tgz -C $B
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,persistence_mode --format=csv > "$OUT/gpu.txt" 2>&1
timeout 60 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 128 --steps 64 --repeats 1 > /dev/null 2>&1
for r in 1 2; do
  for v in v0 v1 v2 d1 split; do
    if [ $v = split ]; then e="ETWGPU_GEMV_ATTENTION=0 ETWGPU_SHADER_OVERRIDE=$X/v0"; else e="ETWGPU_GEMV_ATTENTION=1 ETWGPU_SHADER_OVERRIDE=$X/$v"; fi
    echo "== $v $r"
    env $e timeout 60 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 32,128,256 --steps 32 \
      --repeats 3 --json "$OUT/sm_${v}_$r.json" 2>&1 | grep -E "^decode|shader q4" | cut -c1-60
  done
done
cd "$OUT" && tar czf /tmp/s22c1.tgz . && rm -rf "$OUT"/* && mv /tmp/s22c1.tgz "$OUT/"
