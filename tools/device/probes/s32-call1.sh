#!/usr/bin/env bash
# Run bb, first call: the 4-bit cooperative-matrix kernels with the scale
# held as loaded (`Elem`) until the dequantization (`common/coop_q4.wgsl`;
# run ba's `bisect` bit 1, the whole gap to the template). Carry .gl and
# .xfer/s32a (`etwgpu` and `coop_probe` of this build, one xz tarball).
#  1. `coop_probe routed`: every shipped GEMM route through the runtime
#     at ragged shapes against a CPU reference, f32 and f16 activations;
#  2. the fixture goldens at the default, and at `mixed` and `f16` with
#     the cooperative-matrix route required (`run.sh coop`);
#  3. `coop_probe bisect` (the fixed kernel, its remaining patches, its
#     f32 variant, the template) and `coop_probe q4 new` (the shipped small
#     and large kernels, f16 and f32 variants, at the six 4-bit shapes).
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export XDG_RUNTIME_DIR=/tmp
REAL=${OUT:-/tmp/out}
mkdir -p "$REAL" .device
python3 -c "import lzma, tarfile; tarfile.open(fileobj=lzma.open('.xfer/s32a/bin.tar.xz')).extractall('.device')"
(cd .device && sha256sum -c --quiet /dev/stdin) < .xfer/s32a/bin.sha256 || { echo "binaries damaged"; exit 1; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv | tee "$REAL/gpu.txt"
echo "== routed"
timeout 120 .device/coop_probe routed > "$REAL/routed.txt" 2>&1
echo "exit $?"; grep -cE "PASS" "$REAL/routed.txt"; grep -E "FAIL" "$REAL/routed.txt" | head -10
echo "== goldens"
timeout 90 python3 tools/device/goldens.py .device/etwgpu test_data/fixtures /tmp/gold-default > "$REAL/goldens_default.txt" 2>&1
tail -1 "$REAL/goldens_default.txt"
OUT="$REAL" bash tools/device/run.sh coop 2>&1 | tail -4
echo "== bisect"
timeout 120 .device/coop_probe bisect > "$REAL/bisect.txt" 2>&1
echo "exit $?"
grep -E "checks off|^Q4" "$REAL/bisect.txt" | cut -c1-100
echo "== q4"
timeout 150 .device/coop_probe q4 new > "$REAL/coop_probe_q4.txt" 2>&1
echo "exit $?"
grep -E "shipped.*checks off|^Q4" "$REAL/coop_probe_q4.txt" | cut -c1-100
