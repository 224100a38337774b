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
probe_table
probe_pack bw
ls "$OUT"
