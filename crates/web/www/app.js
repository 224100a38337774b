// etwgpu demo page: loads a .pte the user drops, chooses or names by URL
// (read in bounded slices or streamed, with a progress bar for reading,
// uploading and compiling), runs it on WebGPU and shows outputs and
// timings; Llama-family programs get a streaming chat (text with a
// tokenizer.json, token ids without) with a live tokens/s readout. State
// for tests is kept in `window.etwgpuDemo`.
import init, { Runtime, Program, readNpy, wasmMemoryBytes } from "../pkg/etwgpu_web.js";

const $ = (id) => document.getElementById(id);
const demo = (window.etwgpuDemo = { state: "starting", outputs: null, generation: null, error: null });

function status(state, text) {
  demo.state = state;
  $("status").dataset.state = state;
  $("status").textContent = text;
}

// What to do about an error, when we know.
function advice(message) {
  const a = demo.adapter;
  if (/no WebGPU/.test(message)) {
    return "WebGPU is needed: use a current Chrome or Edge (on Linux, start Chromium with --enable-unsafe-webgpu " +
      "or enable chrome://flags/#enable-unsafe-webgpu), Safari 26, or Firefox with WebGPU enabled, and open the " +
      "page from https:// or http://127.0.0.1 (WebGPU needs a secure context).";
  }
  if (/limit of \d+ bytes per binding|max_storage_buffer_binding_size|maxStorageBufferBindingSize/i.test(message)) {
    return `This program has a tensor larger than this adapter lets one binding see` +
      (a ? ` (${MiB(a.maxStorageBufferBindingSize)} MiB)` : "") + `: try a smaller (or more quantized) export, or a ` +
      `browser and GPU with a larger maxStorageBufferBindingSize.`;
  }
  if (/out of memory|more than wasm memory/i.test(message)) {
    return "The GPU or the page ran out of memory: close other tabs, or try a smaller program.";
  }
  return null;
}

function fail(e) {
  demo.error = String(e && e.message ? e.message : e);
  status("error", "Error: " + demo.error);
  const help = advice(demo.error);
  $("help").textContent = help || "";
  $("help").classList.toggle("hidden", !help);
  $("progress-row").classList.add("hidden");
  console.error(e);
}

const ms = (t) => `${t.toFixed(1)} ms`;
const MiB = (b) => (b / 2 ** 20).toFixed(1);

// The progress bar: one stage at a time (reading the file, uploading
// weights, compiling pipelines; the last two once per delegate call).
function showProgress(p) {
  const bar = $("progress");
  $("progress-row").classList.remove("hidden");
  if (p.total) bar.value = p.done / p.total;
  else bar.removeAttribute("value");
  const of = (f) => (p.total ? ` of ${f(p.total)}` : "");
  $("progress-text").textContent =
    p.stage === "read" ? `reading the file: ${MiB(p.done)}${of(MiB)} MiB`
    : p.stage === "weights" ? `uploading weights: ${MiB(p.done)}${of(MiB)} MiB`
    : `compiling pipelines: ${p.done}${of(String)}`;
}
const fileBytes = async (file) => new Uint8Array(await file.arrayBuffer());

// Deterministic inputs for a spec: floats in [-1, 1), integers 0 (or 1 for
// a scalar, e.g. a SymInt).
function makeInput({ dtype, shape }, seed) {
  const n = shape.reduce((a, b) => a * b, 1);
  let s = (seed * 2654435761 + 1) >>> 0;
  const next = () => ((s = (s ^ (s << 13)) >>> 0), (s = (s ^ (s >>> 17)) >>> 0), (s = (s ^ (s << 5)) >>> 0), s);
  switch (dtype) {
    case "float32":
    case "float64": {
      const data = dtype === "float32" ? new Float32Array(n) : new Float64Array(n);
      for (let i = 0; i < n; i++) data[i] = (next() % 2000) / 1000 - 1;
      return { dtype, shape, data };
    }
    case "float16":
      return { dtype, shape, data: new Uint16Array(n).fill(0x3c00) };
    case "int64":
      return { dtype, shape, data: new BigInt64Array(n).fill(shape.length === 0 ? 1n : 0n) };
    case "int32":
      return { dtype, shape, data: new Int32Array(n).fill(shape.length === 0 ? 1 : 0) };
    default:
      return { dtype, shape, data: new Uint8Array(n) };
  }
}

