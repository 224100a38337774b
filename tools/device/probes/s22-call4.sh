#!/usr/bin/env bash
# Run ar, fourth call: oneshot_probe (crates/llm/examples) on the synthetic
# SmolLM2 4-bit .pte: loaded as the CLI loads it, three generations of 64
# and of 256 tokens in one process, with and without llm_bench's second
# of GPU work first; the period between tokens as read back.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=/tmp/bins
mkdir -p $B && tar xzf .xfer/s22c/bins.tgz -C $B
$B/llm_bench --model smollm2 --weights q4 --save /tmp/sm.pte --build-only > /dev/null 2>&1
for n in 64 256; do
  for w in "" --gpu-warm; do
    echo "== $n $w"
    timeout 60 $B/oneshot_probe /tmp/sm.pte --max-tokens $n --repeats 3 $w 2>&1 | tee "$OUT/probe_${n}${w}.txt" | cut -c1-400
  done
done
echo "== generate 64"; $B/etwgpu generate --model /tmp/sm.pte --tokens 1,2,3,4 --max-tokens 64 2>&1 | grep -o "decode.*"
cd "$OUT" && tar czf /tmp/s22c4.tgz . && rm -rf "$OUT"/* && mv /tmp/s22c4.tgz "$OUT/"
