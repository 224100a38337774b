#!/usr/bin/env bash
# Run az, fourth call trimmed to the device time left (~180 s of
# commands): the correctness check first (`coop_probe routed`), then the
# 1B prefill once each way (this build, new, against 26668a7's, old), then
# the kernel timing. Carry .gl and .xfer/s30b.
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export XDG_RUNTIME_DIR=/tmp
OUT=${OUT:-/tmp/out}
B=.xfer/s30b
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > "$OUT/gpu.txt" 2>&1
echo "== routed"
timeout 80 $B/coop_probe routed > "$OUT/routed.txt" 2>&1
echo "exit $?"; grep -E "FAIL|routed check" "$OUT/routed.txt" | head -20
grep -E "q4_gemm_coop_large" "$OUT/routed.txt" | head -8
for b in new old; do
  echo "== $b"
  timeout 40 $B/llm_bench_$b --model 1b --weights q4 --prompts 2048,4096 --repeats 3 \
    --json "$OUT/pf_${b}.json" 2>&1 | grep -E "^prefill|rror" | cut -c1-48
done
echo "== q4 timing"
timeout 45 $B/coop_probe q4 new > "$OUT/coop_probe_q4.txt" 2>&1
grep -E "TFLOP/s  " "$OUT/coop_probe_q4.txt"
