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
//! ```
//! use etwgpu_format::Program;
//!
//! // A committed fixture: `x + y` on float32 [2, 4], one Vulkan delegate.
//! let program = Program::open("../../test_data/fixtures/one_op/model.pte")?;
//! let forward = program.method("forward").expect("the export's method");
//! assert!(forward.is_fully_delegated());
//! for (idx, _delegate, graph) in forward.vulkan_delegates() {
//!     for call in &graph.chain {
//!         println!("delegate {idx}: {} on {:?}", call.name, call.args);
//!     }
//!     assert_eq!(graph.chain[0].name, "aten.add.Tensor");
//! }
//! # Ok::<(), etwgpu_format::Error>(())
//! ```
//!
//! A program can also come from memory ([`Program::from_bytes`]), e.g. one
//! built with [`writer`]:
//!
//! ```
//! use etwgpu_format::{Program, writer};
//!
//! // `relu(linear(x + y * 2))`, the worked example of the format notes.
//! let bytes = writer::ProgramBuilder::single_delegate(writer::worked_example()).to_bytes();
//! let program = Program::from_bytes(bytes)?;
//! let (_, _, graph) = program.methods[0].vulkan_delegates().next().expect("one delegate");
//! let ops: Vec<&str> = graph.chain.iter().map(|c| c.name.as_str()).collect();
//! assert_eq!(ops, ["et_vk.prepack.default", "aten.mul.Tensor", "aten.add.Tensor", "aten.linear.default", "aten.relu.default"]);
//! # Ok::<(), etwgpu_format::Error>(())
//! ```
//!
//! [`writer`] builds valid (or deliberately broken) files for tests.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

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
