#!/usr/bin/env bash
# One call on the lent GPU machine (no Rust, no network there). Build the
# bundle here first (`cargo xtask device-bundle`), then call the device
# tool with carry [".gl", ".device"] and the command
#   bash tools/device/run.sh [PARTS]
# PARTS (default: etwgpu peers) is any of:
#   etwgpu   adapter, copy bandwidth, fixture goldens, the synthetic
#            Llama-3.2-1B-shaped 4-bit model (prefill/decode tokens/s,
#            dispatches per token, load time)
#   extra    the 1B shape's decode with the KV cache as exported (float32)
#            and the SmolLM2-135M-shaped models, 4-bit and fp32
#   mixed    every fixture's goldens at `--precision mixed` and `f16` with
#            the cooperative-matrix route required (ETWGPU_COOP_MATRIX=1),
#            then the 4-bit prefill at `mixed` (the 1B shape 128..8192, the
#            SmolLM2 shape 128 and 511: mixed_*.json, rows of their own in
#            report.py's table)
#   coop     the `mixed` part's goldens alone (no prefill: at the default,
#            `mixed`, the `etwgpu` part's prefill rows already are `mixed`)
#   f32      the 4-bit prefill at `--precision f32` (float32 end to end; the
#            default is `mixed` since run ay, so the `etwgpu` part's prefill
#            rows are `mixed`): f32_*.json, rows of their own in the table
#   peers    the same Llama shapes in PyTorch, eager and torch.compile
#            (or set PEERS_FROM=tools/device/results/RUN to reuse a run's
#            peers_1b.json in the table instead of measuring again)
#   smollm2  the real SmolLM2 4-bit export, compressed (xz, else gzip) and
#            split into pieces carried in .xfer/K/ over several calls (.xfer/sx1
#            .. sx5 with the tokenizer; see README.md): a chat
#            of 256 greedy tokens, tokens/s, and `etwgpu bench -p 512 -n 128`
#   families every fixture as one markdown table (goldens.py --families):
#            delegates, GPU calls, CPU calls, host round trips, dispatches,
#            max error against the goldens, wall time per call (median of 21)
#   int8     `etwgpu bench` (latency p50/p90/p99) of the int8 and fp32 CNNs
#            of tools/export/q8_cnn.py (MobileNetV2- and ResNet-18-class at
#            224x224: mobilenet_q8 3.6 MiB, mobilenet_fp32 13.4 MiB,
#            resnet_q8 11.2 MiB, resnet_fp32 44.6 MiB), laid out by
#            `q8_cnn.py --xfer .xfer` as .xfer/int8-K/<name>.pte in pieces of
#            at most 45 MiB: carry .xfer/int8-1 (resnet_fp32) alone with the
#            command `mkdir -p /tmp/int8 && cp .xfer/int8-*/*.pte /tmp/int8/`,
#            then .xfer/int8-2 with .gl and .device/etwgpu and `run.sh int8`
#            (calls less than 30 s apart, so /tmp/int8 stays)
#   vision   a ResNet-18-class CNN and ViT-Tiny/16 (tools/export/vision.py:
#            fp32, 224x224, one program per network with methods `forward`
#            (batch 1) and `forward_b8`): each method's logits against the
#            eager goldens, then `etwgpu bench` (images/s), both with float32
#            and with f16 matrix operands (ETWGPU_PRECISION=f16). Laid out by
#            `vision.py --xfer .xfer` as .xfer/vision-K/ (pieces of at most
#            45 MiB): carry each piece but the last alone with the command
#            `mkdir -p /tmp/vision && cp .xfer/vision-*/* /tmp/vision/`, then
#            the last with .gl and .device/etwgpu and `run.sh vision` (calls
#            less than 30 s apart, so /tmp/vision stays)
#   vision-peers  the same networks in PyTorch (vision_peers.py), eager and
#            torch.compile, fp32 and bf16; its own call (compilations take
#            minutes). The table includes the `vision` part's numbers when
#            that call left them in /tmp/vision/results (the machine is warm)
#   browser  the browser LLM bench (crates/web/bench) in headless Chromium
#            with WebGPU on the NVIDIA Vulkan driver, for the synthetic
#            Llama-3.2-1B and SmolLM2-135M shapes (4-bit) next to the native
#            llm_bench at the same cells; Chromium is carried in pieces in
#            .xfer/browser-K/ (tools/device/browser-bundle.sh), the package
#            as the ignored path crates/web/pkg
# Raw outputs go to $OUT (at most 8 files come back); the last thing
# printed is the table of tools/device/report.py.
set -uo pipefail
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export XDG_RUNTIME_DIR=/tmp ETWGPU_FIXTURES=$PWD/test_data/fixtures PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/etwgpu-out}
mkdir -p "$OUT"
parts=${*:-etwgpu peers}
start=$(date +%s)
log() { echo "[$(( $(date +%s) - start )) s] $*"; }
# The 4-bit prefill of the 1B shape (128..8192) and the SmolLM2 shape (128
# and 511) at precision $1, into $1_*.json (rows of their own in
# report.py's table).
prefill_at() {
  log "4-bit prefill at --precision $1"
  ETWGPU_PRECISION=$1 timeout 150 .device/llm_bench --model 1b --weights q4 \
    --prompts 128,512,1024,2048,4096,8192 --repeats 3 --json "$OUT/$1_1b_q4.json" 2>&1 | grep -E "^prefill"
  ETWGPU_PRECISION=$1 timeout 60 .device/llm_bench --model smollm2 --weights q4 --prompts 128,511 \
    --repeats 3 --json "$OUT/$1_smollm2_q4.json" 2>&1 | grep -E "^prefill"
}

