# Shared set-up of the probe scripts (source it): `probe_init X` makes
# $OUT, unpacks X/bins.tgz into $B, writes the GPU's name and clocks to
# $OUT/gpu.txt and warms the GPU up with one SmolLM2 decode cell;
# `probe_pack NAME` leaves one $OUT/NAME.tgz of everything written (a call
# returns at most 8 files). For binaries carried as one xz tarball with
# their SHA-256 (`.xfer/*/bin.tar.xz`, `bin.sha256`, under the carry
# limit): `probe_gl` installs the Vulkan loader from .gl,
# `probe_unpack DIR DEST` unpacks and checks DIR's tarball into DEST, and
# `probe_warm LLM_BENCH` runs the warm-up cell with that binary, and
# `probe_gpu` writes (and prints) the GPU's name and clocks;
# `probe_checks COOP_PROBE` checks a build before it is timed: that
# binary's `routed` check, then the goldens of `.device/etwgpu` at the
# default, `mixed` and `f16` (the route required), into $OUT. For a
# call bounded by the device time left: `probe_deadline SECONDS` starts
# its clock, `probe_left` says the seconds still free (20 kept for the
# packing), `probe_part PART SECONDS` runs `run.sh PART` into $OUT/final
# only if that many are left, and `probe_peers` runs the PyTorch peers
# there with their budget cut to the time left (if 150 s are);
# `probe_table` runs the Performance table's parts with .device's
# binaries into final/ (`etwgpu`, `extra`, `f32`, the peers, the `mixed`
# and `f16` goldens, `report.py`). `probe_clocks` logs the GPU's clocks
# every 50 ms into $OUT/clocks.csv until `probe_clocks_stop`;
# `probe_stamp` prefixes each line it reads with the host's time, to match
# that log.
OUT=${OUT:-/tmp/out}
B=/tmp/bins

probe_warm() {
  timeout 60 "$1" --model smollm2 --weights q4 --prompts 16 --contexts 128 --steps 32 --repeats 1 > /dev/null 2>&1
}

probe_gpu() {
  mkdir -p "$OUT"
  nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
}

probe_init() {
  mkdir -p "$OUT" "$B" && tar xzf "$1/bins.tgz" -C "$B"
  probe_gpu > /dev/null 2>&1
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

probe_deadline() {
  PROBE_LIMIT=$1
  PROBE_T0=$(date +%s)
  mkdir -p "$OUT/final"
}

probe_left() {
  echo $(( PROBE_LIMIT - ($(date +%s) - PROBE_T0) - 20 ))
}

probe_part() {
  if [ "$(probe_left)" -ge "$2" ]; then
    OUT="$OUT/final" timeout "$(probe_left)" bash tools/device/run.sh "$1" 2>&1 | grep -vE "^\|"
  else echo "skipped $1: $(probe_left) s left"; fi
}

probe_peers() {
  if [ "$(probe_left)" -ge 150 ]; then
    echo "== peers ($(probe_left) s left)"
    timeout "$(probe_left)" python3 tools/device/peers.py --config llama32_1b --dtype bf16 --modes eager,compile \
      --prompts 128,512,1024,2048,4096,8192 --contexts 128,512,2048,8192 --decode-tokens 128 \
      --budget-s $(( $(probe_left) - 70 )) --json "$OUT/final/peers_1b.json" 2>&1 | tail -5
  else echo "skipped peers: $(probe_left) s left"; fi
}

probe_checks() {
  echo "== routed"
  timeout 150 "$1" routed > "$OUT/routed.txt" 2>&1
  echo "exit $?"; grep -E "routed check" "$OUT/routed.txt"; grep -E "FAIL" "$OUT/routed.txt" | head -10
  echo "== goldens"
  timeout 90 python3 tools/device/goldens.py .device/etwgpu test_data/fixtures /tmp/gold-default \
    > "$OUT/goldens_default.txt" 2>&1
  OUT="$OUT" bash tools/device/run.sh coop > /dev/null 2>&1
  for p in default mixed f16; do
    echo "$p $(grep -cE ' pass ' "$OUT/goldens_$p.txt") pass"; grep -E " fail|FAIL" "$OUT/goldens_$p.txt" | head -5
  done
}

probe_table() {
  probe_part etwgpu 120
  probe_part extra 60
  probe_part f32 150
  probe_peers
  if [ "$(probe_left)" -ge 80 ]; then
    OUT="$OUT" timeout "$(probe_left)" bash tools/device/run.sh coop > /dev/null 2>&1
    for p in mixed f16; do
      echo "$p $(grep -cE ' pass ' "$OUT/goldens_$p.txt") pass"; grep -E " fail|FAIL" "$OUT/goldens_$p.txt" | head -5
    done
  else echo "skipped coop goldens: $(probe_left) s left"; fi
  python3 tools/device/report.py "$OUT/final" > "$OUT/final/table.md" 2>&1
}

probe_clocks() {
  mkdir -p "$OUT"
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,pstate,power.draw,utilization.gpu \
    --format=csv,noheader -lms 50 > "$OUT/clocks.csv" 2>&1 &
  PROBE_CLOCKS=$!
}

probe_clocks_stop() {
  kill "$PROBE_CLOCKS"
}

probe_stamp() {
  while IFS= read -r l; do echo "$(date +%H:%M:%S.%N) $l"; done
}
