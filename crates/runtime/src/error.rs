//! Errors of the runtime: device setup, loading a method, running it, and
//! tensor I/O.

use etwgpu_format::DType;

/// Everything that can go wrong in `etwgpu-runtime`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No adapter was found at all.
    #[error("no GPU adapter found (wgpu enumerated none)")]
    NoAdapter,
    /// `ETWGPU_ADAPTER` matched no adapter.
    #[error("ETWGPU_ADAPTER={selector:?} matches none of the adapters: {available:?}")]
    AdapterNotFound {
        /// The selector given.
        selector: String,
        /// Names of the adapters found.
        available: Vec<String>,
    },
    /// The adapter refused to create a device.
    #[error("requesting a device from {adapter:?} failed: {reason}")]
    RequestDevice {
        /// Adapter name.
        adapter: String,
        /// wgpu's message.
        reason: String,
    },
    /// A shader needs a feature the device lacks.
    #[error("shader {shader} needs the device feature {feature}, which {adapter:?} lacks")]
    MissingFeature {
        /// The shader.
        shader: &'static str,
        /// The feature.
        feature: &'static str,
        /// Adapter name.
        adapter: String,
    },
    /// A shader needs more of a limit than the device has (checked before
    /// the pipeline is created).
    #[error("shader {shader} needs {limit_name} >= {needed}, but {adapter:?} has {limit}")]
    ShaderOverLimit {
        /// The shader.
        shader: &'static str,
        /// The `wgpu::Limits` field.
        limit_name: &'static str,
        /// What the shader needs.
        needed: u32,
        /// What the device has.
        limit: u32,
        /// Adapter name.
        adapter: String,
    },
    /// wgpu reported a validation or out-of-memory error.
    #[error("GPU error while {during}: {reason}")]
    Gpu {
        /// What was being done.
        during: &'static str,
        /// wgpu's message.
        reason: String,
    },
    /// The device could not allocate the buffers of a method at load.
    #[error("loading {method:?}: the device ran out of memory allocating {bytes} bytes of buffers ({reason})")]
    OutOfMemory {
        /// The method (delegate call) being loaded.
        method: String,
        /// Bytes of all the buffers the load asked for.
        bytes: u64,
        /// wgpu's message.
        reason: String,
    },
    /// An output cannot be reduced by the device argmax.
    #[error("output {output} ({dtype} {shape:?}) cannot be reduced by argmax on the device: {reason}")]
    ArgmaxOutput {
        /// Output index.
        output: usize,
        /// Its dtype.
        dtype: DType,
        /// Its shape.
        shape: Vec<u64>,
        /// Why.
        reason: String,
    },
    /// Mapping a read-back buffer failed.
    #[error("mapping a read-back buffer failed: {reason}")]
    Map {
        /// wgpu's message.
        reason: String,
    },
    /// The program has no method of that name.
    #[error("no method {name:?} (methods: {available:?})")]
    MethodNotFound {
        /// Name asked for.
        name: String,
        /// Names present.
        available: Vec<String>,
    },
    /// A CPU kernel call has neither a GPU kernel nor a CPU fallback.
    #[error("method {method:?} instruction {instruction}: no GPU kernel and no CPU fallback for {op}")]
    NoKernel {
        /// Method name.
        method: String,
        /// Instruction index in the chain.
        instruction: usize,
        /// Operator name with overload, e.g. `aten::cumsum.out`.
        op: String,
    },
    /// The CPU fallback of an operator rejected its arguments.
    #[error("CPU fallback {op} (instruction {instruction}) argument {arg}: {problem}")]
    CpuArg {
        /// Operator name with overload.
        op: String,
        /// Instruction index in the chain.
        instruction: usize,
        /// Argument position.
        arg: usize,
        /// What is wrong.
        problem: String,
    },
    /// The method holds an instruction etwgpu cannot run.
    #[error("method {method:?} cannot run: {found}")]
    NotFullyDelegated {
        /// Method name.
        method: String,
        /// What was found instead.
        found: String,
    },
    /// The delegate call's arguments do not line up with the graph's inputs and outputs.
    #[error("method {method:?}: {what}")]
    Plumbing {
        /// Method name.
        method: String,
        /// What does not line up.
        what: String,
    },
    /// A tensor is larger than one storage binding of this device may be.
    #[error("tensor %{value} {shape:?} needs {bytes} bytes, over this device's limit of {limit} bytes per binding")]
    TensorTooLarge {
        /// The value id.
        value: u32,
        /// Its (maximum) shape.
        shape: Vec<u64>,
        /// Bytes it needs on the device.
        bytes: u64,
        /// The device's limit.
        limit: u64,
    },
    /// An operator is not in the kernel table.
    #[error("unsupported operator {op} (node {node_id})")]
    UnsupportedOp {
        /// ExecuTorch op name.
        op: String,
        /// Node id of the call.
        node_id: u32,
    },
    /// An operator's host rule rejected the call.
    #[error("operator {op} (node {node_id})")]
    Op {
        /// ExecuTorch op name.
        op: String,
        /// Node id of the call.
        node_id: u32,
        /// Why.
        #[source]
        source: etwgpu_kernels::Error,
    },
    /// An operator computed an output shape its tensor cannot hold.
    #[error("operator {op} (node {node_id}) output %{value}: shape {found:?} does not fit the declared {max:?}")]
    OutputShape {
        /// ExecuTorch op name.
        op: String,
        /// Node id of the call.
        node_id: u32,
        /// The output value id.
        value: u32,
        /// Declared (maximum) shape.
        max: Vec<u64>,
        /// Shape computed.
        found: Vec<u64>,
    },
    /// A graph value that must be a tensor is not.
    #[error("value %{value} should be a tensor, found {found}")]
    NotATensor {
        /// Value id.
        value: u32,
        /// Kind found.
        found: &'static str,
    },
    /// A tensor has a dtype the runtime cannot hold on the device.
    #[error("value %{value} has dtype {dtype}, which the runtime cannot hold")]
    UnsupportedDType {
        /// Value id.
        value: u32,
        /// The dtype.
        dtype: DType,
    },
    /// A constant's bytes were not found (missing `.ptd`).
    #[error("constant for value %{value} (key {key:?}) was not found; pass its .ptd")]
    MissingConstant {
        /// Value id.
        value: u32,
        /// Named-data key.
        key: String,
    },
    /// A constant's byte length does not match its tensor.
    #[error("constant for value %{value}: expected {expected} bytes, found {found}")]
    ConstantSize {
        /// Value id.
        value: u32,
        /// Bytes the tensor needs.
        expected: u64,
        /// Bytes stored.
        found: u64,
    },
    /// Wrong number of inputs.
    #[error("expected {expected} inputs, found {found}")]
    InputCount {
        /// Inputs the method takes.
        expected: usize,
        /// Inputs given.
        found: usize,
    },
    /// An input has the wrong dtype.
    #[error("input {index}: expected dtype {expected}, found {found}")]
    InputDType {
        /// Input position.
        index: usize,
        /// Dtype expected.
        expected: DType,
        /// Dtype given.
        found: DType,
    },
    /// An input has the wrong rank or a dim above its maximum.
    #[error("input {index}: shape {found:?} does not fit the maximum {max:?}")]
    InputShape {
        /// Input position.
        index: usize,
        /// Maximum shape.
        max: Vec<u64>,
        /// Shape given.
        found: Vec<u64>,
    },
    /// An integer input does not fit the device's 32-bit type.
    #[error("input {index}: value {found} does not fit int32")]
    InputOutOfRange {
        /// Input position.
        index: usize,
        /// The value.
        found: i64,
    },
    /// A SymInt input is not given as a one-element integer tensor.
    #[error("input {index}: a SymInt input takes a one-element integer tensor, found {dtype} {shape:?}")]
    SymIntInput {
        /// Input position.
        index: usize,
        /// Dtype given.
        dtype: DType,
        /// Shape given.
        shape: Vec<u64>,
    },
    /// `et_vk.select_as_symint` reads a tensor the host has no copy of.
    #[error("operator {op} (node {node_id}) reads %{value} on the host, but only graph inputs are readable")]
    SymIntSource {
        /// ExecuTorch op name.
        op: String,
        /// Node id of the call.
        node_id: u32,
        /// The tensor read.
        value: u32,
    },
    /// An operator declared more scratch than was sized at load (a bug in
    /// its host rule).
    #[error(
        "operator {op} (node {node_id}) declares {bytes} bytes of scratch {slot}, over the {capacity} sized at load"
    )]
    Scratch {
        /// ExecuTorch op name.
        op: String,
        /// Node id of the call.
        node_id: u32,
        /// The scratch slot.
        slot: usize,
        /// Bytes declared.
        bytes: u64,
        /// Bytes of the scratch tensor.
        capacity: u64,
    },
    /// A tensor's byte length does not match its dtype and shape.
    #[error("tensor of dtype {dtype} and shape {shape:?} needs {expected} bytes, found {found}")]
    TensorBytes {
        /// Dtype.
        dtype: DType,
        /// Shape.
        shape: Vec<u64>,
        /// Bytes needed.
        expected: u64,
        /// Bytes given.
        found: u64,
    },
    /// A `.npy` file could not be parsed or written.
    #[error("npy: {problem}")]
    Npy {
        /// What is wrong.
        problem: String,
    },
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<etwgpu_graph::LowerError> for Error {
    fn from(e: etwgpu_graph::LowerError) -> Self {
        use etwgpu_graph::LowerError as L;
        match e {
            L::UnsupportedOp { op, node_id } => Error::UnsupportedOp { op, node_id },
            L::Op { op, node_id, source } => Error::Op { op, node_id, source },
            L::OutputShape { op, node_id, value, max, found } => Error::OutputShape { op, node_id, value, max, found },
            L::NotATensor { value, found } => Error::NotATensor { value, found },
            L::SymIntSource { op, node_id, value } => Error::SymIntSource { op, node_id, value },
            L::Scratch { op, node_id, slot, bytes, capacity } => Error::Scratch { op, node_id, slot, bytes, capacity },
            L::TensorTooLarge { value, bytes, limit } => {
                Error::TensorTooLarge { value, shape: Vec::new(), bytes, limit }
            }
        }
    }
}
