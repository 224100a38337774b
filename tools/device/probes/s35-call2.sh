#!/usr/bin/env bash
# Run bl (session 35): what run bk left; on an H100 like bk's, the peers
# below join bk's table (on another GPU they are skipped). Carry .gl and .xfer/s35
# (as run bk). The first argument: the seconds the call may take (default
# 540). One $OUT/bl.tgz comes back:
#  1. final/peers_1b_prefill.json: torch.compile prefill at 512 .. 8,192,
#     the cells run bk's peers had no time for (no decode cells);
#  2. cmp/: the 1B 4-bit prefill at 256, 512, 1,024 and 2,048, D then C
#     then D then C (C: `LARGE_SPLIT_MIN_INPUTS` 512), and the SmolLM2
#     shape at 511 with each;
#  3. dense.txt: `coop_probe dense new` if 100 s are left.
set -u
source tools/device/probes/lib.sh
probe_deadline "${1:-540}"
probe_gl
BN=/tmp/b/s35
probe_unpack .xfer/s35 "$BN"
mkdir -p "$OUT/cmp"
probe_gpu
probe_warm "$BN/d/llm_bench"
# The peers join run bk's table only on the GPU bk had.
if grep -q "H100 80GB HBM3" "$OUT/gpu.txt"; then
  budget=$(( $(probe_left) - 260 )); [ "$budget" -gt 230 ] && budget=230
  echo "== peers, compile prefill ($(probe_left) s left, budget $budget s)"
  timeout $(( budget + 60 )) python3 tools/device/peers.py --config llama32_1b --dtype bf16 --modes compile \
    --prompts 512,1024,2048,4096,8192 --contexts "" --budget-s "$budget" \
    --json "$OUT/final/peers_1b_prefill.json" 2>&1 | tail -8
else echo "skipped peers: not run bk's GPU"; fi
cell() {
  if [ "$(probe_left)" -lt 40 ]; then echo "skipped $1: $(probe_left) s left"; return; fi
  echo "== prefill $1"
  timeout 60 "$2" --model 1b --weights q4 --prompts 256,512,1024,2048 --contexts 128 --steps 8 --repeats 5 \
    --json "$OUT/cmp/pf_$1.json" 2>&1 | grep -E "^prefill|rror" | cut -c1-110
  timeout 30 "$2" --model smollm2 --weights q4 --prompts 511 --contexts 128 --steps 8 --repeats 5 \
    --json "$OUT/cmp/pf_smollm2_$1.json" 2>&1 | grep -E "^prefill|rror" | cut -c1-110
}
cell d3 "$BN/d/llm_bench"
cell c3 "$BN/c/llm_bench"
cell d4 "$BN/d/llm_bench"
cell c4 "$BN/c/llm_bench"
if [ "$(probe_left)" -ge 100 ]; then
  echo "== coop_probe dense new"
  timeout "$(probe_left)" "$BN/d/coop_probe" dense new > "$OUT/dense.txt" 2>&1
  grep -E "best|shipped\)" "$OUT/dense.txt" | cut -c1-120
else echo "skipped coop_probe: $(probe_left) s left"; fi
probe_pack bl
ls "$OUT"
