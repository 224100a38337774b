#!/usr/bin/env bash
# Run as, second call: q4_gemv_sdpa.wgsl with fewer workgroups, each doing
# the columns of CM (c2, c4, c8: 36, 18, 9 workgroups on SmolLM2's 576
# outputs instead of 72; the others return at once), through the
# `shader-override` build of llm_bench; v0 as shipped; the split route.
# Then the trial build with 32 columns from the host (l32: the route
# forced; l32auto: by default).
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=/tmp/bins
X=.xfer/s23b
mkdir -p $B && tar xzf .xfer/s23a/bins.tgz -C $B
cp -r .xfer/s23a/v0 $X/
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > "$OUT/gpu.txt" 2>&1
timeout 60 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 128 --steps 64 --repeats 1 > /dev/null 2>&1
for r in 1 2; do
  for v in v0 c2 c4 c8 split; do
    if [ $v = split ]; then e="ETWGPU_GEMV_ATTENTION=0 ETWGPU_SHADER_OVERRIDE=$X/v0"; else e="ETWGPU_GEMV_ATTENTION=1 ETWGPU_SHADER_OVERRIDE=$X/$v"; fi
    echo "== $v $r"
    env $e timeout 60 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 32,128,256,448 --steps 32 \
      --repeats 3 --json "$OUT/sm_${v}_$r.json" 2>&1 | grep -E "^decode|rror" | cut -c1-50
  done
done
# The trial build (.xfer/s23c: the host gives q4_gemv_sdpa 32 columns a
# workgroup), the route forced and by default.
mkdir -p /tmp/bins2 && tar xzf .xfer/s23c/bins.tgz -C /tmp/bins2
for v in l32 l32auto; do
  if [ $v = l32 ]; then e="ETWGPU_GEMV_ATTENTION=1"; else e="ETWGPU_NONE=1"; fi
  echo "== $v"
  env $e timeout 60 /tmp/bins2/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 32,128,256,448 --steps 32 \
    --repeats 3 --json "$OUT/sm_${v}.json" 2>&1 | grep -E "^decode|rror" | cut -c1-50
done
cd "$OUT" && tar czf /tmp/s23c2.tgz . && rm -rf "$OUT"/* && mv /tmp/s23c2.tgz "$OUT/"
