#!/usr/bin/env bash
# Run ar, sixth to ninth calls: the real SmolLM2-135M-Instruct 4-bit export
# (tools/export/smollm2.py, 512-row cache, sha256 c7e09fbf...), gzipped in
# five pieces under .xfer/r0..r4, one carried per call (`mkdir -p
# /tmp/smollm2 && cp .xfer/r*/* /tmp/smollm2/`); the last call runs this:
# `etwgpu generate` of 64 and 256 greedy tokens from "Once upon a time"
# (fresh processes, alternated), oneshot_probe on the export (three
# generations of 64 from 4 ids, the period between tokens), and the
# synthetic SmolLM2 shape saved with llm_bench's cell sizing (--contexts
# 256 --steps 64: a 322-row cache) against the default --save sizing
# (8,194 rows), one-shot.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /tmp/smollm2
cp .xfer/r*/* /tmp/smollm2/
B=/tmp/bins
mkdir -p $B && tar xzf .xfer/s22c/bins.tgz -C $B
cat /tmp/smollm2/q4part.* | gunzip > /tmp/smollm2/q4.pte
sha256sum /tmp/smollm2/q4.pte | cut -c1-16 | tee "$OUT/sha.txt"
M=/tmp/smollm2/q4.pte
T=/tmp/smollm2/tokenizer.json
for r in 1 2; do
  for n in 64 256; do
    echo "== real $n ($r)"
    $B/etwgpu generate --model $M --tokenizer $T --prompt "Once upon a time" --max-tokens $n > "$OUT/gen_real_${n}_$r.txt" 2>&1
    grep -o "prompt:.*" "$OUT/gen_real_${n}_$r.txt"
  done
done
echo "== oneshot_probe real"
timeout 60 $B/oneshot_probe $M --max-tokens 64 --repeats 3 2>&1 | tee "$OUT/probe_real.txt" | cut -c1-330
$B/llm_bench --model smollm2 --weights q4 --contexts 256 --steps 64 --save /tmp/sm322.pte --build-only > /dev/null 2>&1
$B/llm_bench --model smollm2 --weights q4 --save /tmp/sm8194.pte --build-only > /dev/null 2>&1
for r in 1 2; do
  for m in sm322 sm8194; do
    for n in 64 256; do
      echo "== $m $n ($r)"
      $B/etwgpu generate --model /tmp/$m.pte --tokens 1,2,3,4 --max-tokens $n 2>&1 | grep -o "prompt:.*" | tee "$OUT/gen_${m}_${n}_$r.txt"
    done
  done
done
cd "$OUT" && tar czf /tmp/s22c6.tgz . && rm -rf "$OUT"/* && mv /tmp/s22c6.tgz "$OUT/"
