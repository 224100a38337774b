#!/usr/bin/env bash
# Run aq, eighth call (after three calls that copied .xfer/sm-1..3 to
# /tmp/smollm2): the real SmolLM2-135M-Instruct 4-bit export,
# `etwgpu generate` of 64 and 256 greedy tokens from a short prompt, the
# default (the decode attention by live context) against the split route
# (ETWGPU_GEMV_ATTENTION=0), alternated.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /tmp/smollm2
cp .xfer/sm-*/* /tmp/smollm2/
B=/tmp/bins
mkdir -p $B && tar xzf .xfer/s21g/bins.tgz -C $B
cat /tmp/smollm2/q4part.* | gunzip > /tmp/smollm2/model.pte
sha256sum /tmp/smollm2/model.pte
for c in auto off auto2 off2; do
  e="ETWGPU_GEMV_ATTENTION="
  case $c in
  off*) e="ETWGPU_GEMV_ATTENTION=0" ;;
  esac
  for n in 64 256; do
    echo "== $c $n: $e"
    env $e timeout 60 $B/etwgpu generate --model /tmp/smollm2/model.pte --tokenizer /tmp/smollm2/tokenizer.json \
      --prompt "Once upon a time" --max-tokens $n > "$OUT/gen_${c}_$n.txt" 2>&1
    tail -2 "$OUT/gen_${c}_$n.txt"
  done
done
cd "$OUT" && tar czf /tmp/s21c8.tgz . && rm -rf "$OUT"/* && mv /tmp/s21c8.tgz "$OUT/"
