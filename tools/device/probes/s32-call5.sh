#!/usr/bin/env bash
# Run bc: the table of main (869c280: the large split, the scale fix) on an
# H200, the first H200 run since run am; no peers (no time left for
# them). Carry .gl and .xfer/s32e (`etwgpu` and `llm_bench` of main, one
# xz tarball). Parts `etwgpu extra coop f32` of run.sh, one at a time,
# the tarball rewritten after each so a call cut short still brings back
# what finished.
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export XDG_RUNTIME_DIR=/tmp
REAL=${OUT:-/tmp/out}
mkdir -p "$REAL" .device /tmp/o2
python3 -c "import lzma, tarfile; tarfile.open(fileobj=lzma.open('.xfer/s32e/bin.tar.xz')).extractall('.device')"
(cd .device && sha256sum -c --quiet /dev/stdin) < .xfer/s32e/bin.sha256 || { echo "binaries damaged"; exit 1; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv | tee "$REAL/gpu.txt" /tmp/o2/gpu.txt
for part in etwgpu extra coop f32; do
  OUT=/tmp/o2 bash tools/device/run.sh $part 2>&1 | grep -E "^\[|^prefill|^decode|pass|fail|GB/s" | cut -c1-90
  (cd /tmp/o2 && tar czf "$REAL/table.tgz" .)
done
