#!/usr/bin/env bash
# Run at, second call: where q4_gemv_sdpa.wgsl's per-key cost goes. The
# shipped kernel (v0) against copies with one phase of the key tile
# switched off by a condition the compiler cannot fold (`start_pos >
# 100000`): nv the values, ns the scores, nm the softmax's max/sum
# passes, ne the probabilities' exp pass, nsv scores and values; nc the
# cache's f16 -> f32 conversions cut to one a vec4 (a nonsense value from
# an f16 product); f32c the shipped kernel at a float32 cache. Wrong
# outputs, timing only; the route forced on (ETWGPU_GEMV_ATTENTION=1).
# The kernel profiles (positions 0 and 448) give each copy's cost a key.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=/tmp/bins
X=.xfer/s24b
mkdir -p $B && tar xzf $X/bins.tgz -C $B
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > "$OUT/gpu.txt" 2>&1
timeout 60 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 128 --steps 32 --repeats 1 > /dev/null 2>&1
for v in v0 nv ns nm ne nsv nc f32c; do
  kv=f16
  if [ $v = v0 ]; then e="ETWGPU_GEMV_ATTENTION=1"; else e="ETWGPU_GEMV_ATTENTION=1 ETWGPU_SHADER_OVERRIDE=$X/$v"; fi
  if [ $v = f32c ]; then e="ETWGPU_GEMV_ATTENTION=1"; kv=f32; fi
  echo "== $v"
  env $e timeout 60 $B/llm_bench --model smollm2 --weights q4 --kv-cache $kv --prompts 16 --contexts 32,256,448 --steps 16 \
    --repeats 2 --json "$OUT/sm_${v}.json" 2>&1 | grep -E "^decode|rror|shader .* from" | cut -c1-60
done
cd "$OUT" && tar czf /tmp/s24c2.tgz . && rm -rf "$OUT"/* && mv /tmp/s24c2.tgz "$OUT/"
