//! The Python exceptions of `etwgpu` and how each Rust error becomes one.
//!
//! `etwgpu.Error` (a `RuntimeError`) is the base; a problem of the file is a
//! `FormatError`, an operator etwgpu cannot run an `UnsupportedOpError`, a
//! bad argument to a call an `InputError`, and anything the GPU or its
//! driver reports a `DeviceError`. The message is the whole error chain of
//! the Rust error, so it says which input (or value, or op) and what was
//! expected.

use pyo3::PyErr;
use pyo3::create_exception;
use pyo3::exceptions::PyRuntimeError;

create_exception!(
    _etwgpu,
    Error,
    PyRuntimeError,
    "Base class of every error etwgpu raises; the message is the runtime's."
);
create_exception!(
    _etwgpu,
    FormatError,
    Error,
    "The file is not a program etwgpu can read: malformed, truncated, missing data, or missing on disk."
);
create_exception!(
    _etwgpu,
    UnsupportedOpError,
    Error,
    "The program holds an operator (or dtype) that etwgpu has no kernel for."
);
create_exception!(
    _etwgpu,
    InputError,
    Error,
    "An argument is wrong: input count, dtype, shape or value, prompt or sampler settings."
);
create_exception!(
    _etwgpu,
    DeviceError,
    Error,
    "The GPU failed: no adapter, a missing feature or limit, out of memory, a lost device."
);

/// The error and its sources, joined by `: ` (a source already at the end
/// of the text is not repeated).
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut msg = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        let m = s.to_string();
        if !msg.ends_with(&m) {
            msg.push_str(": ");
            msg.push_str(&m);
        }
        cur = s.source();
    }
    msg
}

/// Which exception a runtime error raises.
fn runtime_kind(e: &etwgpu_runtime::Error) -> fn(String) -> PyErr {
    use etwgpu_runtime::Error as E;
    use etwgpu_runtime::LowerError as L;
    match e {
        E::NoAdapter
        | E::AdapterNotFound { .. }
        | E::RequestDevice { .. }
        | E::MissingFeature { .. }
        | E::NoTimestamps { .. }
        | E::ShaderOverLimit { .. }
        | E::Gpu { .. }
        | E::OutOfMemory { .. }
        | E::Map { .. }
        | E::TensorTooLarge { .. }
        | E::Lower(L::TensorTooLarge { .. })
        | E::ArgmaxOutput { .. } => DeviceError::new_err,
        E::Lower(L::UnsupportedOp { .. })
        | E::NoKernel { .. }
        | E::NotFullyDelegated { .. }
        | E::UnsupportedDType { .. } => UnsupportedOpError::new_err,
        E::InputCount { .. }
        | E::InputDType { .. }
        | E::InputShape { .. }
        | E::InputOutOfRange { .. }
        | E::SymIntInput { .. }
        | E::TensorBytes { .. }
        | E::CpuArg { .. }
        | E::NoInput { .. }
        | E::NoOutput { .. }
        | E::RunsInFlight { .. }
        | E::NothingToFinish { .. }
        | E::FeedWithoutArgmax { .. }
        | E::FeedInputUnused { .. }
        | E::FeedInputDType { .. }
        | E::FeedTooLong { .. }
        | E::ArgmaxNotOnGpu { .. }
        | E::ArgmaxReadLater { .. }
        | E::NotOneGpuCall { .. } => InputError::new_err,
        E::MethodNotFound { .. } | E::BadEnv { .. } => Error::new_err,
        // What is left is a problem of the program: an op's arguments, its
        // wiring, its constants (`Lower`, `DelegateArgs`, `NotADelegateArg`,
        // `ValueUnset`, `MissingConstant`, `ConstantSize`, ...) or a file
        // (`Npy`, `Io`).
        _ => FormatError::new_err,
    }
}

/// The precision named by a `precision=` argument (`None`: the runtime's);
/// `ValueError` naming the accepted names for any other string.
pub fn precision(name: Option<&str>) -> pyo3::PyResult<Option<etwgpu_runtime::Precision>> {
    name.map(|n| {
        etwgpu_runtime::Precision::from_name(n).ok_or_else(|| {
            pyo3::exceptions::PyValueError::new_err(format!(
                "precision={n:?}: takes {} (or None for the runtime's default)",
                etwgpu_runtime::Precision::ACCEPTED
            ))
        })
    })
    .transpose()
}

/// A runtime error as a Python exception.
pub fn runtime(e: &etwgpu_runtime::Error) -> PyErr {
    runtime_kind(e)(chain(e))
}

/// A format error (opening or parsing the `.pte` at `path` or its `.ptd`
/// files) as a Python exception naming the file.
pub fn format(path: &std::path::Path, e: &etwgpu_format::Error) -> PyErr {
    FormatError::new_err(format!("{}: {}", path.display(), chain(e)))
}

/// An LLM error as a Python exception.
pub fn llm(e: &etwgpu_llm::Error) -> PyErr {
    use etwgpu_llm::Error as E;
    let kind: fn(String) -> PyErr = match e {
        E::Runtime { source, .. } => runtime_kind(source),
        E::EmptyPrompt
        | E::ContextOverflow { .. }
        | E::TokenOutOfRange { .. }
        | E::TokenizerFailed { .. }
        | E::BadSampler { .. } => InputError::new_err,
        // The program's metadata, its logits or the tokenizer file.
        _ => FormatError::new_err,
    };
    kind(chain(e))
}
