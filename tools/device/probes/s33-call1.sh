#!/usr/bin/env bash
# Run be (prepared in session 32, for the next one): the coalesced
# epilogue of the cooperative-matrix GEMMs (branch coalesced-emit: each
# invocation writes one column of 8 rows, so a subgroup's store writes two
# runs of 16 adjacent outputs). Carry .gl and .xfer/s33a (new/: `etwgpu`,
# `coop_probe`, `llm_bench` of coalesced-emit; old/: the same of main).
# Run `bash tools/device/probes/s33-call1.sh` from branch coalesced-emit or
# main. Everything comes back as one $OUT/be.tgz, gpu.txt first.
#  0. the warm-up cell of `lib.sh` (session 32's calls skipped it, and
#     each had one `llm_bench` process whose 512 and 1,024 cells stalled);
#  1. new `coop_probe routed` (every coop route, f32 and f16, ragged);
#  2. new goldens at the default, `mixed` and `f16` (route required);
#  3. `coop_probe bisect` (the large kernel, f16 and f32 and the f32's
#     operand patches) and `coop_probe q4 new`, new then old;
#  4. the 1B prefill at 512 / 1,024 / 2,048 / 4,096, new and old, three
#     rounds, the order alternating.
set -u
source tools/device/probes/lib.sh
probe_gl
BN=/tmp/b/new
BO=/tmp/b/old
probe_unpack .xfer/s33a/new "$BN"
probe_unpack .xfer/s33a/old "$BO"
mkdir -p "$OUT" .device
cp "$BN/etwgpu" .device/etwgpu
probe_gpu
probe_warm "$BN/llm_bench"
probe_checks "$BN/coop_probe"
for v in new old; do
  bin=$BN; [ $v = old ] && bin=$BO
  echo "== bisect $v"
  timeout 150 "$bin/coop_probe" bisect > "$OUT/bisect_$v.txt" 2>&1
  grep -E "checks off|^Q4" "$OUT/bisect_$v.txt" | grep -E "shipped\)  |^Q4|patch 224" | cut -c1-100
  echo "== q4 $v"
  timeout 150 "$bin/coop_probe" q4 new > "$OUT/q4_$v.txt" 2>&1
  grep -E "shipped\) .*checks off|^Q4" "$OUT/q4_$v.txt" | cut -c1-100
done
for round in 1 2 3; do
  order="new old"; [ $round = 2 ] && order="old new"
  for v in $order; do
    bin=$BN; [ $v = old ] && bin=$BO
    echo "== prefill $v, round $round"
    timeout 80 "$bin/llm_bench" --model 1b --weights q4 --prompts 512,1024,2048,4096 --repeats 3 \
      --json "$OUT/pf${round}_$v.json" 2>&1 | grep -E "^prefill|rror" | cut -c1-48
  done
done
probe_pack be
ls "$OUT"
