#!/usr/bin/env bash
# Run ap, fourth call: which int8 GEMV families pay, by switch (a probe
# build of a4dd53c: ETWGPU_PROBE_I8 lists the families allowed: plain
# (down, head), swiglu, qkv, attn), both shapes at context 128.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=/tmp/bins
mkdir -p $B && tar xzf .xfer/s20d/bins.tgz -C $B
timeout 60 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 128 --steps 64 --repeats 1 > /dev/null 2>&1
for c in base ps psq psa p s all base2 ps2; do
  e="ETWGPU_INT8_ACTIVATIONS=1"
  case $c in
  base*) e="ETWGPU_INT8_ACTIVATIONS=0" ;;
  ps|ps2) e="$e ETWGPU_PROBE_I8=plain,swiglu" ;;
  psq) e="$e ETWGPU_PROBE_I8=plain,swiglu,qkv" ;;
  psa) e="$e ETWGPU_PROBE_I8=plain,swiglu,attn" ;;
  p) e="$e ETWGPU_PROBE_I8=plain" ;;
  s) e="$e ETWGPU_PROBE_I8=swiglu" ;;
  esac
  echo "== $c: $e"
  env $e timeout 40 $B/llm_bench --model 1b --weights q4 --prompts 16 --contexts 128 --steps 64 --repeats 3 \
    --json "$OUT/1b_$c.json" 2>&1 | grep -E "^decode" | head -1
  env $e timeout 40 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 128 --steps 64 --repeats 3 \
    --json "$OUT/sm_$c.json" 2>&1 | grep -E "^decode" | head -1
done
cd "$OUT" && tar czf /tmp/s20c4.tgz . && rm -rf "$OUT"/* && mv /tmp/s20c4.tgz "$OUT/"
