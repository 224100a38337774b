//! Errors of `etwgpu-llm`.

/// Everything that can go wrong in `etwgpu-llm`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The runtime failed (loading or running a method).
    #[error("{during}: {source}")]
    Runtime {
        /// What was being done.
        during: &'static str,
        /// The runtime's error.
        source: etwgpu_runtime::Error,
    },
    /// A metadata method is absent from the program.
    #[error("the program has no metadata method {method:?} (export it with export_llama's metadata)")]
    MissingMetadata {
        /// The method name, e.g. `get_max_context_len`.
        method: &'static str,
    },
    /// A metadata method's output is not a constant integer.
    #[error("metadata method {method:?} outputs a {found} value, expected a constant int")]
    BadMetadata {
        /// The method name.
        method: &'static str,
        /// The kind found.
        found: &'static str,
    },
    /// The prompt is empty.
    #[error("the prompt is empty: generation needs at least one token")]
    EmptyPrompt,
    /// The prompt plus the tokens to generate don't fit in the context.
    #[error("prompt of {prompt} tokens + {new} new tokens exceeds the context of {context}")]
    ContextOverflow {
        /// Tokens already in the KV cache plus the prompt.
        prompt: usize,
        /// Tokens asked for.
        new: usize,
        /// Context length of the model.
        context: usize,
    },
    /// A token id is outside the vocabulary.
    #[error("token {token} is outside the vocabulary of {vocab}")]
    TokenOutOfRange {
        /// The token.
        token: u32,
        /// Vocabulary size.
        vocab: usize,
    },
    /// The forward method returned something other than `[1, vocab]` logits.
    #[error("forward returned {found}, expected one float tensor of logits [1, vocab]")]
    BadLogits {
        /// What was returned.
        found: String,
    },
    /// A `tokenizer.json` could not be read or is not supported.
    #[error("tokenizer {path}: {problem}")]
    Tokenizer {
        /// The file (or `(in-memory tokenizer.json)`).
        path: String,
        /// What is wrong (the `tokenizers` crate's message).
        problem: String,
    },
    /// The tokenizer failed on some text or ids.
    #[error("tokenizer failed while {during}: {problem}")]
    TokenizerFailed {
        /// `encoding`, `decoding` or `stream decoding`.
        during: &'static str,
        /// The `tokenizers` crate's message.
        problem: String,
    },
    /// A sampler setting is out of range.
    #[error("sampler setting {name} = {value} is invalid: {expected}")]
    BadSampler {
        /// The setting.
        name: &'static str,
        /// Its value.
        value: f64,
        /// What it must be.
        expected: &'static str,
    },
}

/// `Result` of `etwgpu-llm`.
pub type Result<T, E = Error> = std::result::Result<T, E>;
