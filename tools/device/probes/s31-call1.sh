#!/usr/bin/env bash
# Run ba, one call for what two were prepared to do (run az's fourth call,
# `s30-call4.sh`, then the table from the new build; device time was
# short: five starts had failed this session). Carry .gl and
# .xfer/s31c: one xz tarball of `coop_probe` (branch q4-large-128x256),
# `llm_bench_old` (26668a7, the table's build), and `etwgpu` and
# `llm_bench_new` (branch q4-merge: main with the 128 x 256 4-bit large
# tile). Steps, each file written as it finishes:
#  1. `coop_probe routed`: every shipped GEMM route through the runtime at
#     ragged shapes against a CPU reference (M = 1,100 takes the new tile);
#  2. the 1B 4-bit prefill at the default, new against old, one round;
#  3. `coop_probe q4 new` (the shipped kernel against the template's);
#  4. only if routed passed: the Performance table from the new build
#     (`run.sh etwgpu extra coop f32`), then its prefill profiled at 512.
set -u
source tools/device/probes/s31-unpack.sh
mkdir -p .device /tmp/o2
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv | tee "$REAL/gpu.txt" /tmp/o2/gpu.txt
echo "== routed"
timeout 120 $B/coop_probe routed > "$REAL/routed.txt" 2>&1
rc=$?
echo "exit $rc"; grep -E "FAIL|routed check" "$REAL/routed.txt" | head -20
grep -E "q4_gemm_coop_large" "$REAL/routed.txt" | head -8
for b in new old; do
  echo "== prefill $b"
  timeout 60 $B/llm_bench_$b --model 1b --weights q4 --prompts 512,2048,4096 --repeats 3 \
    --json "$REAL/pf_$b.json" 2>&1 | grep -E "^prefill|rror" | cut -c1-48
done
echo "== q4 timing"
timeout 60 $B/coop_probe q4 new > "$REAL/coop_probe_q4.txt" 2>&1
grep -E "TFLOP/s  " "$REAL/coop_probe_q4.txt"
grep -E "coop_large" "$REAL/coop_probe_q4.txt" | grep "checks runtime"
if [ "$rc" != 0 ] || grep -q FAIL "$REAL/routed.txt"; then
  echo "routed did not pass: no table"; exit 0
fi
cp $B/etwgpu .device/etwgpu
cp $B/llm_bench_new .device/llm_bench
# One part at a time, the tarball rewritten after each, so a call cut
# short at its limit still brings back the parts that finished.
for part in etwgpu extra coop f32; do
  OUT=/tmp/o2 bash tools/device/run.sh $part
  (cd /tmp/o2 && tar czf "$REAL/table.tgz" .)
done
echo "== prefill profiled at 512"
timeout 40 .device/llm_bench --model 1b --weights q4 --prompts 512 --contexts 128 --steps 8 \
  --repeats 1 --json /tmp/o2/profile512_1b_q4.json 2>&1 | grep -E "one call of 512" -A8 | head -10
(cd /tmp/o2 && tar czf "$REAL/table.tgz" .)
