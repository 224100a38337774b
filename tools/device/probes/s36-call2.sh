#!/usr/bin/env bash
# Run bo's second call, on the machine call 1 left warm (carry .gl and
# .xfer/s36 again: unpacked anew where /tmp/b/s36 is gone): the parts of
# `final/` that call 1's time did not reach. Arguments: the seconds the
# call may take, then the parts (any of `etwgpu`, `peers`, `extra`, in
# that order). One $OUT/bo2.tgz; its final/ joins call 1's.
set -u
source tools/device/probes/lib.sh
probe_deadline "${1:-575}"
shift
probe_gl
BN=/tmp/b/s36
[ -x "$BN/new/llm_bench" ] || probe_unpack .xfer/s36 "$BN"
mkdir -p .device
cp "$BN/new/etwgpu" "$BN/new/llm_bench" .device/
probe_gpu
for part in "$@"; do
  case $part in
    etwgpu) probe_part etwgpu 120 ;;
    peers) probe_peers ;;
    extra) probe_part extra 55 ;;
  esac
done
python3 tools/device/report.py "$OUT/final" > "$OUT/final/table.md" 2>&1
probe_pack bo2
ls "$OUT"
