#!/usr/bin/env bash
# Run by (prepared in session 38): (1) the stream bench heated by copies
# (run bx did not run: its machine was taken back), base's full rows with
# the clocks logged; (2) decode at 128, 1B and SmolLM2 4-bit: base by
# default, base with the shipped int8 activations, i16 (the 16-bit split)
# with the option, alternated twice. Build first: `s39-build.sh`. Carry
# .gl and .xfer/s39. One $OUT/by.tgz.
set -u
source tools/device/probes/lib.sh
probe_deadline "${1:-400}"
probe_gl
probe_unpack .xfer/s39 /tmp/b/s39
probe_gpu
probe_clocks
mkdir -p "$OUT/stream" "$OUT/dec"
echo "== stream bench, base"
ETWGPU_FIXTURES=$PWD/test_data/fixtures ETWGPU_BENCH_LARGE=1 timeout 120 /tmp/b/s39/base/runtime-bench --bench stream \
  2>&1 | probe_stamp > "$OUT/stream/base.txt"
grep -E "one pass|copy bandwidth:" "$OUT/stream/base.txt" | cut -c20-150
dec() { # NAME BUILD MODEL INT8
  if [ "$(probe_left)" -lt 40 ]; then echo "skipped $1: $(probe_left) s left"; return; fi
  echo "== $1"
  ETWGPU_INT8_ACTIVATIONS=$4 timeout 60 "/tmp/b/s39/$2/llm_bench" --model "$3" --weights q4 --prompts 16 --contexts 128 \
    --steps 64 --repeats 1 --json "$OUT/dec/$1.json" 2>&1 | probe_stamp | grep -E "^\S+ decode" | cut -c20-90
}
for r in 1 2; do
  for m in 1b smollm2; do
    dec "${m}_float$r" base $m 0; dec "${m}_int8$r" base $m 1; dec "${m}_i16$r" i16 $m 1
  done
done
probe_clocks_stop
probe_pack by
ls "$OUT"
