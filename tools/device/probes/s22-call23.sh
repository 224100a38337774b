#!/usr/bin/env bash
# Run ar, twenty-third to twenty-eighth calls (the export in five copying
# calls, then this), on a fresh machine: where a later process's 256-token
# reply stalls. oneshot_probe (this build) on the real export: a process
# generating 64 tokens from 4 ids, then two processes generating 256; each
# prints its host work, plans built, host rules and its five longest gaps
# between tokens.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /tmp/smollm2
B=/tmp/bins
mkdir -p $B && tar xzf .xfer/s22d/bins.tgz -C $B
cat /tmp/smollm2/q4part.* | gunzip > /tmp/smollm2/q4.pte
M=/tmp/smollm2/q4.pte
for r in 64 256 256; do
  echo "== $r"
  timeout 60 $B/oneshot_probe $M --max-tokens $r --repeats 1 2>&1 | tee -a "$OUT/probe.txt" | cut -c1-400
done
cd "$OUT" && tar czf /tmp/s22c23.tgz . && rm -rf "$OUT"/* && mv /tmp/s22c23.tgz "$OUT/"
