//! WGSL compute kernels and the operator table of etwgpu.
//!
//! [`ops`] holds the one table of supported ExecuTorch operators, keyed by
//! their exact names (`aten.add.Tensor`). This crate never touches a GPU:
//! it describes kernels; `etwgpu-runtime` runs them.

pub mod ops;
