#!/usr/bin/env bash
# Run bi (session 34): main against the last table's build at the 1B
# prefill, then the Performance table with its PyTorch peers in the same
# call. Carry .gl, .xfer/s34a (A: `etwgpu`, `llm_bench`, `coop_probe` of
# main at 743e70a) and .xfer/s34b (b/: A plus the logits' last row
# converted straight to f32 instead of through f64; c/: b plus the large
# 4-bit tile split along K in slices of 512 inputs, not 2,048, so the
# 512- and 1,024-row O projections run 128 large workgroups instead of
# 128 / 256 small ones; d/: b plus a prompt's RoPE and KV-cache update as
# one dispatch, `rope_kv_cache.wgsl`, 16 fewer dispatches a 1B prompt
# call: main). The first argument: the seconds the call may take
# (default 575; with ~300, as the end of session 34 would have allowed,
# the peers are skipped, since they need 150 s after `etwgpu`). One
# $OUT/bi.tgz comes back:
#  1. cmp/: prefill at 512 and 1,024 (5 repeats a cell), A then D;
#  2. final/: with D, `run.sh etwgpu`, the peers (their budget cut so
#     `coop` and `extra` still fit), `coop`, `extra`, `f32`, each only if
#     the time left covers it;
#  3. cmp/ again if time is left: B, C, B with ETWGPU_EARLY_SUBMIT=0.
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
probe_warm "$BN/d/llm_bench"
cell() {
  if [ "$(probe_left)" -lt 25 ]; then echo "skipped $1: $(probe_left) s left"; return; fi
  echo "== prefill $1"
  timeout 40 env $3 "$2" --model 1b --weights q4 --prompts 512,1024 --contexts 128 --steps 8 --repeats 5 \
    --json "$OUT/cmp/pf_$1.json" 2>&1 | grep -E "^prefill|rror" | cut -c1-150
}
cell a1 "$BA/llm_bench" ETWGPU_X=0
cell d1 "$BN/d/llm_bench" ETWGPU_X=0
cp "$BN/d/etwgpu" "$BN/d/llm_bench" .device/
probe_part etwgpu 120
if [ "$(probe_left)" -ge 150 ]; then
  budget=$(( $(probe_left) - 70 - 80 )); [ "$budget" -gt 200 ] && budget=200; [ "$budget" -lt 80 ] && budget=80
  echo "== peers ($(probe_left) s left, budget $budget s)"
  timeout "$(probe_left)" python3 tools/device/peers.py --config llama32_1b --dtype bf16 --modes eager,compile \
    --prompts 128,512,1024,2048,4096,8192 --contexts 128,512,2048,8192 --decode-tokens 128 \
    --budget-s "$budget" --json "$OUT/final/peers_1b.json" 2>&1 | tail -5
else echo "skipped peers: $(probe_left) s left"; fi
probe_part coop 30
probe_part extra 55
probe_part f32 35
python3 tools/device/report.py "$OUT/final" > "$OUT/final/table.md" 2>&1
cell b1 "$BN/b/llm_bench" ETWGPU_X=0
cell c1 "$BN/c/llm_bench" ETWGPU_X=0
cell b_noearly "$BN/b/llm_bench" ETWGPU_EARLY_SUBMIT=0
cell a2 "$BA/llm_bench" ETWGPU_X=0
probe_pack bi
ls "$OUT"
