#!/usr/bin/env bash
# Run bu: are the stream bench's GPUs clocked down? nvidia-smi logs the
# SM and memory clocks every 50 ms while (1) the stream bench runs as
# before (`ETWGPU_BENCH_HEAT_MS=0`), (2) again with each shape run for
# 500 ms before it is timed, (3) a SmolLM2 4-bit decode cell runs. Every
# output line is stamped with the host clock to match the log. Binaries
# from .xfer/s38 (`runtime-bench` of the heat change, `llm_bench` of
# faa6297). Carry .gl and .xfer/s38. One $OUT/bu.tgz.
set -u
source tools/device/probes/lib.sh
probe_deadline "${1:-240}"
probe_gl
probe_unpack .xfer/s38 /tmp/b/s38
probe_gpu
probe_clocks
export ETWGPU_FIXTURES=$PWD/test_data/fixtures ETWGPU_BENCH_LARGE=1
for heat in 0 500; do
  if [ "$(probe_left)" -lt 60 ]; then echo "skipped heat $heat: $(probe_left) s left"; continue; fi
  echo "== stream bench, heat $heat ms"
  ETWGPU_BENCH_HEAT_MS=$heat timeout 90 /tmp/b/s38/new/runtime-bench --bench "stream " 2>&1 | probe_stamp > "$OUT/stream_h$heat.txt"
  grep -E "one pass|copy bandwidth:" "$OUT/stream_h$heat.txt" | cut -c1-150
done
if [ "$(probe_left)" -ge 40 ]; then
  echo "== decode, SmolLM2 4-bit"
  timeout 60 /tmp/b/s38/new/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 128 --steps 64 \
    --repeats 2 --json "$OUT/decode.json" 2>&1 | probe_stamp > "$OUT/decode.txt"
  grep -i "tokens/s" "$OUT/decode.txt" | tail -3
fi
probe_clocks_stop
python3 - "$OUT/clocks.csv" <<'PY'
import sys
rows = [l.split(", ") for l in open(sys.argv[1]) if l.count(",") >= 5]
sm = [int(r[1].split()[0]) for r in rows if r[1].split()[0].isdigit()]
print(f"clock samples {len(sm)}; SM MHz min {min(sm)} max {max(sm)}" if sm else "no clock samples")
PY
probe_pack bu
ls "$OUT"
