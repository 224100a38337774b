//! etwgpu in the browser: the same `format`, `runtime` and `llm` crates
//! compiled for `wasm32-unknown-unknown`, on the browser's WebGPU, behind a
//! small wasm-bindgen API for JavaScript, published as the npm package
//! `etwgpu` (`cargo xtask web-build --release` writes it to
//! `crates/web/pkg`).
//!
//! ```js
//! import init, { Runtime, Program } from "etwgpu";
//! await init();
//! const rt = await Runtime.create();                 // the browser's WebGPU device
//! const program = await Program.read(await fetch("model.pte"));  // or a File, Blob, Uint8Array
//! const model = await rt.load(program);
//! const [y] = await model.run([{ data: new Float32Array(48), shape: [3, 16] }]);
//! console.log(y.dtype, y.shape, y.data);             // "float32", [3, 8], Float32Array
//! const llm = await rt.loadLlm(program, tokenizerJson);   // Llama-family
//! await llm.chat("Hello", { maxNewTokens: 64 }, (id, text) => show(text));
//! ```
//!
//! - [`Runtime`]: opens the device ([`Runtime::create`]), reports the adapter
//!   and its limits, loads programs.
//! - [`JsProgram`] (`Program` in JavaScript): a `.pte` read from a
//!   `Blob`/`File` in bounded slices or from a streamed `fetch`, straight
//!   into wasm memory (one copy of the file, never two).
//! - [`Model`]: one loaded method; [`Model::run`] takes and returns plain
//!   `{ dtype, shape, data }` objects whose `data` is a typed array.
//! - [`Llm`]: generation over a Llama-family program with a streaming
//!   callback, from token ids or (with a `tokenizer.json`) ChatML chat.
//!
//! Nothing here blocks: every GPU wait is awaited through the runtime's
//! `_async` methods, so the page stays responsive and tokens are drawn as
//! they come. The TypeScript declarations of the package come from the doc
//! comments here and the interfaces in [`TYPES`]. The demo page is
//! `crates/web/www/`.
#![warn(missing_docs)]

mod api;
mod error;
mod llm;
mod source;
mod tensor;

pub use api::{JsProgram, Model, Runtime, read_npy, wasm_memory_bytes};
pub use error::{Error, Result};
pub use llm::Llm;
pub use source::DEFAULT_CHUNK_BYTES;
pub use tensor::{tensor_from_js, tensor_to_js};

/// The TypeScript types of the plain objects the API takes and returns,
/// added to the package's `.d.ts` as they are.
#[wasm_bindgen::prelude::wasm_bindgen(typescript_custom_section)]
pub const TYPES: &str = r#"
/** A tensor's element type, as PyTorch names it. */
export type DType = "float32" | "float64" | "float16" | "bfloat16" | "int64" | "int32" | "int16" | "int8" | "uint8" | "bool";

/** Typed arrays a tensor's data can be: float16 and bfloat16 are their raw bits in a Uint16Array, bool a Uint8Array. */
export type TypedArray = Float32Array | Float64Array | Uint16Array | BigInt64Array | Int32Array | Int16Array | Int8Array | Uint8Array;

/** A tensor as the API returns it. */
export interface Tensor {
  /** The element type. */
  dtype: DType;
  /** The sizes, outermost first. */
  shape: number[];
  /** The elements in row-major order. */
  data: TypedArray;
}

/** A tensor given to `Model.run`: without `dtype`, the typed array's kind decides (a Uint16Array is float16). */
export interface TensorInput {
  /** The element type; it must match `data`'s typed array. */
  dtype?: DType;
  /** The sizes, outermost first. */
  shape: number[];
  /** The elements in row-major order. */
  data: TypedArray;
}

/** One input of a method: its dtype and its shape at the maximum. */
export interface InputSpec {
  /** The element type. */
  dtype: DType;
  /** The shape (dynamic sizes at their maximum). */
  shape: number[];
}

/** What a loaded method runs. */
export interface ModelStats {
  /** Delegate calls that run on the GPU. */
  gpuCalls: number;
  /** Operators that run on the CPU fallback. */
  cpuCalls: number;
  /** Compute dispatches per run. */
  dispatches: number;
  /** Bytes of the buffers intermediates share. */
  arenaBytes: number;
}

