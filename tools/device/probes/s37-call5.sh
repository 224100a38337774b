#!/usr/bin/env bash
# Session 37's last device-seconds (~330): the stream bench's f32 rows of
# `linear_gemv.wgsl` as shipped (base) and with eight loads written out
# (u8, `s38-linear-gemv-u8.patch`), built by `s37-variants.sh` into
# .xfer/s37v. Carry .gl and .xfer/s37v. One $OUT/bt.tgz.
set -u
source tools/device/probes/lib.sh
probe_deadline "${1:-150}"
probe_gl
probe_unpack .xfer/s37v /tmp/b/s37v
mkdir -p "$OUT/stream"
probe_gpu
for v in base u8; do
  if [ "$(probe_left)" -lt 40 ]; then echo "skipped $v: $(probe_left) s left"; continue; fi
  echo "== stream bench, $v"
  ETWGPU_FIXTURES=$PWD/test_data/fixtures ETWGPU_BENCH_LARGE=1 timeout 60 \
    "/tmp/b/s37v/$v/runtime-bench" --bench "stream f32 n" > "$OUT/stream/$v.txt" 2>&1
  grep -E "^stream f32 n|copy bandwidth:" "$OUT/stream/$v.txt"
done
probe_pack bt
ls "$OUT"
