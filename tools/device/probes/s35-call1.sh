#!/usr/bin/env bash
# Run bk (session 35): run bi of session 34 (never started) on binaries
# rebuilt on session 35's fresh machine. Carry .gl and .xfer/s35 (one xz
# tarball: a/ `llm_bench` of main at 743e70a, the build of the README's
# table; c/ `llm_bench` of main at 2212242 with `LARGE_SPLIT_MIN_INPUTS`
# 512 instead of 2,048; d/ `etwgpu`, `llm_bench`, `coop_probe` of main at
# 2212242: the logits' last row straight to f32 and a prompt's RoPE and
# KV-cache update as one dispatch, both unmeasured). The first argument:
# the seconds the call may take (default 575). One $OUT/bk.tgz comes back:
#  1. cmp/: the 1B 4-bit prefill at 512 and 1,024 (5 repeats a cell), A
#     then D;
#  2. final/: with D, `run.sh etwgpu`, the PyTorch peers (their budget cut
#     so `coop`, `extra` and `f32` still fit), `coop`, `extra`, `f32`,
#     each only if the time left covers it;
#  3. cmp/ again if time is left: C, D with ETWGPU_EARLY_SUBMIT=0, A, D;
#  4. dense.txt: `coop_probe dense new` if 100 s are left.
set -u
source tools/device/probes/lib.sh
probe_deadline "${1:-575}"
probe_gl
BN=/tmp/b/s35
probe_unpack .xfer/s35 "$BN"
mkdir -p "$OUT/cmp" .device
probe_gpu
probe_warm "$BN/d/llm_bench"
cell() {
  if [ "$(probe_left)" -lt 25 ]; then echo "skipped $1: $(probe_left) s left"; return; fi
  echo "== prefill $1"
  timeout 40 env $3 "$2" --model 1b --weights q4 --prompts 512,1024 --contexts 128 --steps 8 --repeats 5 \
    --json "$OUT/cmp/pf_$1.json" 2>&1 | grep -E "^prefill|rror" | cut -c1-150
}
cell a1 "$BN/a/llm_bench" ETWGPU_X=0
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
cell c1 "$BN/c/llm_bench" ETWGPU_X=0
cell d_noearly "$BN/d/llm_bench" ETWGPU_EARLY_SUBMIT=0
cell a2 "$BN/a/llm_bench" ETWGPU_X=0
cell d2 "$BN/d/llm_bench" ETWGPU_X=0
if [ "$(probe_left)" -ge 100 ]; then
  echo "== coop_probe dense new"
  timeout "$(probe_left)" "$BN/d/coop_probe" dense new > "$OUT/dense.txt" 2>&1
  grep -E "best|shipped\)" "$OUT/dense.txt" | cut -c1-120
else echo "skipped coop_probe: $(probe_left) s left"; fi
probe_pack bk
ls "$OUT"
