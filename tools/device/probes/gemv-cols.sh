#!/usr/bin/env bash
# Run an, first call: the 4-bit decode GEMVs' columns per workgroup and the
# head's norm as its own dispatch, through the probe switches of a
# throwaway build (ETWGPU_PROBE_GEMV_WGS=a,b: 32 columns a workgroup where
# that makes >= a workgroups, 16 where >= b; ETWGPU_PROBE_NORM_SPLIT_N=n:
# the RMS norm as its own dispatch before GEMVs of >= n outputs).
# Configurations alternate (base first and last); decode only.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
cfgs=(base w512 w1024 w4096 split w512split base2 w512b w4096b splitb)
env_of() {
  case $1 in
  base*) echo "" ;;
  w512split) echo "ETWGPU_PROBE_GEMV_WGS=512,512 ETWGPU_PROBE_NORM_SPLIT_N=32768" ;;
  w512*) echo "ETWGPU_PROBE_GEMV_WGS=512,512" ;;
  w1024*) echo "ETWGPU_PROBE_GEMV_WGS=1024,1024" ;;
  w4096*) echo "ETWGPU_PROBE_GEMV_WGS=4096,4096" ;;
  split*) echo "ETWGPU_PROBE_NORM_SPLIT_N=32768" ;;
  esac
}
# Warm the GPU's clocks.
timeout 60 .device/llm_bench --model smollm2 --weights q4 --contexts 128 --steps 64 --repeats 1 > /dev/null 2>&1
for c in "${cfgs[@]}"; do
  e=$(env_of "$c")
  echo "== $c: $e"
  env $e timeout 60 .device/llm_bench --model 1b --weights q4 --contexts 128,2048 --steps 64 --repeats 3 \
    --json "$OUT/1b_$c.json" 2>&1 | grep -E "^decode|by shader|q4_gemv|dispatches" | head -16
  env $e timeout 40 .device/llm_bench --model smollm2 --weights q4 --contexts 32,128 --steps 64 --repeats 3 \
    --json "$OUT/sm_$c.json" 2>&1 | grep -E "^decode" | head -4
done
