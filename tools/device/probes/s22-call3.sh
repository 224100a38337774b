#!/usr/bin/env bash
# Run ar, third call: what a one-shot `etwgpu generate` carries that a
# warmed llm_bench cell does not. The synthetic SmolLM2 4-bit shape saved
# by llm_bench, `etwgpu generate` of 64 and 256 tokens from 4 tokens:
# (a) from an idle GPU (after 4 s of sleep), (b) right after 3 s of GPU
# work (llm_bench's prefill cells), with the SM clock sampled every 20 ms
# throughout (nvidia-smi), so a clock ramp shows against each run's window.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=/tmp/bins
mkdir -p $B && tar xzf .xfer/s22c/bins.tgz -C $B
$B/llm_bench --model smollm2 --weights q4 --save /tmp/sm.pte --build-only > /dev/null 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader -lms 20 > "$OUT/clocks.csv" 2>&1 &
SMI=$!
gen() { # label tokens
  echo "== $1 $(date +%s.%N)" >> "$OUT/marks.txt"
  $B/etwgpu generate --model /tmp/sm.pte --tokens 1,2,3,4 --max-tokens $2 > "$OUT/gen_$1.txt" 2>&1
  echo "== end $1 $(date +%s.%N)" >> "$OUT/marks.txt"
  grep -iE "decode|tok/s" "$OUT/gen_$1.txt" | head -3 | sed "s/^/$1: /"
}
busy() { timeout 30 $B/llm_bench --model smollm2 --weights q4 --prompts 512 --contexts 16 --steps 8 --repeats 20 > /dev/null 2>&1; }
for r in 1 2; do
  sleep 4; gen idle64_$r 64
  sleep 4; gen idle256_$r 256
  busy; gen hot64_$r 64
  busy; gen hot256_$r 256
done
kill $SMI
cd "$OUT" && tar czf /tmp/s22c3.tgz . && rm -rf "$OUT"/* && mv /tmp/s22c3.tgz "$OUT/"
