#!/usr/bin/env bash
# Run av, one call (the session's device budget is one). Last, the SmolLM2
# shape's decode on the default route (GEMV_ATTN_AUTO_KEYS = 128, landed
# in run au) at 32 / 128 / 256 keys. First, where the implicit-GEMM
# convolution's time goes (`conv_gemm.wgsl`, float32; run ag on an H200:
# 0.9-1.8 TFLOP/s, slower than the direct kernel): the gemm bench's conv
# cells (ETWGPU_BENCH_LARGE=1) with the shipped kernel (g0), then, through
# ETWGPU_SHADER_OVERRIDE, the implicit-GEMM cells of:
#   g2   the shipped work with its per-invocation arrays and vectors
#        (`rows`, `gx`, `gw`, `acc`) as named values (passes the conv tests);
#   gsel g2 with the patch gather branch-free (index and value selected);
#   gnx  g0 with the gather replaced by a contiguous load (wrong outputs);
#   g2nx g2 with the same contiguous load (wrong outputs);
#   gnm  g0 with one of each step's 16 k products (wrong outputs).
# Before the call, here: .xfer/s26/bins.tgz (llm_bench at the landing
# commit; the gemm bench built with the shader-override feature) and the
# override directories .xfer/s26/<variant>/conv_gemm.f32.wgsl.
set -u
. tools/device/probes/lib.sh
X=.xfer/s26
probe_init $X
echo "== conv g0"
ETWGPU_BENCH_LARGE=1 timeout 150 $B/gemm --bench 'conv' > "$OUT/conv_g0.txt" 2>&1
grep "an op" "$OUT/conv_g0.txt" | grep conv | tail -20
for v in g2 gsel gnm gnx g2nx; do
  echo "== conv $v"
  ETWGPU_BENCH_LARGE=1 ETWGPU_SHADER_OVERRIDE=$PWD/$X/$v timeout 100 $B/gemm --bench 'conv.*gemm$' > "$OUT/conv_$v.txt" 2>&1
  grep -E "etwgpu: shader" "$OUT/conv_$v.txt" | head -1
  grep "an op" "$OUT/conv_$v.txt" | grep "conv.*gemm " | tail -10
done
echo "== auto"
timeout 60 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 32,128,256 --steps 32 \
  --repeats 2 --json "$OUT/sm_auto.json" 2>&1 | grep -E "^decode|rror" | cut -c1-60
probe_pack s26c1
