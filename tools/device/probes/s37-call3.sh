#!/usr/bin/env bash
# Session 37's next call, for whichever GPU comes (after a failed start the
# tool asks for an H200): on an H200 the Performance table with run bp's
# build (the issues name that GPU; none ran since run am): the goldens,
# `run.sh etwgpu` (its goldens included), `extra`, `f32`, the PyTorch
# peers and the `mixed` / `f16` goldens into final/; on an H100 run bq (`s37-call2.sh`: the float GEMV
# variants, then `f32`). Carry .gl, .xfer/s37 and .xfer/s37v. One
# $OUT/br.tgz (H200) or $OUT/bq.tgz (H100).
set -u
if ! nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  exec bash tools/device/probes/s37-call2.sh "${1:-575}"
fi
source tools/device/probes/lib.sh
probe_deadline "${1:-575}"
probe_gl
probe_unpack .xfer/s37 /tmp/b/s37
mkdir -p .device
cp /tmp/b/s37/new/etwgpu /tmp/b/s37/new/llm_bench .device/
probe_gpu
probe_warm .device/llm_bench
probe_table
probe_pack br
ls "$OUT"
