#!/usr/bin/env bash
# Run bx: the stream bench heated by back-to-back copies (2ea74df's heat,
# the benched runs themselves, let the clock fall: run bv), base's full
# rows, then q3's QKV row, c16's and u8's f32 rows, clocks logged every
# 50 ms, lines host-stamped. Binaries from .xfer/s38v (`s38-variants.sh`
# at the heating commit). Carry .gl and .xfer/s38v. One $OUT/bx.tgz.
set -u
source tools/device/probes/lib.sh
probe_deadline "${1:-300}"
probe_gl
probe_unpack .xfer/s38v /tmp/b/s38v
probe_gpu
probe_clocks
export ETWGPU_FIXTURES=$PWD/test_data/fixtures ETWGPU_BENCH_LARGE=1
mkdir -p "$OUT/stream"
for vf in "base:stream " "q3:f32 qkv" "c16:f32" "u8:f32"; do
  v=${vf%%:*}; only=${vf#*:}
  if [ "$(probe_left)" -lt 50 ]; then echo "skipped $v: $(probe_left) s left"; continue; fi
  echo "== stream bench, $v ($only)"
  ETWGPU_BENCH_ONLY="$only" timeout $(( $(probe_left) < 100 ? $(probe_left) : 100 )) \
    /tmp/b/s38v/$v/runtime-bench --bench "stream" 2>&1 | probe_stamp > "$OUT/stream/$v.txt"
  grep -E "one pass|copy bandwidth:" "$OUT/stream/$v.txt" | cut -c20-150
done
probe_clocks_stop
probe_pack bx
ls "$OUT"
