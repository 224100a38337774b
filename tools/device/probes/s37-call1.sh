#!/usr/bin/env bash
# Run bp (prepared in session 37, which had no device): the RMS norm
# inside the float QKV and SwiGLU decode GEMVs and the memory plan that
# keeps the arenas at decode (new, 40af30e or later), against 7d48003
# (old). Build first: `bash tools/device/probes/s37-build.sh` (old/, new/
# into .xfer/s37), then carry .gl and .xfer/s37. The first argument: the
# seconds the call may take (default 575). One $OUT/bp.tgz:
#  1. goldens of new/etwgpu at the default (the normed float GEMVs run in
#     the float32 and float16 Llama fixtures' decode calls);
#  2. cmp/: SmolLM2 fp32 decode at 32 (the whole attention in the float
#     GEMV) and 128 (the split route, its combine in the GEMV), old, new,
#     old, new; then SmolLM2 and 1B 4-bit decode at 128, old, new, old,
#     new (the arenas kept);
#  3. stream/: the stream bench's f32 rows (`ETWGPU_BENCH_LARGE=1`, the
#     1B shapes), old then new, each shape per dispatch and in one pass
#     (session 36's s36-call2b, with the refactored plain kernels beside);
#  4. the goldens at `mixed` and `f16`, then final/ (`run.sh etwgpu` and
#     the PyTorch peers with new/) if the time left covers them.
set -u
source tools/device/probes/lib.sh
probe_deadline "${1:-575}"
probe_gl
BN=/tmp/b/s37
probe_unpack .xfer/s37 "$BN"
mkdir -p "$OUT/cmp" "$OUT/stream" .device
probe_gpu
probe_warm "$BN/new/llm_bench"
cp "$BN/new/etwgpu" "$BN/new/llm_bench" .device/
echo "== goldens"
timeout 90 python3 tools/device/goldens.py .device/etwgpu test_data/fixtures /tmp/gold-default \
  > "$OUT/goldens_default.txt" 2>&1
echo "default $(grep -cE ' pass ' "$OUT/goldens_default.txt") pass"; grep -E " fail|FAIL" "$OUT/goldens_default.txt" | head -5
dec() { # NAME BUILD MODEL WEIGHTS [CONTEXTS]
  if [ "$(probe_left)" -lt 30 ]; then echo "skipped $1: $(probe_left) s left"; return; fi
  echo "== $3 $4 decode $1"
  timeout 40 "$BN/$2/llm_bench" --model "$3" --weights "$4" --prompts 16 --contexts "${5:-128}" --steps 64 --repeats 1 \
    --json "$OUT/cmp/dec_$1.json" 2>&1 | grep -E "^decode|at position 0: .* profiled per dispatch|rror" | cut -c1-70
}
for r in 1 2; do dec "fp_old$r" old smollm2 fp32 32,128; dec "fp_new$r" new smollm2 fp32 32,128; done
dec sq_old1 old smollm2 q4; dec sq_new1 new smollm2 q4; dec sq_old2 old smollm2 q4; dec sq_new2 new smollm2 q4
dec b_old1 old 1b q4; dec b_new1 new 1b q4; dec b_old2 old 1b q4; dec b_new2 new 1b q4
for b in old new; do
  if [ "$(probe_left)" -lt 60 ]; then echo "skipped stream $b: $(probe_left) s left"; continue; fi
  echo "== stream bench, $b"
  ETWGPU_FIXTURES=$PWD/test_data/fixtures ETWGPU_BENCH_LARGE=1 timeout 90 "$BN/$b/runtime-bench" --bench "stream f32" > "$OUT/stream/$b.txt" 2>&1
  grep -E "^stream|copy bandwidth:" "$OUT/stream/$b.txt"
done
if [ "$(probe_left)" -ge 200 ]; then
  OUT="$OUT" timeout 200 bash tools/device/run.sh coop > /dev/null 2>&1
  for p in mixed f16; do
    echo "$p $(grep -cE ' pass ' "$OUT/goldens_$p.txt") pass"; grep -E " fail|FAIL" "$OUT/goldens_$p.txt" | head -5
  done
else echo "skipped coop goldens: $(probe_left) s left"; fi
probe_part etwgpu 120
probe_peers
probe_part extra 55
python3 tools/device/report.py "$OUT/final" > "$OUT/final/table.md" 2>&1
probe_pack bp
ls "$OUT"
