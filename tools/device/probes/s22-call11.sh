#!/usr/bin/env bash
# Run ar, eleventh to sixteenth calls (the export carried again in five
# copying calls, then this call with the binaries): the decode warm-up covering both
# routes and the plan kept per input shape, against 5180555's binaries
# (`*_base`), on a machine whose driver has not compiled the split route's
# pipelines yet (the first crossing's stall shows once per machine, so
# the new build runs first): the real export's `etwgpu generate` (64 and
# 256 tokens), oneshot_probe on the 8,194-row synthetic file (host rules a
# generation), llm_bench cells at 128 (SmolLM2 and 1B, alternated), goldens.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /tmp/smollm2
cp .xfer/r*/* /tmp/smollm2/ 2>/dev/null || true
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
gen new_256_1 $B/etwgpu 256
gen new_64_1 $B/etwgpu 64
gen base_256_1 $B/etwgpu_base 256
gen base_64_1 $B/etwgpu_base 64
gen new_256_2 $B/etwgpu 256
gen new_64_2 $B/etwgpu 64
gen base_256_2 $B/etwgpu_base 256
gen base_64_2 $B/etwgpu_base 64
$B/llm_bench --model smollm2 --weights q4 --save /tmp/sm8194.pte --build-only > /dev/null 2>&1
for v in new base; do
  p=$B/oneshot_probe; [ $v = base ] && p=$B/oneshot_probe_base
  echo "== oneshot 8194 $v"
  timeout 60 $p /tmp/sm8194.pte --max-tokens 64 --repeats 3 2>&1 | tee "$OUT/probe8194_$v.txt" | cut -c1-300
done
for r in 1 2; do
  for v in new base; do
    bin=$B/llm_bench; [ $v = base ] && bin=$B/llm_bench_base
    for m in smollm2 1b; do
      echo "== $m $v $r"
      timeout 90 $bin --model $m --weights q4 --prompts 16 --contexts 128 --steps 64 --repeats 3 \
        --json "$OUT/${m}_${v}_$r.json" 2>&1 | grep -E "^decode" | cut -c1-40
    done
  done
done
timeout 120 python3 tools/device/goldens.py $B/etwgpu test_data/fixtures /tmp/gold > "$OUT/goldens.txt" 2>&1
grep -v " pass " "$OUT/goldens.txt" | tail -5; grep -c " pass " "$OUT/goldens.txt"
cd "$OUT" && tar czf /tmp/s22c11.tgz . && rm -rf "$OUT"/* && mv /tmp/s22c11.tgz "$OUT/"
