#!/usr/bin/env bash
# Run as, fourth call: the landed q4_gemv_sdpa.wgsl (named per-head sums,
# eight key loads in flight) against the shipped one (.xfer/s23a: HEAD
# 8dff536's llm_bench), both by default, alternated; then the landed
# build's GEMV route forced against the split route at 64-128 keys, for
# the route's bound.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
mkdir -p /tmp/old /tmp/new && tar xzf .xfer/s23a/bins.tgz -C /tmp/old && tar xzf .xfer/s23e/bins.tgz -C /tmp/new
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > "$OUT/gpu.txt" 2>&1
timeout 60 /tmp/new/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 128 --steps 64 --repeats 1 > /dev/null 2>&1
for r in 1 2; do
  for b in old new; do
    echo "== $b $r"
    timeout 60 /tmp/$b/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 32,128,256 --steps 64 \
      --repeats 3 --json "$OUT/sm_${b}_$r.json" 2>&1 | grep -E "^decode|rror" | cut -c1-50
  done
done
for a in 1 0; do
  echo "== new gemv_attention=$a"
  ETWGPU_GEMV_ATTENTION=$a timeout 60 /tmp/new/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 64,80,96,112,128 --steps 16 \
    --repeats 3 --json "$OUT/sm_route_$a.json" 2>&1 | grep -E "^decode|rror" | cut -c1-50
done
cd "$OUT" && tar czf /tmp/s23c4.tgz . && rm -rf "$OUT"/* && mv /tmp/s23c4.tgz "$OUT/"
