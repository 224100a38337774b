//! Runs ExecuTorch Vulkan-delegate programs on any GPU through wgpu.
//!
//! ```no_run
//! use etwgpu_runtime::{Runtime, Tensor};
//! let program = etwgpu_format::Program::open("model.pte")?;
//! let rt = Runtime::new()?;
//! let mut method = rt.load(&program, "forward")?;
//! let x = Tensor::read_npy("x.npy")?;
//! let outputs = method.run(&[x])?;
//! outputs[0].write_npy("out.npy")?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [`Runtime::load`] takes a whole method: its Vulkan delegate calls, and
//! the KernelCalls left outside them on the GPU or a CPU fallback (see
//! [`method`]).
//!
//! This is the only crate that uses wgpu. It turns the plain-data steps of
//! `etwgpu-kernels` into buffers, bind groups and dispatches; every compute
//! pipeline is created in [`pipeline_cache`].
#![warn(missing_docs)]

mod argmax;
pub mod bandwidth;
mod buffers;
mod cpu;
pub mod delegate;
pub mod device;
pub mod error;
mod io;
pub mod method;
pub mod options;
mod parked;
pub mod pipeline_cache;
mod plan;
pub mod profile;
pub mod tensor;
mod timeline;

#[cfg(test)]
mod tests;

pub use bandwidth::Bandwidth;
pub use delegate::{
    FOLD_ATTENTION_ENV, GEMV_ATTENTION_ENV, INT8_ACTIVATIONS_ENV, LoadedDelegate, Q4_LAYOUT_ENV, SPLIT_BYTES_ENV,
};
#[cfg(not(target_arch = "wasm32"))]
pub use device::adapters;
pub use device::{
    AdapterSummary, CONV_ENV, COOP_ATTENTION_ENV, COOP_MATRIX_ENV, PRECISION_ENV, Runtime, RuntimeOptions,
    SUBGROUPS_ENV, adapters_async,
};
pub use error::{Error, Result};
pub use etwgpu_graph::LowerError;
pub use etwgpu_graph::route::{Route, kernel_route};
pub use etwgpu_kernels::{ConvKernels, DeviceCaps, GEMV_ATTN_AUTO_KEYS, Precision};
pub use method::LoadedMethod;
pub use options::{LoadOptions, LoadProgress, LoadStage, RunTimes};
pub use pipeline_cache::TRUSTED_SHADERS_ENV;
pub use plan::{EARLY_SUBMIT_ENV, RECORD_THREADS_ENV};
pub use profile::{KERNEL_REPS, NodeProfile, ProfileMode};
pub use tensor::Tensor;
pub use timeline::StepTimes;
