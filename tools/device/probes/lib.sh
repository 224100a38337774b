# Shared set-up of the probe scripts (source it): `probe_init X` makes
# $OUT, unpacks X/bins.tgz into $B, writes the GPU's name and clocks to
# $OUT/gpu.txt and warms the GPU up with one SmolLM2 decode cell;
# `probe_pack NAME` leaves one $OUT/NAME.tgz of everything written (a call
# returns at most 8 files). For binaries carried as one xz tarball with
# their SHA-256 (`.xfer/*/bin.tar.xz`, `bin.sha256`, under the carry
# limit): `probe_gl` installs the Vulkan loader from .gl,
# `probe_unpack DIR DEST` unpacks and checks DIR's tarball into DEST, and
# `probe_warm LLM_BENCH` runs the warm-up cell with that binary.
OUT=${OUT:-/tmp/out}
B=/tmp/bins

probe_warm() {
  timeout 60 "$1" --model smollm2 --weights q4 --prompts 16 --contexts 128 --steps 32 --repeats 1 > /dev/null 2>&1
}

probe_init() {
  mkdir -p "$OUT" "$B" && tar xzf "$1/bins.tgz" -C "$B"
  nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > "$OUT/gpu.txt" 2>&1
  probe_warm "$B/llm_bench"
}

probe_gl() {
  for f in .gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
  export XDG_RUNTIME_DIR=/tmp
}

probe_unpack() {
  mkdir -p "$2"
  python3 -c "import lzma, tarfile; tarfile.open(fileobj=lzma.open('$1/bin.tar.xz')).extractall('$2')"
  (cd "$2" && sha256sum -c --quiet /dev/stdin) < "$1/bin.sha256" || { echo "$1: binaries damaged"; exit 1; }
}

probe_pack() {
  (cd "$OUT" && tar czf "/tmp/$1.tgz" . && rm -rf "${OUT:?}"/* && mv "/tmp/$1.tgz" "$OUT/")
}
