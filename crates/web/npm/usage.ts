// Compiled with `tsc --noEmit` by `cargo xtask web-test` against the
// package's declarations: a user's code must type-check as written.
import init, { Runtime, Program, wasmMemoryBytes, readNpy } from "etwgpu";
import type { AdapterInfo, GenerationResult, LoadProgress, Tensor } from "etwgpu";

export async function demo(file: File, tokenizerJson: string): Promise<string> {
  await init();
  const rt: Runtime = await Runtime.create();
  const adapter: AdapterInfo = rt.adapter;
  const limit: number = adapter.maxStorageBufferBindingSize;
  const progress = (p: LoadProgress) => console.log(p.stage, p.done, p.total ?? "?");
  const program = await Program.read(file, { chunkBytes: 1 << 20, onProgress: progress });
  const fromFetch = await Program.read(await fetch("model.pte"));
  if (!program.isLlm) {
    const model = await rt.load(program, { method: "forward", onProgress: progress });
    const outputs: Tensor[] = await model.run([{ data: new Float32Array(4), shape: [2, 2] }]);
    const first: Tensor = readNpy(new Uint8Array(0));
    return `${outputs[0].dtype} ${first.shape} ${model.stats.dispatches} ${model.inputs[0].dtype} ${limit}`;
  }
  const llm = await rt.loadLlm(program, tokenizerJson, { onProgress: progress });
  const r: GenerationResult = await llm.chat("Hi", { maxNewTokens: 8 }, (id: number, text: string) => void [id, text]);
  const g = await llm.generate(Uint32Array.from([1, 2]), { temperature: 0 });
  fromFetch.free();
  return `${r.text} ${r.decodeTokensPerS} ${g.tokens.length} ${llm.metadata.maxContextLen} ${wasmMemoryBytes()} ${program.sizeBytes}`;
}
