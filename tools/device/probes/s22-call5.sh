#!/usr/bin/env bash
# Run ar, fifth call: oneshot_probe with llm_bench's decode cell first in
# the same process (--bench-cell: 64 steps at depth 16), then three
# one-shot generations of 64 tokens from 4 token ids; by route (default,
# ETWGPU_GEMV_ATTENTION=1 and =0).
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=/tmp/bins
mkdir -p $B && tar xzf .xfer/s22c/bins.tgz -C $B
$B/llm_bench --model smollm2 --weights q4 --save /tmp/sm.pte --build-only > /dev/null 2>&1
for e in ETWGPU_GEMV_ATTENTION= ETWGPU_GEMV_ATTENTION=1 ETWGPU_GEMV_ATTENTION=0; do
  echo "== $e"
  env $e timeout 60 $B/oneshot_probe /tmp/sm.pte --max-tokens 64 --repeats 3 --gpu-warm --bench-cell 2>&1 | tee "$OUT/probe_${e#*=}.txt" | cut -c1-330
done
cd "$OUT" && tar czf /tmp/s22c5.tgz . && rm -rf "$OUT"/* && mv /tmp/s22c5.tgz "$OUT/"
