//! LLM generation on etwgpu: a [`Generator`] over a loaded Llama-family
//! program (ExecuTorch's `export_llama` layout: `forward(tokens int64 [1,S],
//! input_pos int64 [1]) -> logits [1, vocab]` with the KV cache inside the
//! method, plus constant metadata methods; with `--disable_dynamic_shape`
//! `S` is a static 1 and prompts are fed one token per run), and a seeded
//! [`Sampler`] (greedy, temperature, top-k, top-p), a [`Tokenizer`] reading
//! `tokenizer.json` through HuggingFace's `tokenizers` crate and the ChatML
//! template ([`chatml`]). [`LlamaConfig::build`] writes synthetic programs
//! of that layout with random weights, for tests and benchmarks at real
//! model shapes.
//!
//! Load a program and generate (here a tiny synthetic Llama, dim 64, two
//! layers, 4-bit weights; a real export loads the same way with
//! [`etwgpu_format::Program::open`]):
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use etwgpu_format::Program;
//! use etwgpu_llm::{GenerateOptions, Generator, LlamaConfig, Sampler, SamplerConfig};
//! use etwgpu_runtime::Runtime;
//!
//! # // Like the GPU tests: skip without an adapter unless GPU_TESTS=require.
//! # if Runtime::new().is_err() && std::env::var("GPU_TESTS").as_deref() != Ok("require") {
//! #     return Ok(());
//! # }
//! let runtime = Runtime::new()?;
//! let program = Program::from_bytes(LlamaConfig::tiny().build())?;
//! let mut generator = Generator::new(&runtime, &program)?;
//!
//! let options = GenerateOptions { max_new_tokens: 4, stop_at_eos: false, ..GenerateOptions::default() };
//! let mut greedy = Sampler::new(SamplerConfig::default())?;
//! let mut streamed = Vec::new();
//! let (tokens, stats) = generator.generate(&[1, 2, 3], &options, &mut greedy, |t| streamed.push(t))?;
//! assert_eq!((tokens.len(), stats.prompt_tokens), (4, 3));
//! assert_eq!(streamed, tokens);
//!
//! // Greedy decoding is deterministic: from the start again, the same tokens.
//! generator.reset();
//! let (again, _) = generator.generate(&[1, 2, 3], &options, &mut greedy, |_| {})?;
//! assert_eq!(again, tokens);
//! # Ok(())
//! # }
//! ```
#![warn(missing_docs)]

// The bench drives the blocking API, which exists on native targets only.
#[cfg(not(target_arch = "wasm32"))]
pub mod bench;
pub mod error;
pub mod generator;
pub mod sampler;
pub mod synthetic;
pub mod tokenizer;

pub use error::{Error, Result};
pub use generator::{GenerateOptions, GenerationStats, Generator, Metadata};
pub use sampler::{Rng, Sampler, SamplerConfig};
pub use synthetic::{LlamaConfig, Weights};
pub use tokenizer::{ChatMessage, StreamDecoder, Tokenizer, chatml};

#[cfg(test)]
mod tests;
