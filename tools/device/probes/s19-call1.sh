#!/usr/bin/env bash
# Run ao, first call: the norm's scale after the dot products (post-scale,
# `llm_bench_probe` with no switch) against the previous build
# (`llm_bench_old`, 3771b2a), alternated, and three probe switches of the
# same build (timing only): ETWGPU_PROBE_PATCH=none (no per-step uniform
# write: results wrong), =split (a write per changed dispatch instead of
# one span), =group (the position-dependent uniforms laid out last, one
# short span), ETWGPU_PROBE_ARGMAX_IN_PASS=1 (the argmax's two dispatches in
# the chain's pass); and ETWGPU_TRUSTED_SHADERS=1 (the opt-in unchecked
# kernels). Then step timelines, the goldens with the new build,
# and the 8da4w criterion bench at the 1B shapes. The switches belonged to
# a throwaway build (`llm_bench_probe`); they are not in the tree.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=/tmp/bins
mkdir -p $B && tar xzf .xfer/s19/bins.tgz -C $B
timeout 60 $B/llm_bench_old --model smollm2 --weights q4 --prompts 16 --contexts 128 --steps 64 --repeats 1 > /dev/null 2>&1
for c in old new none split group argmax trusted old2 new2 none2 split2 group2 argmax2 trusted2; do
  bin=$B/llm_bench_probe; e=""
  case $c in
  old*) bin=$B/llm_bench_old ;;
  none*) e="ETWGPU_PROBE_PATCH=none" ;;
  split*) e="ETWGPU_PROBE_PATCH=split" ;;
  group*) e="ETWGPU_PROBE_PATCH=group" ;;
  argmax*) e="ETWGPU_PROBE_ARGMAX_IN_PASS=1" ;;
  trusted*) e="ETWGPU_TRUSTED_SHADERS=1" ;;
  esac
  echo "== $c: $e"
  env $e timeout 60 $bin --model 1b --weights q4 --prompts 16 --contexts 128,2048 --steps 64 --repeats 3 \
    --json "$OUT/1b_$c.json" 2>&1 | grep -E "^decode|dispatches" | head -4
  env $e timeout 40 $bin --model smollm2 --weights q4 --prompts 16 --contexts 32,128 --steps 64 --repeats 3 \
    --json "$OUT/sm_$c.json" 2>&1 | grep -E "^decode" | head -4
done
for c in new none group; do
  bin=$B/llm_bench_probe; e=""
  case $c in
  old) bin=$B/llm_bench_old ;;
  none) e="ETWGPU_PROBE_PATCH=none" ;;
  split) e="ETWGPU_PROBE_PATCH=split" ;;
  group) e="ETWGPU_PROBE_PATCH=group" ;;
  esac
  echo "== timeline $c: $e"
  env $e timeout 60 $bin --model smollm2 --weights q4 --prompts 16 --contexts 128 --steps 64 --repeats 1 --timeline \
    --json "$OUT/tl_sm_$c.json" 2>&1 | grep -E "^timeline" | head -2
  env $e timeout 60 $bin --model 1b --weights q4 --prompts 16 --contexts 128 --steps 64 --repeats 1 --timeline \
    --json "$OUT/tl_1b_$c.json" 2>&1 | grep -E "^timeline" | head -2
done
timeout 150 python3 tools/device/goldens.py $B/etwgpu test_data/fixtures /tmp/gold > "$OUT/goldens.txt" 2>&1
echo "goldens: $(grep -c ' pass ' "$OUT/goldens.txt") pass of $(wc -l < "$OUT/goldens.txt")"
ETWGPU_BENCH_LARGE=1 timeout 100 $B/runtime-bench --bench 8da4w --warm-up-time 1 --measurement-time 2 > "$OUT/bench_8da4w.txt" 2>&1
grep -E "8da4w|time:" "$OUT/bench_8da4w.txt" | head -20
cd "$OUT" && tar czf /tmp/s19c1.tgz . && rm -rf "$OUT"/* && mv /tmp/s19c1.tgz "$OUT/"
