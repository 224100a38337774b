#!/usr/bin/env bash
# Run bo (prepared in session 35): the float decode GEMVs that keep loads
# in flight (3417969) and the slice floor of 1,024, against 2212242 (run
# bk's table). Build first: `bash tools/device/probes/s36-build.sh` (old/,
# new/, e/ into .xfer/s36), then carry .gl and .xfer/s36. The first
# argument: the seconds the call may take (default 575). One $OUT/bo.tgz:
#  1. goldens of new/etwgpu at the default (the new kernels run in every
#     float32 fixture's decode); at `mixed` and `f16` after part 3;
#  2. stream/: the stream bench (`ETWGPU_BENCH_LARGE=1`, the 1B shapes),
#     its f32 rows, old then new (old has no SwiGLU or QKV rows);
#  3. cmp/: SmolLM2 fp32 decode at 128, old, new, old, new; the 1B 4-bit
#     prefill at 256 / 512 / 1,024, new, e, new, e;
#  4. final/: `run.sh etwgpu` and the PyTorch peers with new/, if the time
#     left covers them.
set -u
source tools/device/probes/lib.sh
probe_deadline "${1:-575}"
probe_gl
BN=/tmp/b/s36
probe_unpack .xfer/s36 "$BN"
mkdir -p "$OUT/cmp" "$OUT/stream" .device
probe_gpu
probe_warm "$BN/new/llm_bench"
cp "$BN/new/etwgpu" "$BN/new/llm_bench" .device/
echo "== goldens"
timeout 90 python3 tools/device/goldens.py .device/etwgpu test_data/fixtures /tmp/gold-default \
  > "$OUT/goldens_default.txt" 2>&1
echo "default $(grep -cE ' pass ' "$OUT/goldens_default.txt") pass"; grep -E " fail|FAIL" "$OUT/goldens_default.txt" | head -5
for b in old new; do
  echo "== stream bench, $b"
  ETWGPU_FIXTURES=$PWD/test_data/fixtures ETWGPU_BENCH_LARGE=1 timeout 90 "$BN/$b/runtime-bench" --bench "stream f32" > "$OUT/stream/$b.txt" 2>&1
  grep -E "^stream|copy bandwidth:" "$OUT/stream/$b.txt"
done
dec() {
  if [ "$(probe_left)" -lt 30 ]; then echo "skipped $1: $(probe_left) s left"; return; fi
  echo "== smollm2 fp32 decode $1"
  timeout 40 "$BN/$2/llm_bench" --model smollm2 --weights fp32 --prompts 16 --contexts 128 --steps 64 --repeats 1 \
    --json "$OUT/cmp/dec_$1.json" 2>&1 | grep -E "^decode|rror" | cut -c1-70
}
dec old1 old; dec new1 new; dec old2 old; dec new2 new
cell() {
  if [ "$(probe_left)" -lt 30 ]; then echo "skipped $1: $(probe_left) s left"; return; fi
  echo "== prefill $1"
  timeout 40 "$BN/$2/llm_bench" --model 1b --weights q4 --prompts 256,512,1024 --contexts 128 --steps 4 \
    --repeats 5 --json "$OUT/cmp/pf_$1.json" 2>&1 | grep -E "^prefill|rror" | cut -c1-60
}
cell new1 new; cell e1 e; cell new2 new; cell e2 e
# The goldens at `mixed` and `f16` (the route required) after the timed
# parts: with few device-seconds left (session 36), the unmeasured kernels
# and the A/B come first.
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
probe_pack bo
ls "$OUT"
