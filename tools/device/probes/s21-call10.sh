#!/usr/bin/env bash
# Run aq, tenth call: the normed QKV and SwiGLU GEMVs' float and int8
# forms sharing one body each (common/q4_gemv_{qkv,swiglu}_norm_body.wgsl),
# against c51ba7d's llm_bench, alternated: decode at 128, default and int8
# activations, both shapes.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=/tmp/bins
mkdir -p $B && tar xzf .xfer/s21i/bins.tgz -C $B
timeout 60 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 128 --steps 64 --repeats 1 > /dev/null 2>&1
for c in new base new2 base2; do
  bin=$B/llm_bench
  case $c in
  base*) bin=$B/llm_bench_base ;;
  esac
  for e in ETWGPU_INT8_ACTIVATIONS=0 ETWGPU_INT8_ACTIVATIONS=1; do
    echo "== $c $e"
    for m in 1b smollm2; do
      env $e timeout 60 $bin --model $m --weights q4 --prompts 16 --contexts 128 --steps 64 --repeats 3 \
        --json "$OUT/${m}_${c}_${e#*=}.json" 2>&1 | grep -E "^decode" | cut -c1-40
    done
  done
done
cd "$OUT" && tar czf /tmp/s21c10.tgz . && rm -rf "$OUT"/* && mv /tmp/s21c10.tgz "$OUT/"
