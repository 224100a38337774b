//! Execution planning for etwgpu: shapes, memory planning, fusion.
//!
//! This crate never touches a GPU and its output is deterministic (no
//! `std` `HashMap`): the same graph gives a byte-identical plan.
//!
//! - [`memory`]: liveness analysis and arena placement of intermediate
//!   tensors, with the naive / planned / lower-bound report.
//! - [`lower`]: the op chain lowered into steps at live shapes.
//! - [`fuse`](mod@fuse): the op chain rewritten before lowering, fused groups of
//!   ops replaced by `etwgpu.*` ops.
//! - [`layout`]: the device layouts of constants chosen at load (4-bit
//!   weights word-major for the fast 4-bit kernels).
//! - [`retype`]: int64 held as int32, float16 promotion and KV-cache
//!   narrowing, the dtype rewrites the runtime picks per device.
//! - [`split`]: constants past the device's binding limit split by rows
//!   into chunks that fit, the ops reading them into one op per chunk.
//! - [`route`]: where a KernelCall outside the delegate runs (a one-op GPU
//!   graph, the CPU fallback, or nowhere).
//! - [`method_plan`]: a whole method's steps (delegates, kernel calls,
//!   moves, frees) and which GPU call outputs stay on the device.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod affine;
pub mod fuse;
pub mod layout;
pub mod lower;
pub mod memory;
pub mod method_plan;
pub mod retype;
pub mod route;
pub mod split;

#[cfg(test)]
mod tests;

pub use fuse::{FuseOptions, Fused, Fusion, FusionKind, describe, fuse};
pub use lower::{InputRef, LiveChain, LowerError, Lowered, Lowerer, Relowered, lower_at_max, plan_graph};
pub use memory::{MemoryPlan, Placement, StorageClass, plan as plan_memory};
