#!/usr/bin/env bash
# Run au, second call: the landed q4_gemv_sdpa.wgsl (key cache read as
# 16-byte words) on the fixtures' goldens, then the SmolLM2 shape's decode
# by route near their crossing (the GEMV route forced, the split route
# forced; 96..256 keys), and ro: the landed text with both caches bound
# read-only and the new rows not stored (timing only, wrong outputs): does
# a read-only binding make the key loads cheaper (the cache write would
# then move to the QKV GEMV)? Last the default route at 32..448.
# Before the call, here: .xfer/s25b/bins.tgz (etwgpu, and the
# shader-override build of llm_bench and oneshot_probe, stripped, at the
# landing commit); .xfer/s25b/ro/ (the expanded f32_kvf16 text with the
# edit above).
set -u
. tools/device/probes/lib.sh
X=.xfer/s25b
probe_init $X
export ETWGPU_FIXTURES=$PWD/test_data/fixtures PYTHONUNBUFFERED=1
timeout 120 python3 tools/device/goldens.py $B/etwgpu test_data/fixtures /tmp/gold > "$OUT/goldens.txt" 2>&1
tail -2 "$OUT/goldens.txt"
for r in 1 2; do
  for v in gemv ro split; do
    case $v in
      gemv) e="ETWGPU_GEMV_ATTENTION=1" ;;
      split) e="ETWGPU_GEMV_ATTENTION=0" ;;
      ro) e="ETWGPU_GEMV_ATTENTION=1 ETWGPU_SHADER_OVERRIDE=$X/ro" ;;
    esac
    echo "== $v $r"
    env $e timeout 60 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 96,128,160,192,256 --steps 16 \
      --repeats 2 --json "$OUT/sm_${v}_$r.json" 2>&1 | grep -E "^decode|rror|shader .* from" | cut -c1-60
  done
done
echo "== auto"
timeout 60 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 32,128,256,448 --steps 16 \
  --repeats 2 --json "$OUT/sm_auto.json" 2>&1 | grep -E "^decode|rror" | cut -c1-60
probe_pack s25c2
