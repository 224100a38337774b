#!/usr/bin/env bash
# Run bn (session 35): E against D at the 1B 4-bit prefill, 256 / 512 /
# 1,024 tokens, two alternations. E: D (main, 2212242) with
# `LARGE_SPLIT_MIN_INPUTS` 1,024: the down projection at 256 rows in 8
# large slices of 1,024 (where run bl's C gained 8.5-8.7%) and the O
# projection at 1,024 rows in 2 (C's, level to +3%); 512 unchanged. Carry
# .gl and .xfer/s35e (d/ and e/ `llm_bench`). The first argument: the
# seconds the call may take (default 120). One $OUT/bn.tgz.
set -u
source tools/device/probes/lib.sh
probe_deadline "${1:-120}"
probe_gl
BN=/tmp/b/s35e
probe_unpack .xfer/s35e "$BN"
mkdir -p "$OUT/cmp"
probe_gpu
probe_warm "$BN/d/llm_bench"
cell() {
  if [ "$(probe_left)" -lt 20 ]; then echo "skipped $1: $(probe_left) s left"; return; fi
  echo "== prefill $1"
  timeout 30 "$2" --model 1b --weights q4 --prompts 256,512,1024 --contexts 128 --steps 4 --repeats 5 \
    --json "$OUT/cmp/pf_$1.json" 2>&1 | grep -E "^prefill|rror" | cut -c1-60
}
for i in 1 2; do
  cell "d$i" "$BN/d/llm_bench"
  cell "e$i" "$BN/e/llm_bench"
done
probe_pack bn
ls "$OUT"
