#!/usr/bin/env bash
# Packs this machine's Chromium (Debian's `chromium` package) for the GPU
# machine, which has no browser and no network: /usr/lib/chromium without
# what a headless WebGPU bench does not use (chromedriver, the Vulkan
# validation layer and mock driver, locales but en-US), and the shared
# libraries it links beyond the C library (resolved by ldd here, so the
# set is complete whatever that machine lacks; they go on LD_LIBRARY_PATH
# there, not into /), gzipped and split into pieces of PIECE bytes
# (default 40000000) under .xfer/browser-1/, .xfer/browser-2/, ...
# The page needs the npm package too: build it in release first
# (`cargo xtask web-build --release`, into crates/web/pkg, carried as an
# ignored path).
#
#   bash tools/device/browser-bundle.sh
#
# Then carry one piece per device call, less than 30 s apart (the machine
# stays warm), with the command
#   mkdir -p /tmp/chromium && cp .xfer/browser-*/* /tmp/chromium/
# and the last piece with carry [".gl", ".device/llm_bench", "crates/web/pkg", ".xfer/browser-N"]
# and `bash tools/device/run.sh browser` (see README.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
piece=${PIECE:-40000000}
stage=$(mktemp -d /tmp/etwgpu-chromium.XXXXXX)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/chromium" "$stage/lib"
cp -a /usr/lib/chromium/. "$stage/chromium/"
rm -f "$stage"/chromium/chromedriver "$stage"/chromium/libVkLayer_khronos_validation.so* \
  "$stage"/chromium/libVkICD_mock_icd.so*
find "$stage/chromium/locales" -type f ! -name 'en-US.pak' -delete
# Libraries of the browser and the libraries it opens at run time (ANGLE,
# SwiftShader, the Vulkan loader), minus the C library itself.
for bin in "$stage"/chromium/chromium "$stage"/chromium/*.so*; do
  { ldd "$bin" 2>/dev/null || true; } | awk '/=> \//{print $3}'
done | sort -u | grep -Ev '/(libc|libm|libdl|libpthread|librt|libresolv|ld-linux[^/]*)\.so' |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done
# One font and a fontconfig file, so pages render text without warnings.
mkdir -p "$stage/fonts"
cp -L /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf "$stage/fonts/" 2>/dev/null || true
cat > "$stage/fonts/fonts.conf" <<'EOF'
<?xml version="1.0"?>
<!DOCTYPE fontconfig SYSTEM "fonts.dtd">
<fontconfig><dir prefix="relative">.</dir><cachedir>/tmp/etwgpu-fontcache</cachedir></fontconfig>
EOF
/usr/lib/chromium/chromium --version > "$stage/VERSION"
rm -rf .xfer/browser-*
mkdir -p .xfer
grep -qx '/.xfer/' .git/info/exclude 2>/dev/null || echo /.xfer/ >> "$(git rev-parse --git-path info/exclude)"
tar -C "$stage" -czf "$stage.tgz" .
(cd .xfer && split -b "$piece" -d -a 1 "$stage.tgz" chromium.tgz.)
n=0
for p in .xfer/chromium.tgz.*; do
  n=$((n + 1))
  mkdir -p ".xfer/browser-$n"
  mv "$p" ".xfer/browser-$n/"
done
sha256sum "$stage.tgz" | awk '{print $1}' > ".xfer/browser-$n/chromium.sha256"
echo "chromium $(cat "$stage/VERSION"): $(stat -c %s "$stage.tgz") bytes gzipped in $n pieces:"
du -b .xfer/browser-*/*
rm -f "$stage.tgz"
[ -f crates/web/pkg/etwgpu_web_bg.wasm ] && du -b crates/web/pkg/* ||
  echo "crates/web/pkg is missing: cargo xtask web-build --release"
