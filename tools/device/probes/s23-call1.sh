#!/usr/bin/env bash
# Run as, first call: q4_gemv_sdpa.wgsl (the decode attention inside the O
# projection's GEMV) in bigger workgroups, loaded through the
# `shader-override` build of llm_bench: v0 as shipped (256 invocations),
# w512 / w1024 (512 / 1024 invocations: more keys and values in flight a
# workgroup, fewer serial rounds), w512k8 / w1024k8 (the same with 8 key
# loads in flight an invocation instead of 16, for registers). GEMV route
# forced at every position (ETWGPU_GEMV_ATTENTION=1), the split route (=0)
# beside it. First, on the fresh machine, s22-call23.sh's stall probe
# with this build: the synthetic SmolLM2 shape saved with the real
# export's geometry, a process generating 64 tokens, then two of 256.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=/tmp/bins
X=.xfer/s23a
mkdir -p $B && tar xzf $X/bins.tgz -C $B
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > "$OUT/gpu.txt" 2>&1
$B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 446 --steps 64 --save /tmp/sm512.pte --build-only > /dev/null 2>&1
for r in 64 256 256; do
  echo "== stall $r"
  timeout 60 $B/oneshot_probe /tmp/sm512.pte --max-tokens $r --repeats 1 2>&1 | tee -a "$OUT/probe.txt" | cut -c1-300
done
timeout 60 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 128 --steps 64 --repeats 1 > /dev/null 2>&1
for r in 1 2; do
  for v in v0 w512 w1024 w512k8 w1024k8 split; do
    if [ $v = split ]; then e="ETWGPU_GEMV_ATTENTION=0 ETWGPU_SHADER_OVERRIDE=$X/v0"; else e="ETWGPU_GEMV_ATTENTION=1 ETWGPU_SHADER_OVERRIDE=$X/$v"; fi
    echo "== $v $r"
    env $e timeout 60 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 32,128,256,448 --steps 32 \
      --repeats 3 --json "$OUT/sm_${v}_$r.json" 2>&1 | grep -E "^decode|shader q4_gemv_sdpa|shader sdpa_split|shader q4_gemv_attn|rror" | cut -c1-70
  done
done
cd "$OUT" && tar czf /tmp/s23c1.tgz . && rm -rf "$OUT"/* && mv /tmp/s23c1.tgz "$OUT/"
