#!/usr/bin/env bash
# Run as, third call: q4_gemv_sdpa.wgsl with its per-query-head arrays in
# named registers (u1: the `dots`, `acc` and head-index arrays indexed by
# a loop over MAXG become four named vec4s and indices; 4 loads in flight
# for the scores and the values; u2: the same with 8 of each), through the
# `shader-override` build of llm_bench (.xfer/s23a); v0 as shipped; the
# split route.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=/tmp/bins
X=.xfer/s23d
mkdir -p $B && tar xzf .xfer/s23a/bins.tgz -C $B
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > "$OUT/gpu.txt" 2>&1
timeout 60 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 128 --steps 64 --repeats 1 > /dev/null 2>&1
for r in 1 2; do
  for v in v0 u1 u2 split; do
    if [ $v = split ]; then e="ETWGPU_GEMV_ATTENTION=0 ETWGPU_SHADER_OVERRIDE=$X/v0"; else e="ETWGPU_GEMV_ATTENTION=1 ETWGPU_SHADER_OVERRIDE=$X/$v"; fi
    echo "== $v $r"
    env $e timeout 60 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 32,128,256,448 --steps 32 \
      --repeats 3 --json "$OUT/sm_${v}_$r.json" 2>&1 | grep -E "^decode|rror" | cut -c1-50
  done
done
cd "$OUT" && tar czf /tmp/s23c3.tgz . && rm -rf "$OUT"/* && mv /tmp/s23c3.tgz "$OUT/"
