#!/usr/bin/env bash
# Run ao, third call (the landed build, 796ff16): where the decode routes
# stand for the next session's SmolLM2 work. The SmolLM2 shape at 32 /
# 128 / 256 and the 1B at 128: default, the attention inside the O
# projection's GEMV (ETWGPU_GEMV_ATTENTION=1, one dispatch fewer a layer),
# both with the trusted shaders; alternated.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=/tmp/bins
mkdir -p $B && tar xzf .xfer/s19c/bins.tgz -C $B
timeout 60 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 128 --steps 64 --repeats 1 > /dev/null 2>&1
for c in base gemv trusted gemvtrusted base2 gemv2; do
  e=""
  case $c in
  gemvtrusted*) e="ETWGPU_GEMV_ATTENTION=1 ETWGPU_TRUSTED_SHADERS=1" ;;
  gemv*) e="ETWGPU_GEMV_ATTENTION=1" ;;
  trusted*) e="ETWGPU_TRUSTED_SHADERS=1" ;;
  esac
  echo "== $c: $e"
  env $e timeout 40 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 32,128,256 --steps 64 --repeats 3 \
    --json "$OUT/sm_$c.json" 2>&1 | grep -E "^decode|dispatches" | head -5
  env $e timeout 40 $B/llm_bench --model 1b --weights q4 --prompts 16 --contexts 128 --steps 64 --repeats 3 \
    --json "$OUT/1b_$c.json" 2>&1 | grep -E "^decode|dispatches" | head -3
done
cd "$OUT" && tar czf /tmp/s19c3.tgz . && rm -rf "$OUT"/* && mv /tmp/s19c3.tgz "$OUT/"
