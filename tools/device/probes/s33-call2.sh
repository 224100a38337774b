#!/usr/bin/env bash
# Run bf (session 33, second call): naga's loop guard for the large 4-bit
# kernels. Run be found the large 4-bit kernel's f32 variant as fast as its
# f16 one when made with every check (`checks full`: the loop guard on),
# 15-22% faster than as the runtime made it, and the small kernel ~10%
# slower with it. Branch loop-guard marks the four large 4-bit families
# `// loop-guard: on` (the runtime keeps the guard for them alone);
# `ETWGPU_SHADER_CHECKS=full` keeps it for every kernel. Carry .gl,
# .xfer/s33a (old/ is unused; new/: main at b12143f, no marks) and
# .xfer/s33b (new/: branch loop-guard). One $OUT/bf.tgz comes back.
#  1. the 1B prefill at 512 / 1,024 / 2,048 / 4,096 and decode at 128:
#     guard (s33b), main, main with `full`; two rounds, the order turned;
#  2. one 512-token call profiled by kernel, guard and main;
#  3. `coop_probe dense new` (dense f16 4,096^3 since the coalesced epilogue).
set -u
source tools/device/probes/lib.sh
probe_gl
BM=/tmp/b/main
BG=/tmp/b/guard
probe_unpack .xfer/s33a/new "$BM"
probe_unpack .xfer/s33b/new "$BG"
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
probe_warm "$BG/llm_bench"
bench() { # NAME ARGS...
  local name=$1; shift
  case $name in
    *_full) ETWGPU_SHADER_CHECKS=full timeout 90 "$BM/llm_bench" --model 1b --weights q4 "$@" --json "$OUT/$name.json" 2>&1 ;;
    *_main) timeout 90 "$BM/llm_bench" --model 1b --weights q4 "$@" --json "$OUT/$name.json" 2>&1 ;;
    *_guard) timeout 90 "$BG/llm_bench" --model 1b --weights q4 "$@" --json "$OUT/$name.json" 2>&1 ;;
  esac
}
for round in 1 2; do
  order="guard main full"; [ $round = 2 ] && order="full main guard"
  for c in $order; do
    echo "== prefill $c, round $round"
    bench "pf${round}_$c" --prompts 512,1024,2048,4096 --contexts 128 --steps 64 --repeats 3 \
      | grep -E "^prefill|^decode|rror" | cut -c1-60
  done
done
for c in guard main; do
  echo "== profile 512 $c"
  bench "prof512_$c" --prompts 512 --contexts 128 --steps 16 --repeats 3 > "$OUT/prof512_$c.txt"
  grep -E "^prefill|one call of 512" -A12 "$OUT/prof512_$c.txt" | grep -vE "^decode" | head -30 | cut -c1-110
done
echo "== dense"
timeout 170 "$BG/coop_probe" dense new > "$OUT/dense.txt" 2>&1
grep -E "shipped\)|best" -A1 "$OUT/dense.txt" | cut -c1-110 | head -12
probe_pack bf
ls "$OUT"
