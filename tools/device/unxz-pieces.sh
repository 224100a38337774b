#!/usr/bin/env bash
# Writes to stdout the file whose `xz -6` stream was split into the pieces
# DIR/q4x.0, q4x.1, ... (how the SmolLM2 export travels: `.xfer/sx1` ..
# `sx5`): xz where the machine has it, else Python's lzma. Used by
# run.sh's `smollm2` part and the top-1 probe.
set -euo pipefail
dir=${1:?usage: unxz-pieces.sh DIR > FILE}
if command -v xz > /dev/null; then
  cat "$dir"/q4x.* | xz -dc
else
  cat "$dir"/q4x.* | python3 -c 'import lzma, sys; sys.stdout.buffer.write(lzma.decompress(sys.stdin.buffer.read()))'
fi
