#!/usr/bin/env bash
# Run bh (prepared in session 33 for the next one): the Performance table
# with its PyTorch peers in the same call again (run bg's time ran out
# before them), and the dense f16 GEMM since the coalesced epilogue.
# Carry .gl and .xfer/s34a (`etwgpu`, `llm_bench`, `coop_probe` of main
# at 743e70a). The first argument: the seconds the call may take (default
# 560; less when the device budget is short). One $OUT/bh.tgz comes back:
#  1. final/: `run.sh etwgpu`, the peers, `run.sh coop`, `extra`, `f32`,
#     each only if the time left covers it (`probe_part`, `probe_peers`);
#  2. `coop_probe dense new` if 100 s are left (dense.txt).
set -u
source tools/device/probes/lib.sh
probe_deadline "${1:-560}"
probe_gl
probe_unpack .xfer/s34a /tmp/b/main
mkdir -p .device
cp /tmp/b/main/etwgpu /tmp/b/main/llm_bench .device/
probe_gpu
probe_warm .device/llm_bench
probe_part etwgpu 170
probe_peers
probe_part coop 30
probe_part extra 60
probe_part f32 35
python3 tools/device/report.py "$OUT/final" > "$OUT/final/table.md" 2>&1
if [ "$(probe_left)" -ge 100 ]; then
  echo "== dense ($(probe_left) s left)"
  timeout "$(probe_left)" /tmp/b/main/coop_probe dense new > "$OUT/dense.txt" 2>&1
  grep -E "shipped\)|best" -A1 "$OUT/dense.txt" | cut -c1-110 | head -12
else echo "skipped dense: $(probe_left) s left"; fi
probe_pack bh
ls "$OUT"
