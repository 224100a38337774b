#!/usr/bin/env bash
# Run at, fifth call (prepared): two readings of what q4_gemv_sdpa.wgsl's
# key loads cost. kw: the loads 16 bytes wide (the float16 key cache bound
# as vec4<u32>, eight halves a load, unpacked; the new key stored packed),
# so the scores issue half the key loads. pfa / pfb: every invocation
# first loads one 128-byte line of the key and of the value cache (the
# workgroups together cover the context), used only at the very end, so
# the whole context's lines are on their way from HBM to L2 at once
# (the weights streamed since the last token evict them): pfa before
# anything else, pfb after the new rows' storage barrier. v0 as shipped;
# alternated, the route forced on. Before the call, here:
# .xfer/s24e/bins.tgz, the shader-override build of llm_bench and
# oneshot_probe, stripped; and each override, the expanded f32_kvf16 text
# (as at 3819971) with its patch applied:
#   for v in kw pfa pfb; do mkdir -p .xfer/s24e/$v && f=.xfer/s24e/$v/q4_gemv_sdpa.f32_kvf16.wgsl &&
#   python3 tools/device/probes/shader_text.py Q4_GEMV_SDPA_F32_KVF16 > $f &&
#   patch $f < tools/device/probes/s24-call5-$v.patch; done
set -u
. tools/device/probes/lib.sh
X=.xfer/s24e
probe_init $X
for r in 1 2; do
  for v in v0 kw pfa pfb; do
    if [ $v = v0 ]; then e="ETWGPU_GEMV_ATTENTION=1"; else e="ETWGPU_GEMV_ATTENTION=1 ETWGPU_SHADER_OVERRIDE=$X/$v"; fi
    echo "== $v $r"
    env $e timeout 60 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 32,128,256,448 --steps 16 \
      --repeats 2 --json "$OUT/sm_${v}_$r.json" 2>&1 | grep -E "^decode|rror|shader .* from" | cut -c1-60
  done
done
probe_pack s24c5
