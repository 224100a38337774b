#!/usr/bin/env bash
# Session 37's last try (~570 device-seconds left, so a short call): on an
# H200, `run.sh etwgpu` with run bp's build then the peers in the time
# left; on an H100 the stream bench's float GEMV variants of run bq
# (base, u8, c16, hc; run bs ran an invalid u8, now the eight-load patch) without the f32 prefill part. Carry .gl, .xfer/s37
# and .xfer/s37v. One $OUT/bs.tgz.
set -u
source tools/device/probes/lib.sh
probe_deadline "${1:-400}"
probe_gl
probe_unpack .xfer/s37 /tmp/b/s37
mkdir -p "$OUT/stream" .device
cp /tmp/b/s37/new/etwgpu /tmp/b/s37/new/llm_bench .device/
probe_gpu
probe_warm .device/llm_bench
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  probe_part etwgpu 120
  probe_peers
  python3 tools/device/report.py "$OUT/final" > "$OUT/final/table.md" 2>&1
else
  probe_unpack .xfer/s37v /tmp/b/s37v
  for v in base u8 c16 hc; do
    if [ "$(probe_left)" -lt 50 ]; then echo "skipped $v: $(probe_left) s left"; continue; fi
    echo "== stream bench, $v"
    trusted=0; [ "$v" = hc ] && trusted=1
    ETWGPU_TRUSTED_SHADERS=$trusted ETWGPU_FIXTURES=$PWD/test_data/fixtures ETWGPU_BENCH_LARGE=1 timeout 80 \
      "/tmp/b/s37v/$v/runtime-bench" --bench "stream f32" > "$OUT/stream/$v.txt" 2>&1
    grep -E "^stream f32 n|copy bandwidth:" "$OUT/stream/$v.txt"
  done
fi
probe_pack bs
ls "$OUT"
