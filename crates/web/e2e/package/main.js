// The npm package used as a user would: a fixture run from a streamed
// fetch, a short greedy generation from a Blob read in small slices, and
// a typed error for bytes that are not a program. Results go to
// `window.result` for crates/web/e2e/package.mjs to check.
import init, { Runtime, Program, readNpy, wasmMemoryBytes } from "etwgpu";

const result = (window.result = { state: "running" });
const npy = async (url) => readNpy(new Uint8Array(await (await fetch(url)).arrayBuffer()));

try {
  await init();
  const rt = await Runtime.create();
  result.adapter = rt.adapter;

  const mlp = await Program.read(await fetch("/fixtures/mlp/model.pte"));
  const model = await rt.load(mlp);
  const [y] = await model.run([await npy("/fixtures/mlp/call0.in0.npy")]);
  result.mlp = { dtype: y.dtype, shape: y.shape, data: Array.from(y.data) };
  mlp.free();

  const blob = await (await fetch("/fixtures/llama_tiny_fp32/model.pte")).blob();
  const stages = [];
  const onProgress = (p) => stages.includes(p.stage) || stages.push(p.stage);
  const program = await Program.read(blob, { chunkBytes: 4096, onProgress });
  result.isLlm = program.isLlm;
  const llm = await rt.loadLlm(program, undefined, { onProgress });
  const prompt = await npy("/fixtures/llama_tiny_fp32/call0.in0.npy");
  const streamed = [];
  const r = await llm.generate(Uint32Array.from(prompt.data, Number), { maxNewTokens: 3 }, (id) => streamed.push(id));
  result.generation = { tokens: Array.from(r.tokens), streamed, decodeTokensPerS: r.decodeTokensPerS };
  result.stages = stages;

  try {
    await Program.read(new Uint8Array([1, 2, 3]));
    result.badFile = "no error";
  } catch (e) {
    result.badFile = e.message;
  }
  result.wasmMemoryBytes = wasmMemoryBytes();
  result.state = "done";
} catch (e) {
  result.state = "error";
  result.error = String(e && e.message ? e.message : e);
}
document.getElementById("log").textContent = JSON.stringify(result, null, 1);
