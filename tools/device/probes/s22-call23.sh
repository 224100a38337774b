#!/usr/bin/env bash
# Run ar, twenty-third call, on a fresh machine: where a later process's
# 256-token reply stalls. The synthetic SmolLM2 4-bit shape saved with the
# real export's geometry of calls and cache (--prompts 16: calls of up to
# 17 rows; --contexts 446 --steps 64: a 512-row cache), then oneshot_probe
# (this build): a process generating 64 tokens from 4 ids, then two
# generating 256; each prints its host work, plans built, host rules and
# its five longest gaps between tokens.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=/tmp/bins
mkdir -p $B && tar xzf .xfer/s22d/bins.tgz -C $B
$B/llm_bench --model smollm2 --weights q4 --prompts 16 --contexts 446 --steps 64 --save /tmp/sm512.pte --build-only > /dev/null 2>&1
for r in 64 256 256; do
  echo "== $r"
  timeout 60 $B/oneshot_probe /tmp/sm512.pte --max-tokens $r --repeats 1 2>&1 | tee -a "$OUT/probe.txt" | cut -c1-400
done
cd "$OUT" && tar czf /tmp/s22c23.tgz . && rm -rf "$OUT"/* && mv /tmp/s22c23.tgz "$OUT/"
