#!/usr/bin/env bash
# Run ay, the last top-1 call: `s27-top1.sh` (the SmolLM2 4-bit export's
# top-1 agreement with eager at f32, mixed and f16), then the real export
# timed by the CLI built at 73ff207 (`.device/etwgpu`, carried beside
# `.gl` and `.xfer/$1`): llama-bench rows, tg128 / tg256 from 0 and 128
# cached tokens, pp512, at f32 and mixed.
set -u
OUT=${OUT:-/tmp/out}
bash tools/device/probes/s27-top1.sh "$1"
for p in f32 mixed; do
  echo "== etwgpu bench, $p"
  ETWGPU_PRECISION=$p timeout 120 .device/etwgpu bench /tmp/sm/smollm2_q4.pte -p 512 -n 128,256 \
    -d 0,128 -r 3 2>&1 | tee "$OUT/bench_$p.md"
done
