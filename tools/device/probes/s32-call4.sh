#!/usr/bin/env bash
# Run bb, fourth call: the large tile's split with slices of at least 512
# inputs (branch split-512), so the O projection at 512 and 1,024 rows
# splits too.
# Carry .gl, .xfer/s32d (`etwgpu`, `coop_probe`, `llm_bench` of split-512,
# one xz tarball) and .xfer/s32c (main: the large split at 2,048 inputs,
# as "old").
#  1. `coop_probe routed` (the large split now also at K = 2,048);
#  2. the goldens at the default, and at `mixed` and `f16` with the route
#     required;
#  3. the 1B 4-bit prefill at the default (`mixed`), new and old in turn,
#     three rounds, the order alternating; then new profiled at 512 and 1,024. At most 8 files come
#     back: the goldens, the prefill runs and the profiles go as 3 tarballs.
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export XDG_RUNTIME_DIR=/tmp
REAL=${OUT:-/tmp/out}
B=/tmp/b
mkdir -p "$REAL" .device "$B"
python3 -c "import lzma, tarfile; tarfile.open(fileobj=lzma.open('.xfer/s32d/bin.tar.xz')).extractall('.device')"
(cd .device && sha256sum -c --quiet /dev/stdin) < .xfer/s32d/bin.sha256 || { echo "binaries damaged"; exit 1; }
mkdir -p "$B/old"
python3 -c "import lzma, tarfile; tarfile.open(fileobj=lzma.open('.xfer/s32c/bin.tar.xz')).extractall('$B/old')"
(cd "$B/old" && sha256sum -c --quiet /dev/stdin) < .xfer/s32c/bin.sha256 || { echo "old binaries damaged"; exit 1; }
cp "$B/old/llm_bench" "$B/llm_bench_old_main"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv | tee "$REAL/gpu.txt"
echo "== routed"
timeout 120 .device/coop_probe routed > "$REAL/routed.txt" 2>&1
echo "exit $?"; grep -E "routed check" "$REAL/routed.txt"; grep -E "FAIL" "$REAL/routed.txt" | head -10
grep -cE "large_splitk" "$REAL/routed.txt"
echo "== goldens"
timeout 90 python3 tools/device/goldens.py .device/etwgpu test_data/fixtures /tmp/gold-default > "$REAL/goldens_default.txt" 2>&1
grep -cE " pass " "$REAL/goldens_default.txt"; grep -E " fail|FAIL" "$REAL/goldens_default.txt" | head -5
OUT="$REAL" bash tools/device/run.sh coop > /dev/null 2>&1
for p in mixed f16; do grep -cE " pass " "$REAL/goldens_$p.txt"; grep -E " fail|FAIL" "$REAL/goldens_$p.txt" | head -5; done
for round in 1 2 3; do
  order="new old"; [ $round = 2 ] && order="old new"
  for b in $order; do
    bin=.device/llm_bench; [ $b = old ] && bin=$B/llm_bench_old_main
    echo "== prefill $b, round $round"
    timeout 80 $bin --model 1b --weights q4 --prompts 128,512,1024,2048 --repeats 3 \
      --json "$REAL/pf${round}_$b.json" 2>&1 | grep -E "^prefill|rror" | cut -c1-48
  done
done
for p in 512 1024; do
  echo "== new profiled at $p"
  timeout 60 .device/llm_bench --model 1b --weights q4 --prompts $p --contexts 128 --steps 8 \
    --repeats 1 --json "$REAL/profile${p}.json" > "$REAL/profile${p}.txt" 2>&1
  grep -E "one call of $p" -A14 "$REAL/profile${p}.txt" | head -16
done
cd "$REAL" && tar czf goldens.tgz goldens_*.txt && tar czf prefill.tgz pf*.json && tar czf profiles.tgz profile* \
  && rm -f goldens_*.txt pf*.json profile*.json profile*.txt table.md
ls "$REAL"
