#!/usr/bin/env bash
# Run ba, second call: why the shipped 128 x 256 4-bit kernel runs 20-40%
# under the template's form of the same tiling (the first call). Carry
# .gl, .xfer/s31c (the first call's binaries) and .xfer/s31d (`coop_probe`
# with `bisect`, built from branch q4-merge plus the `Patch` edits): the
# shipped kernel, its forms with each difference from the template undone
# (scale as f16, the word index written out, the half words stored one
# after the other, no bias, x converted as loaded; then all five), and the
# template's form, at the three 2,048-row shapes; then a second round of
# the first call's prefill, new against old.
set -u
source tools/device/probes/s31-unpack.sh
python3 -c "import lzma, shutil; shutil.copyfileobj(lzma.open('.xfer/s31d/coop_probe.xz'), open('$B/coop_probe_bisect', 'wb'))"
chmod +x "$B/coop_probe_bisect"
(cd "$B" && sha256sum -c --quiet /dev/stdin) < .xfer/s31d/coop_probe.sha256 || { echo "probe damaged"; exit 1; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv | tee "$REAL/gpu2.txt"
echo "== bisect"
timeout 120 $B/coop_probe_bisect bisect > "$REAL/bisect.txt" 2>&1
echo "exit $?"
grep -E "checks off|^Q4" "$REAL/bisect.txt"
for b in new old; do
  echo "== prefill $b, round 2"
  timeout 60 $B/llm_bench_$b --model 1b --weights q4 --prompts 512,2048,4096 --repeats 3 \
    --json "$REAL/pf2_$b.json" 2>&1 | grep -E "^prefill|rror" | cut -c1-48
done
