//! Errors of `etwgpu-web`; JavaScript sees them as thrown `Error`s with the
//! message as text (wasm-bindgen's `JsError` from any `std::error::Error`).

/// Everything that can go wrong in `etwgpu-web`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The bytes are not a valid program.
    #[error("cannot read the program: {0}")]
    Format(#[from] etwgpu_format::Error),
    /// The runtime failed (opening the device, loading, running).
    #[error("{0}")]
    Runtime(#[from] etwgpu_runtime::Error),
    /// Generation failed.
    #[error("{0}")]
    Llm(#[from] etwgpu_llm::Error),
    /// A JavaScript argument has the wrong form.
    #[error("{what}: expected {expected}")]
    BadArgument {
        /// Which argument, e.g. `inputs[0].shape`.
        what: String,
        /// What it should be.
        expected: &'static str,
    },
    /// Reading the program's bytes failed (a `Blob` read, an HTTP status,
    /// a stream error, a file larger than wasm memory).
    #[error("cannot read the program's bytes: {problem}")]
    Read {
        /// The problem.
        problem: String,
    },
    /// The `tokenizer.json` could not be read.
    #[error("cannot read tokenizer.json: {problem}")]
    Tokenizer {
        /// The problem.
        problem: String,
    },
    /// The `onToken` callback threw (generation ran to its end; the first
    /// exception is reported).
    #[error("the onToken callback threw: {message}")]
    Callback {
        /// The exception's message.
        message: String,
    },
    /// Text chat needs a tokenizer.
    #[error("chat needs a tokenizer.json; without one, generate from token ids")]
    NoTokenizer,
}

/// `Result` with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