for part in $parts; do
  case $part in
  etwgpu)
    log "adapter and copy bandwidth"
    .device/etwgpu devices
    .device/etwgpu devices --json --bandwidth > "$OUT/bandwidth.json"
    tail -1 "$OUT/bandwidth.json"
    log "fixture goldens"
    timeout 90 python3 tools/device/goldens.py .device/etwgpu test_data/fixtures /tmp/gold > "$OUT/goldens.txt" 2>&1
    tail -3 "$OUT/goldens.txt"
    log "synthetic Llama-3.2-1B shape, 4-bit"
    timeout 200 .device/llm_bench --model 1b --weights q4 --prompts 128,512,1024,2048 \
      --contexts 128,512,2048 --steps 64 --repeats 3 --json "$OUT/etwgpu_1b_q4.json" 2>&1 | tail -30
    timeout 150 .device/llm_bench --model 1b --weights q4 --prompts 4096,8192 \
      --contexts 8192 --steps 64 --repeats 3 --json "$OUT/etwgpu_1b_q4_long.json" 2>&1 | tail -12
    ;;
  extra)
    log "the 1B shape with the KV cache as exported (float32), decode only"
    timeout 120 .device/llm_bench --model 1b --weights q4 --prompts 128 --kv-cache f32 \
      --contexts 128,2048,8192 --steps 64 --repeats 1 --json "$OUT/kvf32_1b_q4.json" 2>&1 | grep -E "^decode|KV"
    log "synthetic SmolLM2-135M shape, 4-bit and fp32"
    timeout 60 .device/llm_bench --model smollm2 --weights q4 --prompts 128,511 --contexts 128,256 \
      --steps 64 --repeats 3 --json "$OUT/etwgpu_smollm2_q4.json" 2>&1 | tail -12
    timeout 60 .device/llm_bench --model smollm2 --weights fp32 --prompts 128,511 --contexts 128,256 \
      --steps 64 --repeats 3 --json "$OUT/etwgpu_smollm2_fp32.json" 2>&1 | tail -12
    ;;
  mixed | coop)
    log "fixture goldens at mixed and f16, the cooperative-matrix route required"
    for prec in mixed f16; do
      ETWGPU_COOP_MATRIX=1 timeout 90 python3 tools/device/goldens.py .device/etwgpu \
        test_data/fixtures /tmp/gold-$prec --precision $prec > "$OUT/goldens_$prec.txt" 2>&1
      tail -1 "$OUT/goldens_$prec.txt"
    done
    [ "$part" = coop ] && continue
    prefill_at mixed
    ;;
  f32)
    prefill_at f32
    ;;
  peers)
    log "PyTorch peers"
    timeout 420 python3 tools/device/peers.py --config llama32_1b --dtype bf16 --modes eager,compile \
      --prompts 128,512,1024,2048,4096,8192 --contexts 128,512,2048,8192 --decode-tokens 128 \
      --budget-s 300 --json "$OUT/peers_1b.json" 2>&1 | tail -40
    ;;
  smollm2)
    log "SmolLM2-135M-Instruct, real weights"
    # Earlier calls left the first pieces in /tmp/smollm2 (the export is
    # larger than one call carries): `mkdir -p /tmp/smollm2; cp .xfer/K/* /tmp/smollm2/`.
    mkdir -p /tmp/smollm2
    cp .xfer/*/* /tmp/smollm2/ 2>/dev/null || true
    # The pieces of `xz -6` (q4x.N, as `.xfer/sx1`..`sx5` hold them), else
    # of gzip (q4part.N).
    if ls /tmp/smollm2/q4x.* > /dev/null 2>&1; then
      bash tools/device/unxz-pieces.sh /tmp/smollm2 > /tmp/smollm2/model.pte
    else
      cat /tmp/smollm2/q4part.* | gunzip > /tmp/smollm2/model.pte
    fi
    sha256sum /tmp/smollm2/model.pte
    printf 'Why is the sky blue?\nSay that again in one sentence.\n' |
      .device/etwgpu chat --model /tmp/smollm2/model.pte --tokenizer /tmp/smollm2/tokenizer.json \
        --max-tokens 256 2>&1 | tee "$OUT/smollm2_chat.txt"
    .device/etwgpu generate --model /tmp/smollm2/model.pte --tokenizer /tmp/smollm2/tokenizer.json \
      --prompt "Once upon a time" --max-tokens 256 2>&1 | tail -2 | tee -a "$OUT/smollm2_chat.txt"
    # README's `etwgpu bench` device table (<!-- bench:device -->).
    timeout 120 .device/etwgpu bench /tmp/smollm2/model.pte -p 512 -n 128 2>&1 | tee "$OUT/smollm2_bench.md"
    ;;
  families)
    log "per-program table: every fixture, goldens and wall time per call"
    timeout 400 python3 tools/device/goldens.py .device/etwgpu test_data/fixtures /tmp/families \
      --families --repeat 20 > "$OUT/families.md" 2>&1
    cat "$OUT/families.md"
    ;;
  int8)
    log "int8 and fp32 CNNs (tools/export/q8_cnn.py programs)"
    mkdir -p /tmp/int8
    cp .xfer/int8-*/*.pte /tmp/int8/ 2>/dev/null || true
    ls -l /tmp/int8
    for pte in /tmp/int8/*.pte; do
      [ -e "$pte" ] || { echo "int8: no programs under .xfer/int8-K/ or /tmp/int8"; break; }
      name=$(basename "$pte" .pte)
      echo "## $name"
      timeout 150 .device/etwgpu bench "$pte" --repeats 50 --bandwidth-mib 0 2>&1 | tee "$OUT/int8_$name.md"
    done
    ;;
  vision)
    log "vision: ResNet-18-class CNN and ViT-Tiny/16, batch 1 and 8 (tools/export/vision.py programs)"
    v=/tmp/vision
    mkdir -p "$v/results"
    cp .xfer/vision-*/* "$v"/ 2>/dev/null || true
    for f in "$v"/*.part00; do
      [ -e "$f" ] && cat "${f%.part00}".part[0-9][0-9] > "${f%.part00}"
    done
    (cd "$v" && sha256sum --quiet -c vision.sha256) ||
      { ls -l "$v"; echo "vision: pieces missing or damaged (carry every .xfer/vision-K, see README.md)"; continue; }
    : > "$OUT/vision_etwgpu.jsonl"; : > "$OUT/vision_check.jsonl"
    for net in resnet18 vit_tiny; do
      python3 -c "import numpy as n; n.save('$v/$net.b1.in0.npy', n.load('$v/$net.b8.in0.npy')[:1])"
      for b in 1 8; do
        method=forward; [ "$b" = 1 ] || method=forward_b$b
        repeats=$(( b == 1 ? 1000 : 300 ))
        for prec in f32 f16; do
          echo "## $net batch $b ($method), precision $prec"
          rm -rf "$v/out"
          ETWGPU_PRECISION=$prec timeout 120 .device/etwgpu run "$v/$net.pte" --method $method \
            --input "$v/$net.b$b.in0.npy" --output-dir "$v/out" > /dev/null &&
            python3 tools/device/vision_report.py check --got "$v/out/call0.out0.npy" \
              --want "$v/$net.b$b.out0.npy" --model $net --method $method --precision $prec |
            tee -a "$OUT/vision_check.jsonl"
          ETWGPU_PRECISION=$prec timeout 150 .device/etwgpu bench "$v/$net.pte" --method $method \
            --input "$v/$net.b$b.in0.npy" --repeats $repeats --bandwidth-mib 0 -o json |
            python3 tools/device/vision_report.py tag --model $net --batch $b --precision $prec \
            >> "$OUT/vision_etwgpu.jsonl"
        done
      done
    done
    cp "$OUT"/vision_*.jsonl "$v/results/"
    ;;
  vision-peers)
    log "vision: PyTorch peers (eager, torch.compile; fp32, bf16)"
    timeout 570 python3 tools/device/vision_peers.py --budget-s 480 --json "$OUT/vision_peers.json" 2>&1 | tail -30
    cp /tmp/vision/results/vision_*.jsonl "$OUT"/ 2>/dev/null || true
    ;;
  browser)
    log "browser: Chromium with WebGPU on the NVIDIA Vulkan driver"
    # Earlier calls left the first pieces in /tmp/chromium (see README.md).
    mkdir -p /tmp/chromium/root
    cp .xfer/browser-*/* /tmp/chromium/ 2>/dev/null || true
    if [ ! -x /tmp/chromium/root/chromium/chromium ]; then
      ls -l /tmp/chromium
      [ "$(cat /tmp/chromium/chromium.tgz.* | sha256sum | awk '{print $1}')" = "$(cat /tmp/chromium/chromium.sha256)" ] ||
        { echo "browser: the Chromium pieces are incomplete (checksum differs)"; continue; }
      cat /tmp/chromium/chromium.tgz.* | tar -xz -C /tmp/chromium/root
    fi
    export FONTCONFIG_FILE=/tmp/chromium/root/fonts/fonts.conf
    chrome=(python3 tools/device/browser_bench.py --chromium /tmp/chromium/root/chromium/chromium
      --lib-dir /tmp/chromium/root/lib --gpu vulkan --require-gpu --steps 64 --repeats 3)
    timeout 100 "${chrome[@]}" --model smollm2 --prompts 128,512 --json "$OUT/browser_smollm2_q4.json"
    timeout 200 "${chrome[@]}" --model 1b --prompts 128,512 --timeout 190 --json "$OUT/browser_1b_q4.json"
    log "browser: the native llm_bench at the same cells"
    for m in smollm2 1b; do
      timeout 100 .device/llm_bench --model $m --weights q4 --prompts 128,512 --contexts 128,512 --steps 64 \
        --repeats 3 --json "$OUT/native_${m}_q4.json" 2>&1 | grep -E '^(prefill|decode)' | head -8
    done
    ;;
  *) echo "unknown part $part"; exit 2 ;;
  esac
done
log "report"
rep=/tmp/etwgpu-report
rm -rf "$rep"; mkdir -p "$rep"; cp "$OUT"/* "$rep"/
if [ -n "${PEERS_FROM:-}" ]; then cp "$PEERS_FROM"/peers_*.json "$rep"/; fi
python3 tools/device/report.py "$rep" | tee "$OUT/table.md"
