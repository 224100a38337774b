//! Reads and writes ExecuTorch `.pte` programs and their Vulkan delegates.
//!
//! [`Program`] parses a `.pte` (its `eh00` header, segments, named data and
//! execution plans) and, for every `VulkanBackend` delegate, the `VH00`
//! header and `VK00` graph into plain Rust types ([`VkGraph`], [`VkValue`],
//! [`VkTensor`], [`OpCall`]). Constants are not copied: they are byte ranges
//! ([`DataRef`]) of the program file or of an external `.ptd`.
//!
//! The input is untrusted. Parsing never panics, never loops on hostile
//! data, and never allocates more than a small multiple of the input size.
//!
//! ```no_run
//! let program = etwgpu_format::Program::open("model.pte")?;
//! for method in &program.methods {
//!     for (idx, _delegate, graph) in method.vulkan_delegates() {
//!         println!("{} delegate {idx}: {} ops", method.name, graph.chain.len());
//!     }
//! }
//! # Ok::<(), etwgpu_format::Error>(())
//! ```
//!
//! [`writer`] builds valid (or deliberately broken) files for tests.
#![forbid(unsafe_code)]

pub mod dtype;
pub mod error;
pub mod fb;
pub mod generated;
pub mod program;
pub mod ptd;
pub mod vulkan;
pub mod writer;

#[cfg(test)]
mod tests;

use std::ops::Range;

pub use dtype::{DType, ScalarType};
pub use error::{Error, Result, ShapeProblem};
pub use program::{
    BlobLocation, CompileSpec, Delegate, Dynamism, Instruction, Method, Operator, PlanTensor, PlanValue, Program,
    TensorData,
};
pub use ptd::ExternalData;
pub use vulkan::{Constant, ConstantId, ConstantSource, OpCall, ValueId, VkGraph, VkTensor, VkValue};

/// The most dims a tensor may have.
pub const MAX_RANK: usize = 16;

/// Which file a [`DataRef`] points into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataFile {
    /// The `.pte` itself.
    Program,
    /// The external `.ptd` with this index (in the order given).
    External(usize),
}

/// A byte range of the program file or of an external data file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataRef {
    /// The file.
    pub file: DataFile,
    /// The bytes.
    pub range: Range<usize>,
}
