//! Errors of the host rules: an operator's arguments do not fit its schema
//! or a kernel's limits.

/// Why an operator call cannot be lowered.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// The call has the wrong number of arguments.
    #[error("expected {expected} arguments, found {found}")]
    ArgCount {
        /// Number the schema has (outputs included).
        expected: usize,
        /// Number in the call.
        found: usize,
    },
    /// An argument has the wrong kind.
    #[error("argument {arg_idx} ({name}): expected {expected}, found {found}")]
    ArgKind {
        /// Position in the call.
        arg_idx: usize,
        /// Schema name of the argument.
        name: &'static str,
        /// Kind(s) accepted.
        expected: &'static str,
        /// Kind found.
        found: &'static str,
    },
    /// An argument has a value the kernels do not support.
    #[error("argument {arg_idx} ({name}): unsupported value {found} ({reason})")]
    ArgValue {
        /// Position in the call.
        arg_idx: usize,
        /// Schema name of the argument.
        name: &'static str,
        /// The value, printed.
        found: String,
        /// What is supported.
        reason: &'static str,
    },
    /// A tensor has a dtype the kernel has no variant for.
    #[error("argument {arg_idx} ({name}): dtype {found:?} not supported (expected {expected})")]
    DType {
        /// Position in the call.
        arg_idx: usize,
        /// Schema name of the argument.
        name: &'static str,
        /// Dtypes supported.
        expected: &'static str,
        /// Dtype found.
        found: crate::ElemType,
    },
    /// Input shapes that do not fit together.
    #[error("argument {arg_idx} ({name}): shape {found:?} does not fit (expected {expected})")]
    Shape {
        /// Position in the call.
        arg_idx: usize,
        /// Schema name of the argument.
        name: &'static str,
        /// The rule it breaks.
        expected: String,
        /// Shape found.
        found: Vec<u64>,
    },
    /// A tensor's rank exceeds what the kernels address.
    #[error("rank {found} exceeds the kernels' maximum {max}")]
    Rank {
        /// Maximum supported rank.
        max: usize,
        /// Rank found.
        found: usize,
    },
    /// A size or offset does not fit the kernels' 32-bit indexing.
    #[error("{what} = {found} exceeds the kernels' 32-bit indexing")]
    TooLarge {
        /// What overflowed.
        what: &'static str,
        /// Its value.
        found: u64,
    },
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
