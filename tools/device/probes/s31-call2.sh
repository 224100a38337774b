#!/usr/bin/env bash
# Run ba, second call (only after the first, s30-call4.sh, passed `routed`
# and showed the prefill gain): the Performance table from main with the
# 4-bit large tile as 128 x 256 (branch q4-merge: main + e6594f7 again),
# `run.sh etwgpu extra coop f32` as run az's first call ran it, then the
# 1B 4-bit prefill profiled at 512 tokens (`llm_bench` profiles its largest
# prompt), for where the 512-token call's time goes. On an H200 (none
# ran since run am) the PyTorch peers too (`run.sh peers`, ~210 s), so
# the table has its peers from the same machine. Carry .gl and
# .xfer/s31 (etwgpu and llm_bench of that build); everything is packed
# into one file (a call brings back at most 8).
set -u
REAL=${OUT:-/tmp/out}
mkdir -p "$REAL" .device /tmp/o2
cp .xfer/s31/etwgpu .xfer/s31/llm_bench .device/
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > /tmp/o2/gpu.txt 2>&1
parts="etwgpu extra coop f32"
grep -q H200 /tmp/o2/gpu.txt && parts="$parts peers"
OUT=/tmp/o2 bash tools/device/run.sh $parts
echo "== prefill profiled at 512"
timeout 60 .device/llm_bench --model 1b --weights q4 --prompts 512 --contexts 128 --steps 8 \
  --repeats 1 --json /tmp/o2/profile512_1b_q4.json 2>&1 | grep -E "^prefill|one call of 512" -A8 | head -12
(cd /tmp/o2 && tar czf "$REAL/call2.tgz" .)