/** The WebGPU adapter and the device's limits. */
export interface AdapterInfo {
  /** The adapter's name (browsers may leave it empty). */
  name: string;
  /** The backend as wgpu names it: "BrowserWebGpu" in a browser. */
  backend: string;
  /** "DiscreteGpu", "IntegratedGpu", "Cpu", ... */
  deviceType: string;
  /** Driver name and details. */
  driver: string;
  /** The optional features in use, e.g. "shader-f16". */
  features: string[];
  /** The largest buffer, in bytes. */
  maxBufferSize: number;
  /** The largest storage buffer one binding sees, in bytes: the largest tensor a program may hold. */
  maxStorageBufferBindingSize: number;
  /** Storage buffers one shader may bind. */
  maxStorageBuffersPerShaderStage: number;
  /** Invocations per workgroup. */
  maxComputeInvocationsPerWorkgroup: number;
  /** Workgroup memory in bytes. */
  maxComputeWorkgroupStorageSize: number;
  /** Workgroups per dispatch dimension. */
  maxComputeWorkgroupsPerDimension: number;
}

/** Where a program's bytes come from. A Blob (File) is read in bounded slices and a Response or stream chunk by chunk, straight into wasm memory. */
export type ProgramSource = Uint8Array | ArrayBuffer | Blob | Response | ReadableStream<Uint8Array>;

/** How far reading or loading has come. */
export interface LoadProgress {
  /** "read": bytes of the file; "weights": bytes uploaded to the GPU; "pipelines": pipelines compiled (the last two per delegate call). */
  stage: "read" | "weights" | "pipelines";
  /** Work done in this stage. */
  done: number;
  /** All the work of this stage; null when a stream does not say its length. */
  total: number | null;
}

/** Options of `Program.read`. */
export interface ReadOptions {
  /** Bytes per Blob slice (default 16 MiB). */
  chunkBytes?: number;
  /** Called as bytes arrive. */
  onProgress?: (progress: LoadProgress) => void;
}

/** Options of `Runtime.load` and `Runtime.loadLlm`. */
export interface LoadOptions {
  /** The method to load (`Runtime.load` only; default "forward"). */
  method?: string;
  /** Called as weights are uploaded and pipelines compiled. */
  onProgress?: (progress: LoadProgress) => void;
  /**
   * (`Runtime.load` only) Split linear weights and embedding tables larger
   * than this many bytes into row chunks, as those past the device's
   * `maxStorageBufferBindingSize` always are; lower it to try the split
   * path on a small model.
   */
  splitBytes?: number;
}

/** A Llama-family program's metadata methods. */
export interface LlmMetadata {
  /** Tokens one forward call takes at most. */
  maxSeqLen: number;
  /** Positions the KV cache holds. */
  maxContextLen: number;
  /** Vocabulary size, if the program says. */
  vocabSize: number | null;
  /** Beginning-of-sequence token, if the program says. */
  bosId: number | null;
  /** End-of-sequence tokens. */
  eosIds: Uint32Array;
}

/** Options of `Llm.generate` and `Llm.chat`. */
export interface GenerateOptions {
  /** Tokens to generate at most (default 32; fewer when the context is full). */
  maxNewTokens?: number;
  /** 0 (the default) is greedy. */
  temperature?: number;
  /** Keep the k most likely tokens (0: all). */
  topK?: number;
  /** Keep the most likely tokens up to this probability mass (default 1). */
  topP?: number;
  /** Sampling seed (default 0). */
  seed?: number;
  /** Whether an end-of-sequence token ends generation (default true; benchmarks turn it off). */
  stopAtEos?: boolean;
}

/** Options of `Program.synthetic`. */
export interface SyntheticOptions {
  /** "q4" (4-bit group-wise, group 32; the default) or "fp32". */
  weights?: "q4" | "fp32";
  /** Positions of the KV cache (default: the preset's, 8192 for smollm2 and 1b). */
  maxContext?: number;
  /** Seed of the random weights (default 0). */
  seed?: number;
}

/** Called as each token is sampled: its id and its text (empty without a tokenizer). */
export type OnToken = (id: number, text: string) => void;

/** What one `generate` or `chat` call did. */
export interface GenerationResult {
  /** The sampled tokens. */
  tokens: Uint32Array;
  /** Their text (empty without a tokenizer). */
  text: string;
  /** Tokens fed before generating. */
  promptTokens: number;
  /** Tokens generated. */
  generatedTokens: number;
  /** Time of the prompt's forward calls. */
  prefillMs: number;
  /** Time of the decode steps. */
  decodeMs: number;
  /** Prompt tokens per second. */
  prefillTokensPerS: number;
  /** Generated tokens per second. */
  decodeTokensPerS: number;
  /** Whether a stop token ended it. */
  stopped: boolean;
  /** Tokens in the KV cache afterwards. */
  position: number;
}
"#;
