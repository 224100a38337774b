#!/usr/bin/env bash
# Run bg (session 33): the loop-guard branch against main, then the
# Performance table with the faster of the two. Device time was too short
# for run bf's separate call (two starts failed), so this one call
# decides and measures. Carry .gl, .xfer/s33a (new/: main at b12143f's
# kernels), .xfer/s33b (new/: branch loop-guard, the four large 4-bit
# families with naga's loop guard). One $OUT/bg.tgz comes back.
#  1. the 1B prefill at 512 and 2,048, branch then main (one process each,
#     3 repeats a cell): the branch is taken when it is >= 2% faster at
#     2,048 and not >= 1% slower at 512 (cmp/choice.txt says which);
#  2. a 512-token call profiled by kernel with the chosen build;
#  3. the table's parts with it into final/: `run.sh etwgpu`, `coop`,
#     `extra`, `f32`, then the PyTorch peers, each only if the seconds
#     left of the first argument (default 560: what the device budget
#     leaves this call) cover its usual length, the peers' budget cut
#     to fit, so that the packing always runs.
set -u
source tools/device/probes/lib.sh
probe_deadline "${1:-560}"
probe_gl
BM=/tmp/b/main
BG=/tmp/b/guard
probe_unpack .xfer/s33a/new "$BM"
probe_unpack .xfer/s33b/new "$BG"
mkdir -p "$OUT/cmp" .device
probe_gpu
probe_warm "$BG/llm_bench"
for c in guard main; do
  bin=$BG; [ $c = main ] && bin=$BM
  echo "== prefill $c"
  timeout 60 "$bin/llm_bench" --model 1b --weights q4 --prompts 512,2048 --contexts 128 --steps 32 --repeats 3 \
    --json "$OUT/cmp/pf_$c.json" 2>&1 | grep -E "^prefill|^decode|rror" | cut -c1-60
done
choice=$(python3 - "$OUT/cmp" <<'PY'
import json, sys
def cells(name):
    d = json.load(open(f"{sys.argv[1]}/pf_{name}.json"))
    return [c["tokens_per_s"] for c in d["prefill"]]
try:
    g, m = cells("guard"), cells("main")
    print("guard" if g[1] >= 1.02 * m[1] and g[0] >= 0.99 * m[0] else "main")
except Exception as e:
    print("main")
PY
)
echo "$choice" | tee "$OUT/cmp/choice.txt"
bin=$BM; [ "$choice" = guard ] && bin=$BG
cp "$bin/etwgpu" "$bin/llm_bench" .device/
echo "== profile 512 ($choice)"
timeout 40 .device/llm_bench --model 1b --weights q4 --prompts 512 --contexts 128 --steps 16 --repeats 3 \
  --json "$OUT/cmp/prof512.json" > "$OUT/cmp/prof512.txt" 2>&1
grep -E "one call of 512" -A10 "$OUT/cmp/prof512.txt" | cut -c1-110 | head -24
probe_part etwgpu 170
probe_part coop 30
probe_part extra 60
probe_part f32 35
probe_peers
python3 tools/device/report.py "$OUT/final" > "$OUT/final/table.md" 2>&1
probe_pack bg
ls "$OUT"
