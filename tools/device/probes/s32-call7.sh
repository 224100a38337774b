#!/usr/bin/env bash
# Run bf: the last 158 device-seconds of session 32 on the coalesced
# epilogue (branch coalesced-emit): its routed check, then its `bisect`
# (the large kernel's f16 and f32 variants), the parts of run be that fit.
# Carry .gl and .xfer/s33a (only new/ is used).
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export XDG_RUNTIME_DIR=/tmp
REAL=${OUT:-/tmp/out}
mkdir -p "$REAL" /tmp/b
python3 -c "import lzma, tarfile; tarfile.open(fileobj=lzma.open('.xfer/s33a/new/bin.tar.xz')).extractall('/tmp/b')"
(cd /tmp/b && sha256sum -c --quiet /dev/stdin) < .xfer/s33a/new/bin.sha256 || { echo "binaries damaged"; exit 1; }
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$REAL/gpu.txt"
timeout 60 /tmp/b/coop_probe routed > "$REAL/routed.txt" 2>&1
echo "routed exit $?"; grep -E "routed check" "$REAL/routed.txt"; grep -E "FAIL" "$REAL/routed.txt" | head -10
timeout 60 /tmp/b/coop_probe bisect > "$REAL/bisect.txt" 2>&1
echo "bisect exit $?"
grep -E "checks off|^Q4" "$REAL/bisect.txt" | grep -E "shipped\)  |^Q4|patch 224|patch 64" | cut -c1-100
