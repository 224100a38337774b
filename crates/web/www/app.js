// etwgpu demo page: loads a .pte chosen by the user, runs it on WebGPU and
// shows outputs and timings; Llama-family programs get a streaming chat
// (text with a tokenizer.json, token ids without). State for tests is kept
// in `window.etwgpuDemo`.
import init, { Runtime, isLlm, readNpy } from "./pkg/etwgpu_web.js";

const $ = (id) => document.getElementById(id);
const demo = (window.etwgpuDemo = { state: "starting", outputs: null, generation: null, error: null });

function status(state, text) {
  demo.state = state;
  $("status").dataset.state = state;
  $("status").textContent = text;
}

function fail(e) {
  demo.error = String(e && e.message ? e.message : e);
  status("error", "Error: " + demo.error);
  console.error(e);
}

const ms = (t) => `${t.toFixed(1)} ms`;
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

async function loadModel() {
  const file = $("model-file").files[0];
  if (!file) return;
  model = llm = null;
  $("run-panel").classList.add("hidden");
  $("chat-panel").classList.add("hidden");
  try {
    status("loading", `Loading ${file.name}…`);
    const bytes = await fileBytes(file);
    const t0 = performance.now();
    const info = [];
    if (isLlm(bytes)) {
      const tokFile = $("tokenizer-file").files[0];
      const tokenizer = tokFile ? await tokFile.text() : undefined;
      llm = await rt.loadLlm(bytes, tokenizer);
      const m = llm.metadata;
      info.push(`Llama-family program: max_seq_len ${m.maxSeqLen}, context ${m.maxContextLen}, vocab ${m.vocabSize ?? "?"}`);
      $("chat-mode").textContent = llm.hasTokenizer
        ? "Text chat (ChatML); turns stay in the KV cache."
        : "No tokenizer.json: type the prompt as token ids separated by spaces; the reply shows token ids.";
      $("prompt").placeholder = llm.hasTokenizer ? "Say something" : "e.g. 1 17 42 5";
      $("chat-panel").classList.remove("hidden");
    } else {
      model = await rt.load(bytes);
      const s = model.stats;
      info.push(`methods: ${model.methods.join(", ")}; running ${model.method}`);
      info.push(`inputs: ${model.inputs.map((x) => `${x.dtype} [${x.shape.join(", ")}]`).join(", ")}`);
      info.push(`${s.gpuCalls} GPU call(s), ${s.cpuCalls} CPU fallback call(s), ${s.dispatches} dispatches`);
      $("run-panel").classList.remove("hidden");
    }
    info.unshift(`${file.name}: ${(bytes.length / 1024).toFixed(1)} KiB, loaded in ${ms(performance.now() - t0)}`);
    $("model-info").textContent = info.join("\n");
    $("model-info").classList.remove("hidden");
    status("loaded", `Loaded ${file.name}.`);
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
      `features: ${a.features.join(", ") || "none"} · max ${a.maxComputeInvocationsPerWorkgroup} invocations/workgroup · ` +
      `${a.maxStorageBuffersPerShaderStage} storage buffers/stage · ${(a.maxStorageBufferBindingSize / 2 ** 20).toFixed(0)} MiB/binding`;
    $("adapter").classList.remove("hidden");
    status("ready", "Ready: choose a .pte file.");
  } catch (e) {
    fail(e);
    return;
  }
  $("model-file").addEventListener("change", loadModel);
  $("tokenizer-file").addEventListener("change", () => llm && loadModel());
  $("run").addEventListener("click", run);
  $("send").addEventListener("click", send);
  $("reset").addEventListener("click", () => { llm.reset(); $("reply").textContent = ""; $("tps").textContent = ""; });
}

main();
