#!/usr/bin/env bash
# Run bm (session 35): run bl's C against D again, three alternations, at
# the cells its rule looked at: the 1B 4-bit prefill at 512 and 1,024 and
# the SmolLM2 shape at 511 (where C and D run the same kernels: there
# run bl's c4 was 2.6% under d4). Carry .gl and .xfer/s35. The first
# argument: the seconds the call may take (default 200). One $OUT/bm.tgz.
set -u
source tools/device/probes/lib.sh
probe_deadline "${1:-200}"
probe_gl
BN=/tmp/b/s35
probe_unpack .xfer/s35 "$BN"
mkdir -p "$OUT/cmp"
probe_gpu
probe_warm "$BN/d/llm_bench"
cell() {
  if [ "$(probe_left)" -lt 30 ]; then echo "skipped $1: $(probe_left) s left"; return; fi
  echo "== prefill $1"
  timeout 30 "$2" --model smollm2 --weights q4 --prompts 511 --contexts 128 --steps 8 --repeats 5 \
    --json "$OUT/cmp/pf_smollm2_$1.json" 2>&1 | grep -E "^prefill|rror" | cut -c1-60
  timeout 40 "$2" --model 1b --weights q4 --prompts 512,1024 --contexts 128 --steps 8 --repeats 5 \
    --json "$OUT/cmp/pf_$1.json" 2>&1 | grep -E "^prefill|rror" | cut -c1-60
}
for i in 5 6 7; do
  cell "d$i" "$BN/d/llm_bench"
  cell "c$i" "$BN/c/llm_bench"
done
probe_pack bm
ls "$OUT"
