#!/usr/bin/env bash
# Run aq, fifth call: the decode attention's route by live context (the
# attention inside the O projection's GEMV up to 64 keys by default):
# SmolLM2's shape at short contexts, 16 steps a cell, the default against
# the route forced off (ETWGPU_GEMV_ATTENTION=0) and on at every position
# (=1), alternated; the 1B at 128 (which the route does not take); every
# fixture's goldens (the tiny Llamas' decode calls now take the route).
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=/tmp/bins
mkdir -p $B && tar xzf .xfer/s21e/bins.tgz -C $B
timeout 60 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 128 --steps 64 --repeats 1 > /dev/null 2>&1
for c in auto off on auto2 off2 on2; do
  e="ETWGPU_GEMV_ATTENTION="
  case $c in
  off*) e="ETWGPU_GEMV_ATTENTION=0" ;;
  on*) e="ETWGPU_GEMV_ATTENTION=1" ;;
  esac
  echo "== $c: $e"
  env $e timeout 60 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 16,32,48,64,96,128 --steps 16 \
    --repeats 5 --json "$OUT/sm_$c.json" 2>&1 | grep -E "^decode" | cut -c1-40
done
for c in auto off; do
  e="ETWGPU_GEMV_ATTENTION="
  case $c in
  off*) e="ETWGPU_GEMV_ATTENTION=0" ;;
  esac
  echo "== 1b $c: $e"
  env $e timeout 60 $B/llm_bench --model 1b --weights q4 --prompts 16 --contexts 128 --steps 64 --repeats 3 \
    --json "$OUT/1b_$c.json" 2>&1 | grep -E "^decode" | cut -c1-40
done
timeout 90 python3 tools/device/goldens.py $B/etwgpu test_data/fixtures /tmp/gold > "$OUT/goldens.txt" 2>&1
grep -v " pass " "$OUT/goldens.txt" | tail -5; grep -c " pass " "$OUT/goldens.txt"
cd "$OUT" && tar czf /tmp/s21c5.tgz . && rm -rf "$OUT"/* && mv /tmp/s21c5.tgz "$OUT/"
