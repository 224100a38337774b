#!/usr/bin/env bash
# Run as, fifth call: the final build (the landed q4_gemv_sdpa and the
# route's bound at 112 keys): oneshot_probe on the synthetic SmolLM2 shape
# saved with the real export's geometry (as in the first call: 64 tokens,
# then 256 twice), then llm_bench's SmolLM2 cells by default.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=/tmp/bins
mkdir -p $B && tar xzf .xfer/s23f/bins.tgz -C $B
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > "$OUT/gpu.txt" 2>&1
$B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 446 --steps 64 --save /tmp/sm512.pte --build-only > /dev/null 2>&1
for r in 64 256 256; do
  echo "== oneshot $r"
  timeout 60 $B/oneshot_probe /tmp/sm512.pte --max-tokens $r --repeats 1 2>&1 | tee -a "$OUT/probe.txt" | cut -c1-200
done
echo "== cells"
timeout 60 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 32,128,256 --steps 64 \
  --repeats 3 --json "$OUT/sm_final.json" 2>&1 | grep -E "^decode|rror" | cut -c1-50
cd "$OUT" && tar czf /tmp/s23c5.tgz . && rm -rf "$OUT"/* && mv /tmp/s23c5.tgz "$OUT/"
