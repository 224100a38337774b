#!/usr/bin/env bash
# Run as, sixth call: the split partials (common/sdpa_split_body.wgsl)
# with their per-query-vector arrays named, as q4_gemv_sdpa.wgsl's in the
# third call: the build with it (.xfer/s23g) against HEAD f300d6c
# (.xfer/s23h: its llm_bench), alternated; SmolLM2 by default at 32 / 128 / 256 keys
# (the split route past 112), the 1B shape at 128 and 2,048.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
mkdir -p /tmp/old /tmp/new && tar xzf .xfer/s23h/bins.tgz -C /tmp/old && tar xzf .xfer/s23g/bins.tgz -C /tmp/new
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > "$OUT/gpu.txt" 2>&1
timeout 60 /tmp/new/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 128 --steps 32 --repeats 1 > /dev/null 2>&1
for r in 1 2; do
  for b in old new; do
    echo "== $b $r"
    timeout 60 /tmp/$b/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 32,128,256 --steps 64 \
      --repeats 3 --json "$OUT/sm_${b}_$r.json" 2>&1 | grep -E "^decode|rror" | cut -c1-50
  done
done
for b in old new; do
  echo "== 1b $b"
  timeout 90 /tmp/$b/llm_bench --model 1b --weights q4 --prompts 16 --contexts 128,2048 --steps 32 \
    --repeats 3 --json "$OUT/1b_${b}.json" 2>&1 | grep -E "^decode|rror" | cut -c1-50
done
cd "$OUT" && tar czf /tmp/s23c6.tgz . && rm -rf "$OUT"/* && mv /tmp/s23c6.tgz "$OUT/"
