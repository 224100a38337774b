#!/usr/bin/env bash
# Session 36's last call (~250 device-seconds left): the stream bench's f32
# rows from HEAD's `runtime-bench` (carried as .xfer/s36b), each shape
# timed per dispatch and in one pass (`, one pass`). One $OUT/bp.tgz.
set -u
source tools/device/probes/lib.sh
probe_deadline "${1:-150}"
probe_gl
probe_unpack .xfer/s36b /tmp/b/s36b
mkdir -p "$OUT/stream"
probe_gpu
ETWGPU_FIXTURES=$PWD/test_data/fixtures ETWGPU_BENCH_LARGE=1 timeout "$(probe_left)" /tmp/b/s36b/new/runtime-bench \
  --bench "stream f32" > "$OUT/stream/new.txt" 2>&1
grep -E "^stream|copy bandwidth:" "$OUT/stream/new.txt"
probe_pack bp
