#!/usr/bin/env bash
# Run az, fourth call: the 4-bit linear's large tile as 128 x 256 in 4 x 4
# fragments (q4_gemm_coop_large.wgsl on the branch q4-large-128x256, never
# run on a GPU): `coop_probe routed` (every shipped GEMM route through the
# runtime at ragged shapes against a CPU reference; M = 1,100 takes the new
# tile), the 1B 4-bit prefill at the default precision, this build (new)
# against the table's (old, 26668a7), then `coop_probe q4 new` (the shipped
# kernel against the template's tilings). `short` (for little device time
# left, ~180 s of commands): one round of the prefill, at 2,048 and 4,096,
# and shorter limits. Carry .gl and .xfer/s30b. At most seven files, each
# written as it finishes (a call stopped at its limit still brings back
# what it left).
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export XDG_RUNTIME_DIR=/tmp
OUT=${OUT:-/tmp/out}
B=.xfer/s30b
mkdir -p "$OUT"
if [ "${1:-}" = short ]; then rounds=1 prompts=2048,4096 lim=40; else rounds="1 2" prompts=512,2048,4096 lim=60; fi
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > "$OUT/gpu.txt" 2>&1
echo "== routed"
timeout 120 $B/coop_probe routed > "$OUT/routed.txt" 2>&1
echo "exit $?"; grep -E "FAIL|routed check" "$OUT/routed.txt" | head -20
grep -E "q4_gemm_coop_large" "$OUT/routed.txt" | head -8
for r in $rounds; do
  for b in new old; do
    echo "== $b $r"
    timeout $lim $B/llm_bench_$b --model 1b --weights q4 --prompts $prompts --repeats 3 \
      --json "$OUT/pf_${b}_$r.json" 2>&1 | grep -E "^prefill|rror" | cut -c1-48
  done
done
echo "== q4 timing"
timeout 60 $B/coop_probe q4 new > "$OUT/coop_probe_q4.txt" 2>&1
grep -E "TFLOP/s  " "$OUT/coop_probe_q4.txt"
grep -E "coop_large" "$OUT/coop_probe_q4.txt" | grep "checks runtime"
