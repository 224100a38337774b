#!/usr/bin/env bash
# Run ap, third call (a4dd53c): every decode GEMV int8 with the option;
# default against int8, alternated; int8 with the trusted shaders; SmolLM2
# int8 with the GEMV attention route.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=/tmp/bins
mkdir -p $B && tar xzf .xfer/s20c/bins.tgz -C $B
timeout 60 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 128 --steps 64 --repeats 1 > /dev/null 2>&1
for c in base int8 base2 int82 int8trusted int8gemv; do
  e=""
  case $c in
  int8trusted) e="ETWGPU_INT8_ACTIVATIONS=1 ETWGPU_TRUSTED_SHADERS=1" ;;
  int8gemv) e="ETWGPU_INT8_ACTIVATIONS=1 ETWGPU_GEMV_ATTENTION=1" ;;
  int8*) e="ETWGPU_INT8_ACTIVATIONS=1" ;;
  esac
  echo "== $c: $e"
  if [ $c != int8gemv ]; then
    env $e timeout 60 $B/llm_bench --model 1b --weights q4 --prompts 16 --contexts 128,2048 --steps 64 --repeats 3 \
      --json "$OUT/1b_$c.json" 2>&1 | grep -E "^decode|dispatches" | head -3
  fi
  env $e timeout 50 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 32,128 --steps 64 --repeats 3 \
    --json "$OUT/sm_$c.json" 2>&1 | grep -E "^decode|dispatches" | head -3
done
cd "$OUT" && tar czf /tmp/s20c3.tgz . && rm -rf "$OUT"/* && mv /tmp/s20c3.tgz "$OUT/"
