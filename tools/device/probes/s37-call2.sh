#!/usr/bin/env bash
# Run bq (session 37): the float GEMV `linear_gemv.wgsl` in the stream
# bench's f32 rows as shipped and in three variants (`s37-variants.sh`:
# base, u8 (eight loads), c16, hc; hc with ETWGPU_TRUSTED_SHADERS=1), each shape per
# dispatch and in one pass; then `run.sh f32` with run bp's build
# (.xfer/s37 new/) into final/, the `--precision f32` prefill rows run bp's
# table lacks. Carry .gl, .xfer/s37 and .xfer/s37v. One $OUT/bq.tgz.
set -u
source tools/device/probes/lib.sh
probe_deadline "${1:-575}"
probe_gl
probe_unpack .xfer/s37 /tmp/b/s37
probe_unpack .xfer/s37v /tmp/b/s37v
mkdir -p "$OUT/stream" .device
cp /tmp/b/s37/new/etwgpu /tmp/b/s37/new/llm_bench .device/
probe_gpu
probe_warm .device/llm_bench
for v in base u8 c16 hc; do
  if [ "$(probe_left)" -lt 60 ]; then echo "skipped $v: $(probe_left) s left"; continue; fi
  echo "== stream bench, $v"
  trusted=0; [ "$v" = hc ] && trusted=1
  ETWGPU_TRUSTED_SHADERS=$trusted ETWGPU_FIXTURES=$PWD/test_data/fixtures ETWGPU_BENCH_LARGE=1 timeout 90 \
    "/tmp/b/s37v/$v/runtime-bench" --bench "stream f32" > "$OUT/stream/$v.txt" 2>&1
  grep -E "^stream f32 n|copy bandwidth:" "$OUT/stream/$v.txt"
done
probe_part f32 200
probe_pack bq
ls "$OUT"
