#!/usr/bin/env bash
# Run au, first call: what bounds q4_gemv_sdpa.wgsl's cost a key. v0 as
# shipped; w512 / w1024, the same text with 512 / 1024 invocations a
# workgroup (the scores' rounds over (kv head, key) pairs and the values'
# keys per invocation halve / quarter; the GEMV's K slices double /
# quadruple); w512kw, w512 with the key loads 16 bytes wide (session 24's
# kw patch); kw and pfb, session 24's fifth call as prepared. sp, the
# split route, once a round for reference. Alternated, route forced.
# Before the call, here: .xfer/s25a/bins.tgz (the shader-override build of
# llm_bench and oneshot_probe, stripped); the override dirs:
#   for v in kw pfb; do mkdir -p .xfer/s25a/$v && f=.xfer/s25a/$v/q4_gemv_sdpa.f32_kvf16.wgsl &&
#   python3 tools/device/probes/shader_text.py Q4_GEMV_SDPA_F32_KVF16 > $f &&
#   patch $f < tools/device/probes/s24-call5-$v.patch; done
#   w512, w1024, w512kw: `const WG: u32 = 256u;` set to 512 / 1024 in the
#   expanded text (w512kw: in kw's).
set -u
. tools/device/probes/lib.sh
X=.xfer/s25a
probe_init $X
for r in 1 2; do
  for v in v0 w512 w1024 w512kw kw pfb sp; do
    case $v in
      v0) e="ETWGPU_GEMV_ATTENTION=1" ;;
      sp) e="ETWGPU_GEMV_ATTENTION=0" ;;
      *) e="ETWGPU_GEMV_ATTENTION=1 ETWGPU_SHADER_OVERRIDE=$X/$v" ;;
    esac
    echo "== $v $r"
    env $e timeout 60 $B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 32,128,256,448 --steps 16 \
      --repeats 2 --json "$OUT/sm_${v}_$r.json" 2>&1 | grep -E "^decode|rror|shader .* from" | cut -c1-60
  done
done
probe_pack s25c1
