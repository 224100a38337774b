#!/usr/bin/env bash
# Run az, fourth call: the 4-bit linear's large tile as 128 x 256 in 4 x 4
# fragments (q4_gemm_coop_large.wgsl, never run on a GPU): `coop_probe
# routed` (every shipped GEMM route through the runtime at ragged shapes
# against a CPU reference; M = 1,100 takes the new tile), `coop_probe q4
# new` (the shipped kernel against the template's tilings), then the 1B
# 4-bit prefill at the default precision, this build (new) against the
# table's (old, 26668a7), alternated. Carry .gl and .xfer/s30b.
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export XDG_RUNTIME_DIR=/tmp
OUT=${OUT:-/tmp/out}
B=.xfer/s30b
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > "$OUT/gpu.txt" 2>&1
echo "== routed"
timeout 150 $B/coop_probe routed > "$OUT/routed.txt" 2>&1
echo "exit $?"; grep -E "FAIL|routed check" "$OUT/routed.txt" | head -20
echo "== q4 timing"
timeout 90 $B/coop_probe q4 new > "$OUT/coop_probe_q4.txt" 2>&1
grep -E "TFLOP/s  " "$OUT/coop_probe_q4.txt"
grep -E "coop_large" "$OUT/coop_probe_q4.txt" | grep "checks runtime"
for r in 1 2; do
  for b in old new; do
    echo "== $b $r"
    timeout 60 $B/llm_bench_$b --model 1b --weights q4 --prompts 512,2048,4096 --repeats 3 \
      --json "$OUT/pf_${b}_$r.json" 2>&1 | grep -E "^prefill|rror" | cut -c1-48
  done
done
# Seven files, under the eight a call brings back, and each written as
# it finishes (a call stopped at its limit still brings back what it left).
