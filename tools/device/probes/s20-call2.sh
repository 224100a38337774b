#!/usr/bin/env bash
# Run ap, second call (cbe7bf4): the int8-activation GEMVs. gemv_probe
# (mode 12 is the shipped q4_gemv_i8) at the 1B layer shapes and head,
# after a warm-up; then llm_bench on the 1B and SmolLM2 shapes with
# ETWGPU_INT8_ACTIVATIONS=1 against the default, alternated.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=/tmp/bins
mkdir -p $B && tar xzf .xfer/s20b/bins.tgz -C $B
timeout 60 $B/gemv_probe 2048 2048 > /dev/null 2>&1
for s in "2048 2048" "8192 2048" "2048 8192" "128256 2048"; do
  set -- $s
  timeout 90 $B/gemv_probe $1 $2 > "$OUT/probe_$1x$2.txt" 2>&1
  grep -E "mode (3|9|11|12) " "$OUT/probe_$1x$2.txt" | grep "checks on" | head -20
done
for c in base int8 base2 int82; do
  e=""
  case $c in
  int8*) e="ETWGPU_INT8_ACTIVATIONS=1" ;;
  esac
  echo "== $c: $e"
  env $e timeout 60 $B/llm_bench --model 1b --weights q4 --prompts 16 --contexts 128,2048 --steps 64 --repeats 3 \
    --json "$OUT/1b_$c.json" 2>&1 | grep -E "^decode|dispatches" | head -3
  env $e timeout 50 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 32,128 --steps 64 --repeats 3 \
    --json "$OUT/sm_$c.json" 2>&1 | grep -E "^decode|dispatches" | head -3
done
cd "$OUT" && tar czf /tmp/s20c2.tgz . && rm -rf "$OUT"/* && mv /tmp/s20c2.tgz "$OUT/"
