# Sourced by run ba's calls (s31-call1.sh, s31-call2.sh): the Vulkan
# loader from .gl, then the binaries of .xfer/s31c (one xz tarball, with
# their SHA-256) unpacked into $B; $REAL is where the call's files go.
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export XDG_RUNTIME_DIR=/tmp
REAL=${OUT:-/tmp/out}
B=/tmp/b
mkdir -p "$REAL" "$B"
python3 -c "import lzma, tarfile; tarfile.open(fileobj=lzma.open('.xfer/s31c/bin.tar.xz')).extractall('$B')"
(cd "$B" && sha256sum -c --quiet /dev/stdin) < .xfer/s31c/bin.sha256 || { echo "binaries damaged"; exit 1; }