function summarize(t, i) {
  const values = Array.from(t.data, Number);
  const finite = values.filter(Number.isFinite);
  const min = Math.min(...finite), max = Math.max(...finite);
  const mean = finite.reduce((a, b) => a + b, 0) / Math.max(finite.length, 1);
  const head = values.slice(0, 8).map((v) => +v.toPrecision(5)).join(", ");
  return `output ${i}: ${t.dtype} [${t.shape.join(", ")}]\n  first: ${head}${values.length > 8 ? ", …" : ""}\n` +
    `  min ${min.toPrecision(5)}  max ${max.toPrecision(5)}  mean ${mean.toPrecision(5)}`;
}

let rt = null, model = null, llm = null;

let tokenizerFile = null;

// Loads a program from `source` (a File or a fetch Response) named `name`.
async function loadModel(source, name) {
  model = llm = null;
  $("run-panel").classList.add("hidden");
  $("chat-panel").classList.add("hidden");
  $("help").classList.add("hidden");
  $("model-info").classList.add("hidden");
  try {
    status("loading", `Loading ${name}…`);
    const t0 = performance.now();
    const program = await Program.read(source, { onProgress: showProgress });
    const tRead = performance.now();
    const info = [];
    try {
      if (program.isLlm) {
        const tokenizer = tokenizerFile ? await tokenizerFile.text() : undefined;
        llm = await rt.loadLlm(program, tokenizer, { onProgress: showProgress });
        const m = llm.metadata;
        info.push(`Llama-family program: max_seq_len ${m.maxSeqLen}, context ${m.maxContextLen}, vocab ${m.vocabSize ?? "?"}`);
        $("chat-mode").textContent = llm.hasTokenizer
          ? "Text chat (ChatML); turns stay in the KV cache."
          : "No tokenizer.json: type the prompt as token ids separated by spaces; the reply shows token ids.";
        $("prompt").placeholder = llm.hasTokenizer ? "Say something" : "e.g. 1 17 42 5";
        $("chat-panel").classList.remove("hidden");
      } else {
        model = await rt.load(program, { onProgress: showProgress });
        const s = model.stats;
        info.push(`methods: ${model.methods.join(", ")}; running ${model.method}`);
        info.push(`inputs: ${model.inputs.map((x) => `${x.dtype} [${x.shape.join(", ")}]`).join(", ")}`);
        info.push(`${s.gpuCalls} GPU call(s), ${s.cpuCalls} CPU fallback call(s), ${s.dispatches} dispatches`);
        $("run-panel").classList.remove("hidden");
      }
      const tEnd = performance.now();
      demo.load = { bytes: program.sizeBytes, readMs: tRead - t0, loadMs: tEnd - tRead, wasmMemoryBytes: wasmMemoryBytes() };
      info.unshift(`${name}: ${MiB(program.sizeBytes)} MiB, read in ${ms(tRead - t0)}, uploaded and compiled in ` +
        `${ms(tEnd - tRead)}; wasm memory ${MiB(demo.load.wasmMemoryBytes)} MiB`);
    } finally {
      program.free();
    }
    $("progress").value = 1;
    $("progress-text").textContent = `${MiB(demo.load.bytes)} MiB read, weights uploaded, pipelines compiled`;
    $("model-info").textContent = info.join("\n");
    $("model-info").classList.remove("hidden");
    status("loaded", `Loaded ${name}.`);
  } catch (e) {
    fail(e);
  }
}

// Files from the picker or a drop: the .pte and, optionally, a tokenizer.
async function takeFiles(files) {
  const list = Array.from(files);
  const tok = list.find((f) => f.name.endsWith(".json"));
  if (tok) tokenizerFile = tok;
  const pte = list.find((f) => !f.name.endsWith(".json"));
  if (pte) {
    lastSource = () => [pte, pte.name];
    await loadModel(pte, pte.name);
  } else if (tok && lastSource && llm) {
    await loadModel(...lastSource());
  }
}

let lastSource = null;

async function loadUrl() {
  const url = $("model-url").value.trim();
  if (!url) return;
  lastSource = null;
  try {
    status("loading", `Fetching ${url}…`);
    const response = await fetch(url);
    await loadModel(response, url.split("/").pop() || url);
  } catch (e) {
    fail(e);
  }
}

