#!/usr/bin/env bash
# Run at, fourth call: loads against arithmetic in q4_gemv_sdpa.wgsl's two
# key phases (wrong outputs, timing only; the route forced on). kl: the
# scores keep their key loads, their arithmetic is one sum of the loaded
# vec4s; kx: the scores' arithmetic on keys made from their indices (no
# key loads); vl, vx: the same for the values. v0 as shipped. The SM
# clock sampled every 50 ms through the v0 run.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=/tmp/bins
X=.xfer/s24d
mkdir -p $B && tar xzf $X/bins.tgz -C $B
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > "$OUT/gpu.txt" 2>&1
timeout 60 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 128 --steps 32 --repeats 1 > /dev/null 2>&1
for v in v0 kl kx vl vx; do
  if [ $v = v0 ]; then e="ETWGPU_GEMV_ATTENTION=1"; else e="ETWGPU_GEMV_ATTENTION=1 ETWGPU_SHADER_OVERRIDE=$X/$v"; fi
  if [ $v = v0 ]; then nvidia-smi --query-gpu=clocks.sm,utilization.gpu --format=csv,noheader -lms 50 > "$OUT/clocks.txt" 2>&1 & CK=$!; fi
  echo "== $v"
  env $e timeout 60 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 32,448 --steps 16 \
    --repeats 2 --json "$OUT/sm_${v}.json" 2>&1 | grep -E "^decode|rror|shader .* from" | cut -c1-60
  if [ $v = v0 ]; then kill $CK; fi
done
sort "$OUT/clocks.txt" | uniq -c | sort -rn | head -8
cd "$OUT" && tar czf /tmp/s24c4.tgz . && rm -rf "$OUT"/* && mv /tmp/s24c4.tgz "$OUT/"
