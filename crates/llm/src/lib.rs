//! LLM generation on etwgpu: a [`Generator`] over a loaded Llama-family
//! program (ExecuTorch's `export_llama` layout: `forward(tokens int64 [1,S],
//! input_pos int64 [1]) -> logits [1, vocab]` with the KV cache inside the
//! method, plus constant metadata methods), and a seeded [`Sampler`]
//! (greedy, temperature, top-k, top-p).

pub mod error;
pub mod generator;
pub mod sampler;

pub use error::{Error, Result};
pub use generator::{GenerateOptions, GenerationStats, Generator, Metadata};
pub use sampler::{Rng, Sampler, SamplerConfig};

#[cfg(test)]
mod tests;
