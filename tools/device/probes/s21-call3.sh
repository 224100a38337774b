#!/usr/bin/env bash
# Run aq, third and fourth calls (XFER: the bins directory under .xfer): the split partials reading the call's new key and
# value from their inputs instead of back from the caches (no storage
# barrier before the keys), against the build before it (llm_bench_base,
# a026ec8), alternated, SmolLM2 at 32 / 128 / 256 and the 1B at 128 /
# 2,048; then every fixture's goldens with the new build.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=/tmp/bins
mkdir -p $B && tar xzf .xfer/${XFER:-s21c}/bins.tgz -C $B
timeout 60 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 128 --steps 64 --repeats 1 > /dev/null 2>&1
for c in new base new2 base2; do
  bin=$B/llm_bench
  case $c in
  base*) bin=$B/llm_bench_base ;;
  esac
  echo "== $c"
  timeout 50 $bin --model smollm2 --weights q4 --prompts 16 --contexts 32,128,256 --steps 64 --repeats 3 \
    --json "$OUT/sm_$c.json" 2>&1 | grep -E "^decode" | cut -c1-40
  timeout 60 $bin --model 1b --weights q4 --prompts 16 --contexts 128,2048 --steps 64 --repeats 3 \
    --json "$OUT/1b_$c.json" 2>&1 | grep -E "^decode" | cut -c1-40
done
timeout 90 python3 tools/device/goldens.py $B/etwgpu test_data/fixtures /tmp/gold > "$OUT/goldens.txt" 2>&1
tail -2 "$OUT/goldens.txt"; grep -c pass "$OUT/goldens.txt"
cd "$OUT" && tar czf /tmp/s21c3.tgz . && rm -rf "$OUT"/* && mv /tmp/s21c3.tgz "$OUT/"
