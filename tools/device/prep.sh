#!/usr/bin/env bash
# Prepares a run on the lent GPU machine (no Rust, no network there):
# downloads the Vulkan loader AND libglvnd into .gl/ (NVIDIA's Vulkan ICD,
# libGLX_nvidia.so.0, needs libGLdispatch from libglvnd0: with the loader
# alone, wgpu finds no adapter), builds the release binaries and copies them
# into .device/. Then call the device tool with carry [".gl", ".device"] and
# a command that starts with
#   for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig;
set -euo pipefail
top=$(git rev-parse --show-toplevel)
cd "$top"
for d in /.gl/ /.device/; do
  grep -qxF "$d" .git/info/exclude 2>/dev/null || echo "$d" >> .git/info/exclude
done
mkdir -p .gl .device
if ! ls .gl/libglvnd0_*.deb >/dev/null 2>&1; then
  apt-get update -qq >/dev/null
  (cd .gl && apt-get download libvulkan1 libglvnd0 libegl1 libgl1 libglx0 libopengl0 libgles2 >/dev/null 2>&1)
fi
cargo build --release -p etwgpu-cli
cp target/release/etwgpu .device/etwgpu
bench=$(cargo bench -p etwgpu-runtime --no-run --message-format=json 2>/dev/null |
  python3 -c 'import json,sys; print([m["executable"] for m in map(json.loads, sys.stdin) if m.get("reason")=="compiler-artifact" and m.get("executable") and m["target"]["kind"]==["bench"]][-1])')
cp "$bench" .device/runtime-bench
strip .device/etwgpu .device/runtime-bench
ls -l .gl .device
