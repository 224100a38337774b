#!/usr/bin/env bash
# Run at, first call: q4_gemv_sdpa.wgsl's scores with coalesced key loads
# (c4: eight lanes of one subgroup per (key, kv head) row, four rows in
# flight per slot, shuffles for the row sums), through the
# `shader-override` build of llm_bench at HEAD 3819971 (.xfer/s24a); v0 as
# shipped (no override). The route forced on (ETWGPU_GEMV_ATTENTION=1).
# Then the split route (=0): as shipped against the split partials with
# their arrays named (sn: tools/device/probes/s23-call6-split-named.patch).
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=/tmp/bins
X=.xfer/s24a
mkdir -p $B && tar xzf $X/bins.tgz -C $B
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > "$OUT/gpu.txt" 2>&1
timeout 60 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 128 --steps 64 --repeats 1 > /dev/null 2>&1
for r in 1 2; do
  for v in v0 c4; do
    if [ $v = v0 ]; then e="ETWGPU_GEMV_ATTENTION=1"; else e="ETWGPU_GEMV_ATTENTION=1 ETWGPU_SHADER_OVERRIDE=$X/$v"; fi
    echo "== gemv $v $r"
    env $e timeout 60 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 32,128,256,448 --steps 32 \
      --repeats 3 --json "$OUT/sm_${v}_$r.json" 2>&1 | grep -E "^decode|rror|shader .* from" | cut -c1-60
  done
  for v in v0 sn; do
    if [ $v = v0 ]; then e="ETWGPU_GEMV_ATTENTION=0"; else e="ETWGPU_GEMV_ATTENTION=0 ETWGPU_SHADER_OVERRIDE=$X/$v"; fi
    echo "== split $v $r"
    env $e timeout 60 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 32,128,256,448 --steps 32 \
      --repeats 3 --json "$OUT/sp_${v}_$r.json" 2>&1 | grep -E "^decode|rror|shader .* from" | cut -c1-60
  done
done
cd "$OUT" && tar czf /tmp/s24c1.tgz . && rm -rf "$OUT"/* && mv /tmp/s24c1.tgz "$OUT/"
