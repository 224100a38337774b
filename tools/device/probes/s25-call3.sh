#!/usr/bin/env bash
# Run au, third call. (1) The SmolLM2 shape's decode on the default route
# with GEMV_ATTN_AUTO_KEYS = 128 (the landing build), twice. (2) Where the
# implicit-GEMM convolution's time goes (`conv_gemm.wgsl`, float32; run
# ag: 1-1.8 TFLOP/s on ResNet-18's layers, slower than the direct kernel):
# the gemm bench's conv cells (ETWGPU_BENCH_LARGE=1) with the shipped
# kernel, then gnx (the patch gather replaced by a contiguous load: no
# index arithmetic, no padding branches) and gnm (one of each step's 16
# k products: the register tile's arithmetic and workgroup reads mostly
# gone). Wrong outputs in gnx / gnm, timing only. Before the call, here:
# .xfer/s25c/bins.tgz (llm_bench at the landing commit; the gemm bench
# built with the shader-override feature), .xfer/s25c/{g2,gnx,gnm}/. g2:
# the shipped work with its private arrays and vectors as named values
# (passes the conv tests through the override on lavapipe). skw: the
# split route's partials (`sdpa_split_short_rope.f32_kvf16`) with the key
# cache read 16 bytes a load as the GEMV route's now is, against sp (the
# split route as shipped), route forced, 128-448 keys.
set -u
. tools/device/probes/lib.sh
X=.xfer/s25c
probe_init $X
for r in 1 2; do
  echo "== auto $r"
  timeout 60 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 32,128,256 --steps 32 \
    --repeats 2 --json "$OUT/sm_auto_$r.json" 2>&1 | grep -E "^decode|rror" | cut -c1-60
done
for r in 1 2; do
  for v in sp skw; do
    e="ETWGPU_GEMV_ATTENTION=0"
    [ $v = skw ] && e="$e ETWGPU_SHADER_OVERRIDE=$X/skw"
    echo "== $v $r"
    env $e timeout 60 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 128,256,448 --steps 32 \
      --repeats 2 --json "$OUT/sm_${v}_$r.json" 2>&1 | grep -E "^decode|rror|shader .* from" | cut -c1-60
  done
done
echo "== conv g0"
ETWGPU_BENCH_LARGE=1 timeout 200 $B/gemm --bench 'conv' > "$OUT/conv_g0.txt" 2>&1
grep "an op" "$OUT/conv_g0.txt" | grep conv | tail -20
for v in g2 gnx gnm; do
  echo "== conv $v"
  ETWGPU_BENCH_LARGE=1 ETWGPU_SHADER_OVERRIDE=$X/$v timeout 150 $B/gemm --bench 'conv.*gemm$' > "$OUT/conv_$v.txt" 2>&1
  grep "an op" "$OUT/conv_$v.txt" | grep "conv.*gemm " | tail -10
done
probe_pack s25c3
