# Shared set-up of the probe scripts (source it): `probe_init X` makes
# $OUT, unpacks X/bins.tgz into $B, writes the GPU's name and clocks to
# $OUT/gpu.txt and warms the GPU up with one SmolLM2 decode cell;
# `probe_pack NAME` leaves one $OUT/NAME.tgz of everything written (a call
# returns at most 8 files).
OUT=${OUT:-/tmp/out}
B=/tmp/bins

probe_init() {
  mkdir -p "$OUT" "$B" && tar xzf "$1/bins.tgz" -C "$B"
  nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > "$OUT/gpu.txt" 2>&1
  timeout 60 "$B/llm_bench" --model smollm2 --weights q4 --prompts 16 --contexts 128 --steps 32 --repeats 1 > /dev/null 2>&1
}

probe_pack() {
  (cd "$OUT" && tar czf "/tmp/$1.tgz" . && rm -rf "${OUT:?}"/* && mv "/tmp/$1.tgz" "$OUT/")
}
