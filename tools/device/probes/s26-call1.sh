#!/usr/bin/env bash
# Run av, one call (the session's device budget is one). Last, the SmolLM2
# shape's decode on the default route (GEMV_ATTN_AUTO_KEYS = 128, landed
# in run au) at 32 / 128 / 256 keys. First, where the implicit-GEMM
# convolution's time goes (`conv_gemm.wgsl`, float32; run ag on an H200:
# 0.9-1.8 TFLOP/s, slower than the direct kernel): the gemm bench's conv
# cells (ETWGPU_BENCH_LARGE=1) with the shipped kernel (g0: named values,
# a branch-free gather, 23% faster than the kernel before it on
# lavapipe), then, through ETWGPU_SHADER_OVERRIDE, the implicit-GEMM
# cells of:
#   old  the kernel before that commit (private arrays `rows`, `gx`,
#        `gw`, `acc`; a branching gather);
#   gnm  g0 with one of each step's 16 k products (wrong outputs);
#   gnx  g0 with the gather replaced by a contiguous load (wrong outputs).
# Before the call, here: .xfer/s26/bins.tgz (llm_bench and the gemm bench,
# both built with the shader-override feature, at the commit that runs)
# and `python3 tools/device/probes/s26-variants.py` (the override
# directories .xfer/s26/<variant>/conv_gemm.f32.wgsl). The device run of
# session 26 never started (two failed starts spent the budget); this is
# the script as the next session should run it.
set -u
. tools/device/probes/lib.sh
X=.xfer/s26
probe_init $X
echo "== conv g0"
ETWGPU_BENCH_LARGE=1 ETWGPU_BENCH_ONLY=conv timeout 150 $B/gemm --bench > "$OUT/conv_g0.txt" 2>&1
grep "an op" "$OUT/conv_g0.txt" | grep conv | tail -20
for v in old gnm gnx; do
  echo "== conv $v"
  ETWGPU_BENCH_LARGE=1 ETWGPU_BENCH_ONLY=" gemm" ETWGPU_SHADER_OVERRIDE=$PWD/$X/$v timeout 100 $B/gemm --bench > "$OUT/conv_$v.txt" 2>&1
  grep -E "etwgpu: shader" "$OUT/conv_$v.txt" | head -1
  grep "an op" "$OUT/conv_$v.txt" | grep "conv.*gemm " | tail -10
done
echo "== auto"
timeout 60 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 32,128,256 --steps 32 \
  --repeats 2 --json "$OUT/sm_auto.json" 2>&1 | grep -E "^decode|rror" | cut -c1-60
probe_pack s26c1
