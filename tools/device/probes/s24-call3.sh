#!/usr/bin/env bash
# Run at, third call: q4_gemv_sdpa.wgsl with fewer workgroup-memory reads
# a key, through the `shader-override` build of llm_bench at HEAD 3819971
# (.xfer/s24c). s4: the scores four keys of one kv head an invocation (each
# query vec4 read from workgroup memory serves four keys; the fourth query
# head only where the group has one); s4v: s4 and the values skip the
# fourth head too; vp: s4v and each key group takes a contiguous run of
# keys, its probabilities read four at a time (the scores a vec4 in
# workgroup memory). v0 as shipped. The route forced on; then the split
# route as shipped for the crossing.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=/tmp/bins
X=.xfer/s24c
mkdir -p $B && tar xzf $X/bins.tgz -C $B
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > "$OUT/gpu.txt" 2>&1
timeout 60 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 128 --steps 32 --repeats 1 > /dev/null 2>&1
for r in 1 2; do
  for v in v0 s4 s4v vp; do
    if [ $v = v0 ]; then e="ETWGPU_GEMV_ATTENTION=1"; else e="ETWGPU_GEMV_ATTENTION=1 ETWGPU_SHADER_OVERRIDE=$X/$v"; fi
    echo "== $v $r"
    env $e timeout 60 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 32,128,256,448 --steps 16 \
      --repeats 2 --json "$OUT/sm_${v}_$r.json" 2>&1 | grep -E "^decode|rror|shader .* from" | cut -c1-60
  done
done
echo "== split"
ETWGPU_GEMV_ATTENTION=0 timeout 60 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 32,128,256,448 --steps 16 \
  --repeats 2 --json "$OUT/sp_v0.json" 2>&1 | grep -E "^decode|rror" | cut -c1-60
cd "$OUT" && tar czf /tmp/s24c3.tgz . && rm -rf "$OUT"/* && mv /tmp/s24c3.tgz "$OUT/"
