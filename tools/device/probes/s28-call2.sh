#!/usr/bin/env bash
# Run ax, the conv call: the implicit GEMM on cooperative matrices
# (`conv_gemm_coop.wgsl`, new, never run on a GPU: lavapipe has no matrix
# units), checked then timed; run av's float32 conv trials on one cell; the
# SmolLM2 decode on the default route. Bins (branch conv-coop, built with
# the shader-override feature, stripped) in .xfer/s28/bins.tgz: llm_bench,
# the gemm bench, the runtime's `it` tests, the `etwgpu` CLI (goldens).
# Overrides of run av (`s26-variants.py`) in .xfer/s26/<variant>/ (carry
# both folders). The essentials first (packed as s28c2a), in case the
# call runs out of the session's device time.
set -u
. tools/device/probes/lib.sh
X=.xfer/s28
probe_init $X
export GPU_TESTS=require ETWGPU_COOP_MATRIX=1
echo "== conv tests (coop route required)"
timeout 90 $B/it conv:: > "$OUT/conv_tests.txt" 2>&1
grep -E "^test |test result|panicked" "$OUT/conv_tests.txt" | head -20
echo "== goldens at f16, the route required (convolutions on the matrix units)"
timeout 100 python3 tools/device/goldens.py $B/etwgpu test_data/fixtures /tmp/gold16 --precision f16 \
  > "$OUT/goldens_f16.txt" 2>&1
tail -3 "$OUT/goldens_f16.txt"
grep -i -E "fail|error" "$OUT/goldens_f16.txt" | head -5
echo "== conv cells: direct / gemm (float32) / coop (f16 operands)"
ETWGPU_BENCH_LARGE=1 ETWGPU_BENCH_ONLY=conv timeout 180 $B/gemm --bench > "$OUT/conv_cells.txt" 2>&1
grep "an op" "$OUT/conv_cells.txt" | grep -v "^ " | tail -40
probe_pack s28c2a
echo "== auto"
timeout 60 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 32,128,256 --steps 32 \
  --repeats 2 --json "$OUT/sm_auto.json" 2>&1 | grep -E "^decode|rror" | cut -c1-60
CELL="conv 3x3/1 64->64 56x56 batch 8 gemm"
for v in old gnm gnx; do
  echo "== $v on one cell"
  ETWGPU_BENCH_LARGE=1 ETWGPU_BENCH_ONLY="$CELL" ETWGPU_SHADER_OVERRIDE=$PWD/.xfer/s26/$v timeout 60 \
    $B/gemm --bench > "$OUT/conv_$v.txt" 2>&1
  grep -E "etwgpu: shader" "$OUT/conv_$v.txt" | head -1
  grep "an op" "$OUT/conv_$v.txt" | grep -v "^ " | tail -2
done
probe_pack s28c2b
