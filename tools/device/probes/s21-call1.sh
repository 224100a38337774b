#!/usr/bin/env bash
# Run aq, first and second calls (XFER: the bins directory under .xfer): the QKV projection inside the decode attention's
# split partials (q4_gemv_qkv_sdpa.wgsl, on by default) against the route
# with it apart (ETWGPU_QKV_ATTENTION=0, the previous build's route),
# alternated, on the SmolLM2 shape (32 / 128 / 256) and the 1B shape (128 /
# 2,048); then every fixture's goldens with the new build.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=/tmp/bins
mkdir -p $B && tar xzf .xfer/${XFER:-s21a}/bins.tgz -C $B
timeout 60 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 128 --steps 64 --repeats 1 > /dev/null 2>&1
for c in on off on2 off2; do
  e="ETWGPU_QKV_ATTENTION=1"
  case $c in
  off*) e="ETWGPU_QKV_ATTENTION=0" ;;
  esac
  echo "== $c: $e"
  env $e timeout 50 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 32,128,256 --steps 64 --repeats 3 \
    --json "$OUT/sm_$c.json" 2>&1 | grep -E "^decode|dispatches" | head -5
  env $e timeout 60 $B/llm_bench --model 1b --weights q4 --prompts 16 --contexts 128,2048 --steps 64 --repeats 3 \
    --json "$OUT/1b_$c.json" 2>&1 | grep -E "^decode|dispatches" | head -5
done
timeout 90 python3 tools/device/goldens.py $B/etwgpu test_data/fixtures /tmp/gold > "$OUT/goldens.txt" 2>&1
tail -3 "$OUT/goldens.txt"
cd "$OUT" && tar czf /tmp/s21c1.tgz . && rm -rf "$OUT"/* && mv /tmp/s21c1.tgz "$OUT/"
