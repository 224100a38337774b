#!/usr/bin/env bash
# Run aq, sixth and seventh calls (XFER: the bins directory under .xfer): the decode attention's route by live context (up to
# 80 keys), with the chain of each route kept (parked) so that a crossing
# swaps chains after the first: SmolLM2's shape, 16-step cells at 16 to
# 128 and 64-step cells from 16 and 128, the default against the split
# route (ETWGPU_GEMV_ATTENTION=0), alternated; every fixture's goldens.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=/tmp/bins
mkdir -p $B && tar xzf .xfer/${XFER:-s21f}/bins.tgz -C $B
timeout 60 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 128 --steps 64 --repeats 1 > /dev/null 2>&1
for c in auto off auto2 off2; do
  e="ETWGPU_GEMV_ATTENTION="
  case $c in
  off*) e="ETWGPU_GEMV_ATTENTION=0" ;;
  esac
  echo "== $c: $e"
  env $e timeout 60 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 16,32,48,64,96,128 --steps 16 \
    --repeats 5 --json "$OUT/sm16_$c.json" 2>&1 | grep -E "^decode" | cut -c1-40
  env $e timeout 60 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 16,128 --steps 64 \
    --repeats 5 --json "$OUT/sm64_$c.json" 2>&1 | grep -E "^decode" | cut -c1-40
done
timeout 90 python3 tools/device/goldens.py $B/etwgpu test_data/fixtures /tmp/gold > "$OUT/goldens.txt" 2>&1
grep -v " pass " "$OUT/goldens.txt" | tail -5; grep -c " pass " "$OUT/goldens.txt"
cd "$OUT" && tar czf /tmp/s21c6.tgz . && rm -rf "$OUT"/* && mv /tmp/s21c6.tgz "$OUT/"
