#!/usr/bin/env bash
# Run ao, second call: the build to land (post-scale, the uniforms of the
# next 32 positions written ahead, the argmax in the chain's pass) against
# 3771b2a (`llm_bench_old`), alternated, with the window off
# (ETWGPU_POSITION_WINDOW=0) and with the opt-in trusted shaders
# (ETWGPU_TRUSTED_SHADERS=1); step timelines; goldens with the default and
# the trusted path.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=/tmp/bins
mkdir -p $B && tar xzf .xfer/s19b/bins.tgz -C $B
timeout 60 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 128 --steps 64 --repeats 1 > /dev/null 2>&1
for c in old new nowin trusted old2 new2 nowin2 trusted2; do
  bin=$B/llm_bench; e=""
  case $c in
  old*) bin=$B/llm_bench_old ;;
  nowin*) e="ETWGPU_POSITION_WINDOW=0" ;;
  trusted*) e="ETWGPU_TRUSTED_SHADERS=1" ;;
  esac
  echo "== $c: $e"
  env $e timeout 60 $bin --model 1b --weights q4 --prompts 16 --contexts 128,2048 --steps 64 --repeats 3 \
    --json "$OUT/1b_$c.json" 2>&1 | grep -E "^decode|dispatches" | head -4
  env $e timeout 40 $bin --model smollm2 --weights q4 --prompts 16 --contexts 32,128 --steps 64 --repeats 3 \
    --json "$OUT/sm_$c.json" 2>&1 | grep -E "^decode" | head -4
done
for c in new nowin; do
  e=""; [ $c = nowin ] && e="ETWGPU_POSITION_WINDOW=0"
  echo "== timeline $c: $e"
  env $e timeout 60 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 128 --steps 64 --repeats 1 --timeline \
    --json "$OUT/tl_sm_$c.json" 2>&1 | grep -E "^timeline" | head -2
  env $e timeout 60 $B/llm_bench --model 1b --weights q4 --prompts 16 --contexts 128 --steps 64 --repeats 1 --timeline \
    --json "$OUT/tl_1b_$c.json" 2>&1 | grep -E "^timeline" | head -2
done
timeout 100 python3 tools/device/goldens.py $B/etwgpu test_data/fixtures /tmp/gold > "$OUT/goldens.txt" 2>&1
echo "goldens: $(grep -c ' pass ' "$OUT/goldens.txt") pass of $(wc -l < "$OUT/goldens.txt")"
ETWGPU_TRUSTED_SHADERS=1 timeout 100 python3 tools/device/goldens.py $B/etwgpu test_data/fixtures /tmp/gold2 > "$OUT/goldens_trusted.txt" 2>&1
echo "goldens trusted: $(grep -c ' pass ' "$OUT/goldens_trusted.txt") pass of $(wc -l < "$OUT/goldens_trusted.txt")"
cd "$OUT" && tar czf /tmp/s19c2.tgz . && rm -rf "$OUT"/* && mv /tmp/s19c2.tgz "$OUT/"