async function run() {
  try {
    status("running", "Running…");
    const files = Array.from($("input-files").files).sort((a, b) => a.name.localeCompare(b.name));
    const inputs = files.length
      ? await Promise.all(files.map(async (f) => readNpy(await fileBytes(f))))
      : model.inputs.map((spec, i) => makeInput(spec, i + 1));
    const runs = Math.max(1, parseInt($("runs").value, 10) || 1);
    const times = [];
    let outputs;
    for (let r = 0; r < runs; r++) {
      const t0 = performance.now();
      outputs = await model.run(inputs);
      times.push(performance.now() - t0);
    }
    const rest = times.slice(1);
    const timing = `first run ${ms(times[0])}` +
      (rest.length ? `, then mean ${ms(rest.reduce((a, b) => a + b, 0) / rest.length)} over ${rest.length} run(s)` : "");
    demo.outputs = outputs.map((t) => ({ dtype: t.dtype, shape: t.shape, data: Array.from(t.data, Number) }));
    $("outputs").textContent = `${files.length ? "inputs from .npy files" : "generated inputs"}; ${timing}\n` +
      outputs.map(summarize).join("\n");
    status("done", "Done.");
  } catch (e) {
    fail(e);
  }
}

async function send() {
  const text = $("prompt").value.trim();
  if (!text) return;
  try {
    status("generating", "Generating…");
    const options = { maxNewTokens: parseInt($("max-new").value, 10) || 32, temperature: parseFloat($("temperature").value) || 0 };
    const streamed = [];
    // Read before generating: `llm` is borrowed by the call while it runs,
    // so the callback must not touch it.
    const withText = llm.hasTokenizer;
    const t0 = performance.now();
    $("reply").textContent = "";
    $("tps").textContent = "";
    $("gen-stats").textContent = "";
    const onToken = (id, piece) => {
      streamed.push(id);
      $("reply").textContent += withText ? piece : (streamed.length > 1 ? " " : "") + id;
      const s = (performance.now() - t0) / 1000;
      $("tps").textContent = `${streamed.length} tokens, ${(streamed.length / s).toFixed(1)} tokens/s`;
    };
    let result;
    if (withText) {
      result = await llm.chat(text, options, onToken);
    } else {
      const ids = text.split(/[\s,]+/).filter(Boolean).map((x) => parseInt(x, 10));
      if (ids.some((x) => !Number.isInteger(x) || x < 0)) throw new Error("token ids are non-negative integers");
      result = await llm.generate(Uint32Array.from(ids), options, onToken);
    }
    demo.generation = { tokens: Array.from(result.tokens), streamed, text: result.text,
      decodeTokensPerS: result.decodeTokensPerS, prefillTokensPerS: result.prefillTokensPerS };
    $("tps").textContent = `${result.decodeTokensPerS.toFixed(1)} tokens/s decode`;
    $("gen-stats").textContent = `(${result.promptTokens} prompt tokens in ${ms(result.prefillMs)}, ` +
      `${result.prefillTokensPerS.toFixed(1)} tokens/s; ${result.generatedTokens} generated in ${ms(result.decodeMs)}; ` +
      `${llm.position} of ${llm.metadata.maxContextLen} context tokens used${result.stopped ? "; stopped at a stop token" : ""})`;
    status("done", "Done.");
  } catch (e) {
    fail(e);
  }
}

async function main() {
  try {
    await init();
    if (!navigator.gpu) throw new Error("this browser has no WebGPU (navigator.gpu is missing)");
    rt = await Runtime.create();
    const a = rt.adapter;
    demo.adapter = a;
    $("adapter").textContent = `adapter: ${a.name || "(name not exposed)"} (${a.backend}, ${a.deviceType}) ${a.driver}\n` +
      `features: ${a.features.join(", ") || "none"}\n` +
      `limits: ${MiB(a.maxStorageBufferBindingSize)} MiB per binding (the largest tensor) · ` +
      `${MiB(a.maxBufferSize)} MiB per buffer · ${a.maxStorageBuffersPerShaderStage} storage buffers per stage · ` +
      `${a.maxComputeInvocationsPerWorkgroup} invocations and ${a.maxComputeWorkgroupStorageSize / 1024} KiB per workgroup`;
    $("adapter").classList.remove("hidden");
    status("ready", "Ready: drop or choose a .pte file.");
  } catch (e) {
    fail(e);
    return;
  }
  $("model-file").addEventListener("change", () => takeFiles($("model-file").files));
  $("tokenizer-file").addEventListener("change", () => takeFiles($("tokenizer-file").files));
  $("load-url").addEventListener("click", loadUrl);
  const drop = $("drop");
  drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (e) => {
    e.preventDefault();
    drop.classList.remove("over");
    takeFiles(e.dataTransfer.files);
  });
  $("run").addEventListener("click", run);
  $("send").addEventListener("click", send);
  $("reset").addEventListener("click", () => { llm.reset(); $("reply").textContent = ""; $("tps").textContent = ""; });
}

main();
