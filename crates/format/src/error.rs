//! The error type of `etwgpu-format`.

use std::path::PathBuf;

use crate::fb::FbError;

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can be wrong with a `.pte`, `.ptd` or delegate blob.
///
/// Each variant names what was expected and what was found; [`Error::Context`]
/// wraps an inner error with where it happened (method, delegate, value).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The input ends before a structure it must contain.
    #[error("{what} needs {needed} bytes but only {found} are there")]
    Truncated {
        /// What was being read.
        what: &'static str,
        /// Bytes needed.
        needed: u64,
        /// Bytes available.
        found: u64,
    },
    /// A magic number or FlatBuffer file identifier is wrong.
    #[error("{what}: expected identifier \"{expected}\", found \"{found}\"")]
    Identifier {
        /// What was being read.
        what: &'static str,
        /// The identifier required.
        expected: &'static str,
        /// The bytes found (lossy text).
        found: String,
    },
    /// A FlatBuffer is malformed.
    #[error("{what} FlatBuffer is malformed: {source}")]
    Flatbuffer {
        /// Which FlatBuffer: `program`, `VK00 graph`, `.ptd`.
        what: &'static str,
        /// Where and how.
        #[source]
        source: FbError,
    },
    /// A header field breaks a validity rule.
    #[error("{header} header: {field} = {found} breaks the rule `{rule}`")]
    Header {
        /// `eh00`, `VH00` or `FH01`.
        header: &'static str,
        /// The field.
        field: &'static str,
        /// Its value.
        found: u64,
        /// The rule it breaks.
        rule: &'static str,
    },
    /// An index points past the end of the table it indexes.
    #[error("{what} {index} is out of range (there are {len})")]
    IndexOutOfRange {
        /// What the index is, e.g. `segment index`, `value id`.
        what: &'static str,
        /// The index found.
        index: i64,
        /// The table's length.
        len: usize,
    },
    /// A byte range lies (partly) outside the data it refers to.
    #[error("{what}: bytes {start}..{start}+{len} lie outside the {limit} bytes available")]
    RangeOutOfBounds {
        /// What the range holds.
        what: &'static str,
        /// Start offset.
        start: u64,
        /// Length.
        len: u64,
        /// Size of the enclosing data.
        limit: u64,
    },
    /// A field is required but absent.
    #[error("required field {field} is missing")]
    MissingField {
        /// `Table.field`.
        field: &'static str,
    },
    /// A dtype code is not one this crate knows.
    #[error("unknown dtype code {code} in {what}")]
    UnknownDType {
        /// `VK00 datatype`, `VK00 staging_datatype`, `program scalar_type`.
        what: &'static str,
        /// The code found.
        code: i64,
    },
    /// A union tag is not one the schema defines.
    #[error("unknown {what} type tag {tag}")]
    UnknownTag {
        /// The union.
        what: &'static str,
        /// The tag found.
        tag: u8,
    },
    /// A tensor's shape is unusable (negative or too many dims, or a byte
    /// size that overflows).
    #[error("tensor shape {}: {problem}", short_dims(dims))]
    BadShape {
        /// The dims as stored.
        dims: Vec<i64>,
        /// What is wrong.
        problem: ShapeProblem,
    },
    /// A value has the wrong kind for where it is used.
    #[error("value {id}: expected {expected}, found {found}")]
    ValueKind {
        /// The value id.
        id: u32,
        /// The kind required.
        expected: &'static str,
        /// The kind found.
        found: &'static str,
    },
    /// A constant's bytes are shorter than the tensor that uses them.
    #[error("constant {constant_id} has {found} bytes but tensor value {value_id} needs {needed}")]
    ConstantTooShort {
        /// The constant.
        constant_id: u32,
        /// The tensor value.
        value_id: u32,
        /// Bytes needed.
        needed: u64,
        /// Bytes stored.
        found: u64,
    },
    /// A delegate call passes the wrong number of arguments.
    #[error("delegate {delegate} is called with {found} arguments but its graph has {expected} inputs + outputs")]
    DelegateArity {
        /// Delegate index.
        delegate: usize,
        /// `inputs + outputs` of the graph.
        expected: usize,
        /// Arguments in the call.
        found: usize,
    },
    /// Context for an inner error.
    #[error("{context}: {source}")]
    Context {
        /// Where: `method "forward"`, `delegate 0`, `value 12`.
        context: String,
        /// The error.
        #[source]
        source: Box<Error>,
    },
}

/// What is wrong with a shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ShapeProblem {
    /// More dims than [`crate::MAX_RANK`].
    #[error("rank above the limit of {}", crate::MAX_RANK)]
    RankTooLarge,
    /// A negative dim.
    #[error("negative dimension")]
    NegativeDim,
    /// The byte size does not fit in 64 bits.
    #[error("byte size overflows 64 bits")]
    Overflow,
}

/// Dims for messages: at most 8, then how many more.
fn short_dims(dims: &[i64]) -> String {
    if dims.len() <= 8 { format!("{dims:?}") } else { format!("{:?} and {} more dims", &dims[..8], dims.len() - 8) }
}

impl Error {
    /// Wraps `self` with a description of where it happened.
    pub fn context(self, context: impl Into<String>) -> Self {
        Error::Context { context: context.into(), source: Box::new(self) }
    }

    /// The innermost error, past every [`Error::Context`].
    pub fn root_cause(&self) -> &Error {
        match self {
            Error::Context { source, .. } => source.root_cause(),
            other => other,
        }
    }
}

/// Adds context to results.
pub trait ResultExt<T> {
    /// Wraps an error with the context built by `f`.
    fn context_with(self, f: impl FnOnce() -> String) -> Result<T>;
}

impl<T, E: Into<Error>> ResultExt<T> for std::result::Result<T, E> {
    fn context_with(self, f: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|e| e.into().context(f()))
    }
}
