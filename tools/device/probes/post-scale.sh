#!/usr/bin/env bash
# Run an, third call: the normed 4-bit GEMVs with the norm's scale applied
# after the dot products (`rms_prologue.wgsl`: one barrier before the
# weight loop, the squares' tree after it), `.device/llm_bench`, against
# the previous build (`.device/llm_bench_old`, 9ebd8d1), alternated; decode
# only; then the goldens with the new `etwgpu`.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
timeout 60 .device/llm_bench --model smollm2 --weights q4 --contexts 128 --steps 64 --repeats 1 > /dev/null 2>&1
for c in old new old2 new2; do
  bin=.device/llm_bench; case $c in old*) bin=.device/llm_bench_old ;; esac
  echo "== $c"
  timeout 60 $bin --model 1b --weights q4 --contexts 128,2048 --steps 64 --repeats 3 \
    --json "$OUT/1b_$c.json" 2>&1 | grep -E "^decode|q4_gemv" | head -12
  timeout 40 $bin --model smollm2 --weights q4 --contexts 32,128 --steps 64 --repeats 3 \
    --json "$OUT/sm_$c.json" 2>&1 | grep -E "^decode" | head -4
done
timeout 90 python3 tools/device/goldens.py .device/etwgpu test_data/fixtures /tmp/gold > "$OUT/goldens.txt" 2>&1
echo "goldens: $(grep -c ' pass ' "$OUT/goldens.txt") pass of $(wc -l < "$OUT/goldens.txt")"
