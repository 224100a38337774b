#!/usr/bin/env bash
# Run aw, the SmolLM2 top-1 calls: `smollm2_q4_agrees_with_eager` (the
# release `it` binary of crates/llm, stripped) on the real 4-bit export
# against `reference_q4.json` (192 positions) and `reference_q4_wide.json`
# (768 more, new this session), at `f32`, `mixed` and `f16` with the
# cooperative-matrix route required. Earlier calls of the same warm
# machine copied the first pieces: `mkdir -p /tmp/sm && cp .xfer/smK/* /tmp/sm/`
# (the export compressed with `xz -6` (123 MB, gzip's was 155 MB), split
# into 30 MB `q4x.N`: calls carrying .gl and one 45 MB piece beside the
# ~7.5 MB working tree were refused as over the 64 MiB a call carries, in
# session 27); this call carries the last piece with the binary, the
# tokenizer and the two references. Session 28: the first pieces ride
# along with other calls (`.xfer/sx1` .. `sx4`, this call `sx5`).
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export XDG_RUNTIME_DIR=/tmp GPU_TESTS=require ETWGPU_SMOLLM2=/tmp/sm ETWGPU_COOP_MATRIX=1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /tmp/sm
cp .xfer/"$1"/* /tmp/sm/
bash tools/device/unxz-pieces.sh /tmp/sm > /tmp/sm/smollm2_q4.pte
(cd /tmp/sm && sha256sum smollm2_q4.pte | tee "$OUT/sha.txt")
nvidia-smi --query-gpu=name --format=csv,noheader >> "$OUT/sha.txt"
for p in ${TOP1_PRECISIONS:-f32 mixed f16}; do
  echo "== $p"
  ETWGPU_PRECISION=$p timeout 60 /tmp/sm/it --exact smollm2::smollm2_q4_agrees_with_eager \
    --nocapture > "$OUT/top1_$p.txt" 2>&1
  grep -E "agreement|misses|test result|panicked" "$OUT/top1_$p.txt"
done
