#!/usr/bin/env bash
# Run bv: the float GEMV variants of run bs/bt again, now that the stream
# bench heats each shape (run bu: they were timed at idle clocks), and
# the dense coop GEMM with its 0.3 s warm-up against 3 s. nvidia-smi logs
# the clocks every 50 ms; output lines are host-stamped. Binaries from
# .xfer/s38v (`s38-variants.sh`). Carry .gl and .xfer/s38v. One $OUT/bv.tgz.
set -u
source tools/device/probes/lib.sh
probe_deadline "${1:-420}"
probe_gl
probe_unpack .xfer/s38v /tmp/b/s38v
probe_gpu
probe_clocks
export ETWGPU_FIXTURES=$PWD/test_data/fixtures ETWGPU_BENCH_LARGE=1
mkdir -p "$OUT/stream" "$OUT/coop"
for v in base u8 c16 hc q3; do
  if [ "$(probe_left)" -lt 70 ]; then echo "skipped $v: $(probe_left) s left"; continue; fi
  filter="stream f32"; [ $v = base ] && filter="stream "; [ $v = q3 ] && filter="stream f32 qkv"
  trusted=0; [ $v = hc ] && trusted=1
  echo "== stream bench, $v"
  ETWGPU_TRUSTED_SHADERS=$trusted timeout 150 /tmp/b/s38v/$v/runtime-bench --bench "$filter" 2>&1 | probe_stamp > "$OUT/stream/$v.txt"
  grep -E "one pass|copy bandwidth:" "$OUT/stream/$v.txt" | cut -c20-150
done
for warm in 300 3000; do
  if [ "$(probe_left)" -lt 80 ]; then echo "skipped coop warm $warm: $(probe_left) s left"; continue; fi
  echo "== coop_probe dense new, warm-up $warm ms"
  ETWGPU_PROBE_WARM_MS=$warm timeout $(( $(probe_left) < 150 ? $(probe_left) : 150 )) \
    /tmp/b/s38v/base/coop_probe dense new 2>&1 | probe_stamp > "$OUT/coop/warm$warm.txt"
  grep -E "coop_large.f16 \(shipped\)|best shipped" "$OUT/coop/warm$warm.txt" | cut -c20-170 | head -8
done
probe_clocks_stop
probe_pack bv
ls "$OUT"
