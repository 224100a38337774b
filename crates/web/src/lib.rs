//! etwgpu in the browser: the same `format`, `runtime` and `llm` crates
//! compiled for `wasm32-unknown-unknown`, on the browser's WebGPU, behind a
//! small wasm-bindgen API for JavaScript.
//!
//! ```js
//! import init, { Runtime } from "./pkg/etwgpu_web.js";
//! await init();
//! const rt = await Runtime.create();          // the browser's WebGPU device
//! const model = await rt.load(bytes);         // a .pte as a Uint8Array
//! const [y] = await model.run([{ data: new Float32Array(48), shape: [3, 16] }]);
//! console.log(y.dtype, y.shape, y.data);      // "float32", [3, 8], Float32Array
//! const llm = await rt.loadLlm(bytes, tokenizerJson);   // Llama-family
//! await llm.chat("Hello", { maxNewTokens: 64 }, (id, text) => show(text));
//! ```
//!
//! - [`Runtime`]: opens the device ([`Runtime::create`]), reports the adapter,
//!   loads programs from bytes.
//! - [`Model`]: one loaded method; [`Model::run`] takes and returns plain
//!   `{ dtype, shape, data }` objects whose `data` is a typed array.
//! - [`Llm`]: generation over a Llama-family program with a streaming
//!   callback, from token ids or (with a `tokenizer.json`) ChatML chat.
//!
//! Nothing here blocks: every GPU wait is awaited through the runtime's
//! `_async` methods, so the page stays responsive and tokens are drawn as
//! they come. The demo page is `crates/web/www/`.
#![warn(missing_docs)]

mod api;
mod error;
mod llm;
mod tensor;

pub use api::{Model, Runtime};
pub use error::{Error, Result};
pub use llm::Llm;
pub use tensor::{tensor_from_js, tensor_to_js};
