#!/usr/bin/env bash
# Run ap, first call (build 8f4d548 plus the gemv_probe int8 modes): the
# 4-bit decode GEMV with x rounded to int8 and integer dot products
# (gemv_probe modes 10, 11) against the shipped kernel at the 1B shapes;
# the SmolLM2 decode routes (default split route, the attention inside the
# O projection's GEMV), alternated.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=/tmp/bins
mkdir -p $B && tar xzf .xfer/s20a/bins.tgz -C $B
for s in "2048 2048" "8192 2048" "2048 8192" "128256 2048"; do
  set -- $s
  timeout 90 $B/gemv_probe $1 $2 > "$OUT/probe_$1x$2.txt" 2>&1
  grep -E "mode (0|3|9|10|11) " "$OUT/probe_$1x$2.txt" | grep "checks on" | head -20
done
timeout 60 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 128 --steps 64 --repeats 1 > /dev/null 2>&1
for c in base gemv base2 gemv2; do
  e=""
  case $c in
  gemv*) e="ETWGPU_GEMV_ATTENTION=1" ;;
  esac
  echo "== $c: $e"
  env $e timeout 50 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 32,128,256 --steps 64 --repeats 3 \
    --json "$OUT/sm_$c.json" 2>&1 | grep -E "^decode|dispatches" | head -5
done
cd "$OUT" && tar czf /tmp/s20c1.tgz . && rm -rf "$OUT"/* && mv /tmp/s20c1.tgz "$OUT/"
