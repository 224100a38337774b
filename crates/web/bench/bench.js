// The browser LLM bench: loads a Llama-family program, then per prompt
// length P generates `steps` greedy tokens after P random prompt tokens
// from an empty cache, `repeats` times, and reports the median prefill
// tokens/s (the P prompt tokens) and decode tokens/s (the steps after
// them, at context P..P+steps) as JSON: in `window.benchResult`, in the
// page, and POSTed to `/result` when `report=1` (what
// tools/device/browser_bench.py waits for; `/log` gets progress lines).
//
// Query parameters:
//   model=tiny|small|smollm2|1b  a synthetic program built in wasm
//                                (Program.synthetic; default smollm2)
//   weights=q4|fp32              its weights (default q4)
//   url=/path/model.pte          or a .pte fetched (streamed) instead
//   context=N                    KV cache positions of a synthetic
//                                program (default: the largest P + steps)
//   prompts=128,512              prompt lengths P (default 128; none: only
//                                the load is measured)
//   steps=64                     decode steps per cell (default 64)
//   repeats=3                    runs per cell, after one warm-up
//   report=1                     POST the result to /result
import init, { Runtime, Program, wasmMemoryBytes } from "../pkg/etwgpu_web.js";

const q = new URLSearchParams(location.search);
const list = (k, d) => (q.get(k) ?? d).split(",").map((x) => parseInt(x, 10)).filter((x) => x > 0);
const prompts = list("prompts", "128");
const steps = parseInt(q.get("steps") || "64", 10);
const repeats = Math.max(1, parseInt(q.get("repeats") || "3", 10));
const report = q.get("report") === "1";
const t0 = performance.now();

function log(line) {
  const text = `[${((performance.now() - t0) / 1000).toFixed(1)} s] ${line}`;
  document.getElementById("log").textContent += text + "\n";
  if (report) fetch("/log", { method: "POST", body: text }).catch(() => {});
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

// Seeded random prompt tokens in [0, vocab).
function tokens(n, vocab, seed) {
  let s = (seed * 2654435761 + 12345) >>> 0;
  const out = new Uint32Array(n);
  for (let i = 0; i < n; i++) {
    s = (s ^ (s << 13)) >>> 0; s = (s ^ (s >>> 17)) >>> 0; s = (s ^ (s << 5)) >>> 0;
    out[i] = s % vocab;
  }
  return out;
}

async function bench() {
  await init();
  const memoryAtInit = wasmMemoryBytes();
  if (!navigator.gpu) throw new Error("this browser has no WebGPU (navigator.gpu is missing)");
  const rt = await Runtime.create();
  // What the browser says of the adapter (vendor, architecture; device and
  // description only with --enable-webgpu-developer-features).
  const info = (await navigator.gpu.requestAdapter({ powerPreference: "high-performance" }))?.info ?? {};
  const gpuAdapterInfo = { vendor: info.vendor, architecture: info.architecture, device: info.device,
    description: info.description };
  const result = { adapter: rt.adapter, gpuAdapterInfo, userAgent: navigator.userAgent, steps, repeats };
  log(`adapter: ${JSON.stringify(gpuAdapterInfo)} (${result.adapter.backend}, ${result.adapter.deviceType}); ` +
    `features ${result.adapter.features.join(", ")}`);
  const tBuild = performance.now();
  let program;
  if (q.get("url")) {
    result.model = q.get("url");
    program = await Program.read(await fetch(q.get("url")));
  } else {
    result.model = q.get("model") || "smollm2";
    result.weights = q.get("weights") || "q4";
    const context = parseInt(q.get("context") || String(Math.max(16, ...prompts) + steps + 1), 10);
    program = Program.synthetic(result.model, { weights: result.weights, maxContext: context });
    result.context = context;
  }
  const tLoad = performance.now();
  const memoryAfterRead = wasmMemoryBytes();
  const llm = await rt.loadLlm(program);
  // Wasm memory only grows: its size after the load is the peak so far.
  result.load = { fileBytes: program.sizeBytes, buildOrReadMs: tLoad - tBuild, loadMs: performance.now() - tLoad,
    wasmMemoryBytes: wasmMemoryBytes(), wasmMemoryAtInitBytes: memoryAtInit, wasmMemoryAfterReadBytes: memoryAfterRead };
  program.free();
  const m = llm.metadata;
  log(`${result.model}: ${(result.load.fileBytes / 2 ** 20).toFixed(1)} MiB, made in ${result.load.buildOrReadMs.toFixed(0)} ms, ` +
    `loaded in ${result.load.loadMs.toFixed(0)} ms; wasm memory ${(memoryAtInit / 2 ** 20).toFixed(0)} MiB at init, ` +
    `${(memoryAfterRead / 2 ** 20).toFixed(0)} MiB after reading, ${(result.load.wasmMemoryBytes / 2 ** 20).toFixed(0)} MiB after loading; ` +
    `context ${m.maxContextLen}`);
  const vocab = m.vocabSize ?? 128;
  const options = { maxNewTokens: steps, stopAtEos: false };
  result.cells = [];
  for (const p of prompts) {
    if (p + steps > m.maxContextLen) {
      log(`P=${p}: skipped (P + steps > context ${m.maxContextLen})`);
      continue;
    }
    const runs = [];
    for (let r = 0; r <= repeats; r++) {
      llm.reset();
      const g = await llm.generate(tokens(p, vocab, r + 1), options);
      if (r > 0) runs.push({ prefillTokensPerS: g.prefillTokensPerS, decodeTokensPerS: g.decodeTokensPerS,
        prefillMs: g.prefillMs, decodeMs: g.decodeMs, generatedTokens: g.generatedTokens });
    }
    const cell = { prompt: p, prefillTokensPerS: median(runs.map((x) => x.prefillTokensPerS)),
      decodeTokensPerS: median(runs.map((x) => x.decodeTokensPerS)), runs };
    result.cells.push(cell);
    log(`P=${p}: prefill ${cell.prefillTokensPerS.toFixed(1)} tokens/s, decode ${cell.decodeTokensPerS.toFixed(1)} tokens/s ` +
      `(${steps} steps at context ${p}; median of ${repeats})`);
  }
  return result;
}

let result;
try {
  result = { ok: true, ...(await bench()) };
} catch (e) {
  result = { ok: false, error: String(e && e.message ? e.message : e) };
  log(`error: ${result.error}`);
}
window.benchResult = result;
document.getElementById("result").textContent = JSON.stringify(result, null, 1);
if (report) await fetch("/result", { method: "POST", body: JSON.stringify(result) }).catch(() => {});
