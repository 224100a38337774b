#!/usr/bin/env bash
# Run ar, seventeenth to twenty-second calls (the export carried in five
# copying calls, then this one with the binaries), on a fresh machine: the
# case of call 6, a process whose reply crosses 80 keys after processes
# that stayed below: per build, `etwgpu generate` of 64 tokens (the
# binary's first process), then 256 twice; this build first, then
# 5180555's.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /tmp/smollm2
B=/tmp/bins
mkdir -p $B && tar xzf .xfer/s22d/bins.tgz -C $B
cat /tmp/smollm2/q4part.* | gunzip > /tmp/smollm2/q4.pte
sha256sum /tmp/smollm2/q4.pte | cut -c1-16 | tee "$OUT/sha.txt"
M=/tmp/smollm2/q4.pte
T=/tmp/smollm2/tokenizer.json
gen() { # label binary tokens
  local t0=$(date +%s.%N)
  $2 generate --model $M --tokenizer $T --prompt "Once upon a time" --max-tokens $3 > "$OUT/gen_$1.txt" 2>&1
  local t1=$(date +%s.%N)
  echo "$1: $(grep -o 'prompt:.*' "$OUT/gen_$1.txt") wall $(python3 -c "print(round($t1 - $t0, 3))") s"
}
for v in new base; do
  bin=$B/etwgpu; [ $v = base ] && bin=$B/etwgpu_base
  gen ${v}_64_1 $bin 64
  gen ${v}_256_1 $bin 256
  gen ${v}_256_2 $bin 256
done
cd "$OUT" && tar czf /tmp/s22c17.tgz . && rm -rf "$OUT"/* && mv /tmp/s22c17.tgz "$OUT/"
