#!/usr/bin/env bash
# Run bi (session 34): three builds side by side at the 1B prefill, then
# the Performance table with its PyTorch peers in the same call. Carry
# .gl, .xfer/s34a (A: `etwgpu`, `llm_bench`, `coop_probe` of main at
# 743e70a) and .xfer/s34b (b/: A plus the logits' last row converted
# straight to f32 instead of through f64; c/: b plus the large 4-bit
# tile split along K in slices of 512 inputs, not 2,048, so the 512- and
# 1,024-row O projections run 128 large workgroups instead of 128 / 256
# small ones). The first argument: the seconds the call may take
# (default 575). One $OUT/bi.tgz comes back:
#  1. cmp/: prefill at 512 and 1,024 (5 repeats a cell), A, B, C, then B
#     with ETWGPU_EARLY_SUBMIT=0 (the early submission's share); the
#     table takes B unless it is >= 1% slower than A at 512
#     (cmp/choice.txt);
#  2. final/: `run.sh etwgpu`, the peers (their budget at most 200 s),
#     `coop`, `extra`, `f32`, each only if the time left covers it;
#  3. `coop_probe dense new` (A's) if 100 s are left (dense.txt).
set -u
source tools/device/probes/lib.sh
probe_deadline "${1:-575}"
probe_gl
BA=/tmp/b/main
BN=/tmp/b/new
probe_unpack .xfer/s34a "$BA"
probe_unpack .xfer/s34b "$BN"
mkdir -p "$OUT/cmp" .device
probe_gpu
probe_warm "$BN/b/llm_bench"
cell() {
  echo "== prefill $1"
  timeout 45 env $3 "$2" --model 1b --weights q4 --prompts 512,1024 --contexts 128 --steps 8 --repeats 5 \
    --json "$OUT/cmp/pf_$1.json" 2>&1 | grep -E "^prefill|rror" | cut -c1-150
}
cell a1 "$BA/llm_bench" ETWGPU_X=0
cell b1 "$BN/b/llm_bench" ETWGPU_X=0
cell c1 "$BN/c/llm_bench" ETWGPU_X=0
cell b_noearly "$BN/b/llm_bench" ETWGPU_EARLY_SUBMIT=0
choice=$(python3 - "$OUT/cmp" <<'PY'
import json, sys
def at512(name):
    d = json.load(open(f"{sys.argv[1]}/pf_{name}.json"))
    return d["prefill"][0]["tokens_per_s"]
try:
    a, b = at512("a1"), at512("b1")
    print("a" if b < 0.99 * a else "b")
except Exception as e:
    print("b")
PY
)
echo "$choice" | tee "$OUT/cmp/choice.txt"
if [ "$choice" = a ]; then cp "$BA/etwgpu" "$BA/llm_bench" .device/; else cp "$BN/b/etwgpu" "$BN/b/llm_bench" .device/; fi
probe_part etwgpu 170
if [ "$(probe_left)" -ge 150 ]; then
  budget=$(( $(probe_left) - 70 )); [ "$budget" -gt 200 ] && budget=200
  echo "== peers ($(probe_left) s left, budget $budget s)"
  timeout "$(probe_left)" python3 tools/device/peers.py --config llama32_1b --dtype bf16 --modes eager,compile \
    --prompts 128,512,1024,2048,4096,8192 --contexts 128,512,2048,8192 --decode-tokens 128 \
    --budget-s "$budget" --json "$OUT/final/peers_1b.json" 2>&1 | tail -5
else echo "skipped peers: $(probe_left) s left"; fi
probe_part coop 30
probe_part extra 60
probe_part f32 35
python3 tools/device/report.py "$OUT/final" > "$OUT/final/table.md" 2>&1
if [ "$(probe_left)" -ge 100 ]; then
  echo "== dense ($(probe_left) s left)"
  timeout "$(probe_left)" "$BA/coop_probe" dense new > "$OUT/dense.txt" 2>&1
  grep -E "shipped\)|best" -A1 "$OUT/dense.txt" | cut -c1-110 | head -12
else echo "skipped dense: $(probe_left) s left"; fi
probe_pack bi
ls "$OUT"
