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
//! [`program`]).
//!
//! This is the only crate that uses wgpu. It turns the plain-data steps of
//! `etwgpu-kernels` into buffers, bind groups and dispatches; every compute
//! pipeline is created in [`pipeline_cache`].

pub mod bandwidth;
mod cpu;
pub mod device;
pub mod error;
pub mod method;
pub mod pipeline_cache;
pub mod program;
pub mod tensor;

#[cfg(test)]
mod tests;

pub use bandwidth::Bandwidth;
#[cfg(not(target_arch = "wasm32"))]
pub use device::adapters;
pub use device::{AdapterSummary, COOP_MATRIX_ENV, PRECISION_ENV, Runtime, RuntimeOptions, adapters_async};
pub use error::{Error, Result};
pub use etwgpu_kernels::{DeviceCaps, Precision};
pub use method::{LoadOptions, LoadProgress, LoadStage, RunTimes};
pub use program::{LoadedMethod, Route, kernel_route};
pub use tensor::Tensor;

/// One op of a GPU call in a profiled run (see
/// [`LoadedMethod::set_profiling`]).
#[derive(Debug, Clone, PartialEq)]
pub struct NodeProfile {
    /// The GPU call (delegate) label.
    pub call: String,
    /// ExecuTorch op name.
    pub op: String,
    /// Node id of the op in its graph.
    pub node_id: u32,
    /// Shader labels of its dispatches, first use order.
    pub kernels: Vec<String>,
    /// Dispatches it recorded (0 for views and host-only ops).
    pub dispatches: usize,
    /// Time of its dispatches, nanoseconds.
    pub nanos: f64,
    /// Whether the time comes from GPU timestamps (else wall time of each
    /// dispatch submitted alone).
    pub gpu_timestamps: bool,
}
