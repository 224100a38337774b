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
    /// An environment variable the runtime reads has a value it does not
    /// take.
    #[error("{var}={value:?} is not a value it takes (it takes {accepted})")]
    BadEnv {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// The values it takes.
        accepted: &'static str,
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
    /// The step timeline (`LoadedMethod::set_step_timeline`) needs
    /// timestamp queries, which the device lacks.
    #[error("the step timeline needs timestamp queries, which {adapter:?} lacks")]
    NoTimestamps {
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
    /// Lowering the op chain failed: an op the kernel table lacks, a host
    /// rule that rejects its call, a shape that does not fit, a tensor
    /// over the planner's limit (the message is the lowering's).
    #[error(transparent)]
    Lower(#[from] etwgpu_graph::LowerError),
    /// The delegate call's argument count does not match its graph's
    /// inputs and outputs.
    #[error("method {method:?}: the delegate call has {args} args for {inputs} inputs and {outputs} outputs")]
    DelegateArgs {
        /// Method (delegate call) name.
        method: String,
        /// Arguments of the call.
        args: usize,
        /// Graph inputs.
        inputs: usize,
        /// Graph outputs.
        outputs: usize,
    },
    /// A method input or output is not an argument of the delegate call
    /// that should take or make it.
    #[error("method {method:?}: method value {value} is not an argument of the delegate call")]
    NotADelegateArg {
        /// Method (delegate call) name.
        method: String,
        /// The plan value.
        value: usize,
    },
    /// An instruction reads a plan value no earlier instruction set.
    #[error("method {method:?}: value {value} is read before it is set")]
    ValueUnset {
        /// Method name.
        method: String,
        /// The plan value.
        value: usize,
    },
    /// An input index past the method's inputs.
    #[error("method {method:?}: no input {input} (the method has {n_inputs})")]
    NoInput {
        /// Method name.
        method: String,
        /// Index asked for.
        input: usize,
        /// Inputs the method has.
        n_inputs: usize,
    },
    /// An output index past the method's outputs.
    #[error("method {method:?}: no output {output} (the method has {n_outputs})")]
    NoOutput {
        /// Method name.
        method: String,
        /// Index asked for.
        output: usize,
        /// Outputs the method has.
        n_outputs: usize,
    },
    /// The device argmax was asked of an output no GPU call writes.
    #[error("method {method:?}: output {output} is not written by a GPU call, so the device cannot reduce it")]
    ArgmaxNotOnGpu {
        /// Method name.
        method: String,
        /// The output.
        output: usize,
    },
    /// The device argmax was asked of an output a later instruction reads
    /// (it would see indices instead of the tensor).
    #[error("method {method:?}: output {output} is read by a later instruction, so the device cannot reduce it")]
    ArgmaxReadLater {
        /// Method name.
        method: String,
        /// The output.
        output: usize,
    },
    /// Runs can be submitted ahead only on a method of one GPU call.
    #[error("method {method:?}: runs can be submitted ahead only on a method of one GPU call and no CPU fallback")]
    NotOneGpuCall {
        /// Method name.
        method: String,
    },
    /// Runs in flight keep this call from going ahead.
    #[error("method {method:?}: {runs} run(s) in flight: {blocked}")]
    RunsInFlight {
        /// Method (delegate call) name.
        method: String,
        /// Runs submitted and not yet finished.
        runs: usize,
        /// What they block.
        blocked: &'static str,
    },
    /// `finish` was called with no run submitted.
    #[error("method {method:?}: no run to finish")]
    NothingToFinish {
        /// Method (delegate call) name.
        method: String,
    },
    /// An input was to be fed from the device argmax, but no output has it on.
    #[error("method {method:?}: no output has the device argmax on, so no input can be fed from it")]
    FeedWithoutArgmax {
        /// Method (delegate call) name.
        method: String,
    },
    /// The input to feed from the device argmax does not reach the GPU call.
    #[error("method {method:?}: input {input} does not reach the GPU call")]
    FeedInputUnused {
        /// Method name.
        method: String,
        /// The method input.
        input: usize,
    },
    /// The input to feed from the device argmax cannot hold its int32
    /// indices.
    #[error("method {method:?}: input {input} ({dtype:?} on the device) cannot take int32 argmax indices")]
    FeedInputDType {
        /// Method (delegate call) name.
        method: String,
        /// The input of the call.
        input: usize,
        /// Its dtype on the device (int64 for a SymInt).
        dtype: DType,
    },
    /// The input fed from the device argmax has more elements than the
    /// argmax gives.
    #[error("method {method:?}: input {input} has {elements} elements; the argmax it is fed from gives {rows}")]
    FeedTooLong {
        /// Method (delegate call) name.
        method: String,
        /// The input of the call.
        input: usize,
        /// Its elements.
        elements: u64,
        /// Rows of the argmax (one index each).
        rows: u64,
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
    /// An int64 constant held as int32 on the device has a value outside
    /// the int32 range.
    #[error("constant for value %{value}: element {found} does not fit {dtype}, the dtype the device holds it in")]
    ConstantOutOfRange {
        /// Value id.
        value: u32,
        /// The device dtype.
        dtype: DType,
        /// The first element out of range.
        found: i64,
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
