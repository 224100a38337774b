#!/usr/bin/env bash
# Run be (prepared in session 32, for the next one): the coalesced
# epilogue of the cooperative-matrix GEMMs (branch coalesced-emit: each
# invocation writes one column of 8 rows, so a subgroup's store writes two
# runs of 16 adjacent outputs). Carry .gl and .xfer/s33a (new/: `etwgpu`,
# `coop_probe`, `llm_bench` of coalesced-emit; old/: the same of main).
# Run `bash tools/device/probes/s33-call1.sh` from branch coalesced-emit or
# main (the script is the same on both). At most 8 files come back.
#  1. new `coop_probe routed` (every coop route, f32 and f16, ragged);
#  2. new goldens at the default, `mixed` and `f16` (route required);
#  3. `coop_probe bisect` (the large kernel, f16 and f32 and the f32's
#     operand patches) and `coop_probe q4 new`, new then old;
#  4. the 1B prefill at 512 / 1,024 / 2,048 / 4,096, new and old, three
#     rounds, the order alternating.
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export XDG_RUNTIME_DIR=/tmp
REAL=${OUT:-/tmp/out}
B=/tmp/b
mkdir -p "$REAL" .device "$B/new" "$B/old" /tmp/o
for v in new old; do
  python3 -c "import lzma, tarfile; tarfile.open(fileobj=lzma.open('.xfer/s33a/$v/bin.tar.xz')).extractall('$B/$v')"
  (cd "$B/$v" && sha256sum -c --quiet /dev/stdin) < .xfer/s33a/$v/bin.sha256 || { echo "$v binaries damaged"; exit 1; }
done
cp "$B/new/etwgpu" .device/etwgpu
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$REAL/gpu.txt"
echo "== routed"
timeout 150 $B/new/coop_probe routed > "$REAL/routed.txt" 2>&1
echo "exit $?"; grep -E "routed check" "$REAL/routed.txt"; grep -E "FAIL" "$REAL/routed.txt" | head -10
echo "== goldens"
timeout 90 python3 tools/device/goldens.py .device/etwgpu test_data/fixtures /tmp/gold-default > /tmp/o/goldens_default.txt 2>&1
OUT=/tmp/o bash tools/device/run.sh coop > /dev/null 2>&1
for p in default mixed f16; do echo "$p $(grep -cE ' pass ' /tmp/o/goldens_$p.txt) pass"; grep -E " fail|FAIL" /tmp/o/goldens_$p.txt | head -5; done
for v in new old; do
  echo "== bisect $v"
  timeout 150 $B/$v/coop_probe bisect > /tmp/o/bisect_$v.txt 2>&1
  grep -E "checks off|^Q4" /tmp/o/bisect_$v.txt | grep -E "shipped\)  |^Q4|patch 224" | cut -c1-100
  echo "== q4 $v"
  timeout 150 $B/$v/coop_probe q4 new > /tmp/o/q4_$v.txt 2>&1
  grep -E "shipped\) .*checks off|^Q4" /tmp/o/q4_$v.txt | cut -c1-100
done
for round in 1 2 3; do
  order="new old"; [ $round = 2 ] && order="old new"
  for v in $order; do
    echo "== prefill $v, round $round"
    timeout 80 $B/$v/llm_bench --model 1b --weights q4 --prompts 512,1024,2048,4096 --repeats 3 \
      --json "/tmp/o/pf${round}_$v.json" 2>&1 | grep -E "^prefill|rror" | cut -c1-48
  done
done
cd /tmp/o && tar czf "$REAL/results.tgz" . && ls "$REAL"
