#!/usr/bin/env bash
# Session 38's next call for whichever GPU comes (after a failed start the
# tool asks for an H200): on an H200, run bw, the Performance table with
# 2ea74df's build (.xfer/s38t: the issues name that GPU, and none ran
# since run am): `run.sh etwgpu` (its goldens included), `extra`, `f32`,
# the PyTorch peers and the `mixed` / `f16` goldens into final/; on an
# H100, run bv (`s38-call3.sh`). Carry .gl, .xfer/s38t and .xfer/s38v.
# One $OUT/bw.tgz (H200) or $OUT/bv.tgz (H100).
set -u
if ! nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  exec bash tools/device/probes/s38-call3.sh "${1:-420}"
fi
source tools/device/probes/lib.sh
probe_deadline "${1:-575}"
probe_gl
probe_unpack .xfer/s38t /tmp/b/s38t
mkdir -p .device
cp /tmp/b/s38t/new/etwgpu /tmp/b/s38t/new/llm_bench .device/
probe_gpu
probe_warm .device/llm_bench
probe_part etwgpu 120
probe_part extra 60
probe_part f32 150
probe_peers
if [ "$(probe_left)" -ge 80 ]; then
  OUT="$OUT" timeout "$(probe_left)" bash tools/device/run.sh coop > /dev/null 2>&1
  for p in mixed f16; do
    echo "$p $(grep -cE ' pass ' "$OUT/goldens_$p.txt") pass"; grep -E " fail|FAIL" "$OUT/goldens_$p.txt" | head -5
  done
else echo "skipped coop goldens: $(probe_left) s left"; fi
python3 tools/device/report.py "$OUT/final" > "$OUT/final/table.md" 2>&1
probe_pack bw
ls "$OUT"
