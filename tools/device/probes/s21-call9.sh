#!/usr/bin/env bash
# Run aq, ninth call: one-shot `etwgpu generate` with the decode path
# warmed up at load (`Generator::warm_up_decode`, new) against the build
# before it (etwgpu_old, c51ba7d), alternated, on the synthetic SmolLM2
# 4-bit shape written by `llm_bench --save`.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=/tmp/bins
mkdir -p $B && tar xzf .xfer/s21h/bins.tgz -C $B
$B/llm_bench --model smollm2 --weights q4 --save /tmp/sm.pte --build-only > /dev/null 2>&1
ls -la /tmp/sm.pte
for c in new old new2 old2; do
  bin=$B/etwgpu
  case $c in
  old*) bin=$B/etwgpu_old ;;
  esac
  for n in 64 256; do
    echo "== $c $n"
    /usr/bin/time -f "wall %e s" timeout 60 $bin generate --model /tmp/sm.pte --tokens 1,2,3,4 --max-tokens $n \
      > "$OUT/gen_${c}_$n.txt" 2>&1
    tail -2 "$OUT/gen_${c}_$n.txt"
  done
done
cd "$OUT" && tar czf /tmp/s21c9.tgz . && rm -rf "$OUT"/* && mv /tmp/s21c9.tgz "$OUT/"
