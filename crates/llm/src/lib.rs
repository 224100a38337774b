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
