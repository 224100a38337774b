//! A loaded delegate call: buffers, constants, the lowered op chain, and `run`.
//!
//! Over the house limit of about 600 lines, for now: splitting it by concern
//! (one delegate, buffers and arenas, the compiled dispatch plan, device
//! argmax, profiling) is the open part of the runtime-rooms issue.
//!
//! Load: the chain is fused ([`etwgpu_graph::fuse`], unless
//! [`LoadOptions::fuse`] is off), every op is looked up in the kernel
//! table and lowered at the declared (maximum) shapes (by
//! [`etwgpu_graph::Lowerer`]); view-like ops
//! become buffer aliases; the memory planner ([`etwgpu_graph::plan_graph`])
//! places the intermediates in a few arenas, bound at their planned offsets,
//! so tensors that are never live together share bytes (no dispatch reads
//! and writes one arena: WebGPU tracks usage per whole buffer). Graph
//! inputs and outputs, constants and prepacked tensors keep their own
//! buffers (constants never share, whatever their `mem_obj_id` or named
//! key); so does everything when the device cannot bind the arenas. The
//! scratch tensors ops share (split-KV attention's partials) are appended
//! to the graph at load ([`etwgpu_graph::Lowerer::with_scratch`]), sized at
//! the maximum shapes for every live shape, and keep their own buffers, so
//! re-lowering at each decode position fits the plan. Run:
//! inputs are uploaded; when input shapes or host-read SymInts (SymInt
//! inputs, `select_as_symint` sources) changed, the chain is re-lowered in
//! order at the live values, so every op re-infers its output shape and
//! records only the live work (uniforms carry live sizes); a re-lowered
//! chain that no longer fits the load-time plan moves every intermediate
//! to its own buffer. All dispatches go into one compute pass and one
//! submit, and outputs are read back at their live shapes. Buffers stay at
//! the declared maximum shapes.

use etwgpu_format::{DType, PlanValue, Program, ValueId, VkGraph, VkValue};
use etwgpu_graph::{InputRef, LiveChain, Lowerer};
use etwgpu_kernels::{Step, Vid};

use crate::device::Runtime;
use crate::error::{Error, Result};
use crate::tensor::{Tensor, convert, from_device_layout, to_device_layout};

use etwgpu_graph::lower::elem_type;

/// How [`crate::Runtime::load_with`] loads a method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadOptions {
    /// Rewrite each delegate's op chain with [`etwgpu_graph::fuse`] before
    /// lowering (the default); off runs every op as exported, for
    /// debugging (`etwgpu run --no-fuse`).
    pub fuse: bool,
    /// Store float32 KV caches (those of `sdpa_with_kv_cache`) in float16
    /// on devices with SHADER_F16, halving their memory and the bytes
    /// attention reads; the attention math stays float32 (keys and values
    /// are rounded to float16 as they enter the cache). Off by default,
    /// so a program runs exactly as exported; `etwgpu_llm`'s generator
    /// turns it on. Ignored on devices without SHADER_F16 and for caches
    /// any other op reads.
    pub kv_cache_f16: bool,
    /// Whether float32 matrix products may use f16 operands on devices with
    /// cooperative matrices (`etwgpu run --precision f16`); `None` (the
    /// default) takes the runtime's ([`crate::RuntimeOptions::precision`],
    /// float32 unless `ETWGPU_PRECISION=f16`).
    pub precision: Option<etwgpu_kernels::Precision>,
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self { fuse: true, kv_cache_f16: false, precision: None }
    }
}

/// One method input or output, mapped onto the graph.
#[derive(Debug, Clone)]
struct IoSpec {
    /// Graph value id.
    value: ValueId,
    /// Dtype on the device.
    device_dtype: DType,
    /// Dtype the caller sees (the method's tensor dtype).
    host_dtype: DType,
    /// Maximum shape.
    max_shape: Vec<u64>,
    /// A SymInt input (given as a one-element integer tensor), not a tensor.
    symint: bool,
}

/// SymInt value used for host reads when lowering at load, before any
/// input exists: 0, because host-read SymInts are mostly positions
/// (`input_pos[0]`), and position 0 fits every cache bound at any length.
const PLACEHOLDER_SYMINT: i64 = 0;

/// Element `elem` of an integer tensor, as i64.
fn int_at(t: &Tensor, elem: u64) -> Option<i64> {
    let size = t.dtype.size_bytes();
    let at = usize::try_from(elem).ok()?.checked_mul(size)?;
    let b = t.bytes.get(at..at + size)?;
    Some(match t.dtype {
        DType::I64 => i64::from_le_bytes(b.try_into().ok()?),
        DType::I32 => i64::from(i32::from_le_bytes(b.try_into().ok()?)),
        DType::I16 => i64::from(i16::from_le_bytes(b.try_into().ok()?)),
        DType::I8 => i64::from(b[0] as i8),
        DType::U8 | DType::Bool => i64::from(b[0]),
        _ => return None,
    })
}

/// The recorded form of a lowered chain: its dispatches ready to record,
/// and its uniforms with a host copy, so a re-lowering that keeps the
/// structure patches them in one queue write.
#[derive(Debug)]
struct Plan {
    dispatches: Vec<CompiledDispatch>,
    /// Per chain op: the index of its first dispatch (one more entry at the
    /// end: the number of dispatches).
    node_dispatch: Vec<usize>,
    /// Per dispatch: the offset of its slice of `uniforms`.
    offsets: Vec<u64>,
    /// The bytes of `uniforms`, as last written.
    uniform_bytes: Vec<u8>,
    uniforms: Option<wgpu::Buffer>,
}

/// One dispatch, ready to record: what [`CompiledDispatch::record`] needs,
/// with the chain op it comes from and its shader label for profiles.
#[derive(Debug, Clone)]
pub(crate) struct CompiledDispatch {
    pipeline: wgpu::ComputePipeline,
    bind_group: wgpu::BindGroup,
    workgroups: [u32; 3],
    /// Chain index of its op (`usize::MAX` for a device argmax).
    node: usize,
    label: &'static str,
}

impl CompiledDispatch {
    /// Records it into `pass`: the one way every path (run, submit,
    /// profile, argmax) records a dispatch.
    fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        let [x, y, z] = self.workgroups;
        pass.set_pipeline(&self.pipeline);
        pass.set_bind_group(0, &self.bind_group, &[]);
        pass.dispatch_workgroups(x, y, z);
    }
}

/// The dispatches among some steps, in order.
fn dispatches_of<'a>(steps: impl IntoIterator<Item = &'a Step>) -> impl Iterator<Item = &'a etwgpu_kernels::Dispatch> {
    steps.into_iter().filter_map(|s| match s {
        Step::Dispatch(d) => Some(d),
        _ => None,
    })
}

/// Offsets of each dispatch's uniforms in one buffer, and its bytes.
fn uniform_layout<'a>(params: impl Iterator<Item = &'a [u8]>, align: u64) -> (Vec<u64>, Vec<u8>) {
    let mut offsets = Vec::new();
    let mut bytes = Vec::new();
    for p in params {
        offsets.push(bytes.len() as u64);
        bytes.extend_from_slice(p);
        bytes.resize(align4(bytes.len() as u64).next_multiple_of(align) as usize, 0);
    }
    (offsets, bytes)
}

/// What a load is doing, for [`LoadProgress`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadStage {
    /// Uploading constants (weights): `done` and `total` count bytes.
    Weights,
    /// Compiling compute pipelines: `done` and `total` count pipelines.
    Pipelines,
}

/// How far a load has come within one stage of one delegate call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadProgress {
    /// The stage.
    pub stage: LoadStage,
    /// Work done so far in this stage.
    pub done: u64,
    /// All the work of this stage.
    pub total: u64,
}

/// Where the host's time went over a delegate call's runs (summed since
/// load or the last reset): how long per-call overheads are, measured.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RunTimes {
    /// Runs counted.
    pub runs: u64,
    /// Checking and converting inputs.
    pub inputs: std::time::Duration,
    /// Re-lowering the chain at new shapes or SymInt values, and updating
    /// the plan.
    pub lowering: std::time::Duration,
    /// Lowerings of the whole chain: at load, and again only after a run
    /// failed part-way through re-lowering. A new position or new input
    /// shapes re-run only the host rules they reach (`op_lowerings`).
    pub chain_lowerings: u64,
    /// Host rules run (one per op and lowering): a decode step whose only
    /// change is the position runs those of the ops that read it.
    pub op_lowerings: u64,
    /// Times the bind groups were made anew for a changed structure (other
    /// shaders or bindings); otherwise a re-lowering patches uniforms and
    /// workgroup counts in place.
    pub plan_builds: u64,
    /// Uploading inputs, recording the dispatches and submitting.
    pub recording: std::time::Duration,
    /// Waiting for the GPU to finish and the read-back to map.
    pub waiting: std::time::Duration,
    /// Copying and converting the outputs.
    pub reading: std::time::Duration,
}

impl std::ops::AddAssign for RunTimes {
    fn add_assign(&mut self, o: Self) {
        self.runs += o.runs;
        self.inputs += o.inputs;
        self.lowering += o.lowering;
        self.chain_lowerings += o.chain_lowerings;
        self.op_lowerings += o.op_lowerings;
        self.plan_builds += o.plan_builds;
        self.recording += o.recording;
        self.waiting += o.waiting;
        self.reading += o.reading;
    }
}

/// One delegate call loaded onto a device, ready to [`run`](LoadedDelegate::run);
/// [`crate::LoadedMethod`] runs whole methods through these.
#[derive(Debug)]
pub struct LoadedDelegate {
    rt: Runtime,
    name: String,
    graph: VkGraph,
    /// Per value: the dtype of its constant's bytes in the file where that
    /// differs from its device dtype (empty when none does): float16
    /// tensors made float32 because the device lacks SHADER_F16, float32
    /// KV caches stored as float16 ([`LoadOptions::kv_cache_f16`]).
    file_dtype: Vec<Option<DType>>,
    lowerer: Lowerer,
    inputs: Vec<IoSpec>,
    outputs: Vec<IoSpec>,
    /// Per value: the value whose buffer it uses (itself unless aliased).
    root: Vec<u32>,
    /// Per value: its buffer, for roots that have one.
    buffers: Vec<Option<wgpu::Buffer>>,
    /// The memory plan at the maximum shapes, while intermediates share the
    /// arenas; `None` once every tensor has its own buffer.
    memory: Option<etwgpu_graph::MemoryPlan>,
    /// The arenas of `memory`.
    arenas: Vec<wgpu::Buffer>,
    /// Time every dispatch of each run (see [`LoadedDelegate::profile`]).
    profiling: bool,
    /// Per dispatch of the last profiled run: nanoseconds.
    last_times: Vec<f64>,
    /// Whether `last_times` come from GPU timestamps (else wall time).
    last_times_gpu: bool,
    readback: Vec<wgpu::Buffer>,
    /// The chain lowered at the last run's inputs (at the maximum shapes
    /// after load), op by op.
    live: LiveChain,
    /// Whether `live` may not match `plan` (a re-lowering failed part-way):
    /// the next run lowers the whole chain again.
    stale: bool,
    plan: Plan,
    /// Per input: a buffer holding it on the device, copied in instead of
    /// uploading the caller's bytes (the caller's tensor gives the shape).
    pub(crate) device_inputs: Vec<Option<wgpu::Buffer>>,
    /// Per output: left on the device; `run` returns its shape, no bytes.
    pub(crate) keep_on_device: Vec<bool>,
    /// Per output: an argmax over its last dim, run on the device after the
    /// chain; `run` then returns the int64 indices instead of the tensor.
    argmax: Vec<Option<ArgmaxPost>>,
    /// Host time per stage of `run`.
    pub(crate) times: RunTimes,
    /// Runs submitted and not yet read back, oldest first (see
    /// [`LoadedDelegate::submit`]).
    pending: std::collections::VecDeque<PendingRun>,
    /// Which of its two read-back buffers the next argmax reads into.
    argmax_flip: usize,
}

/// Host time between laps, for [`RunTimes`].
struct Stopwatch(web_time::Instant);

impl Stopwatch {
    fn start() -> Self {
        Self(web_time::Instant::now())
    }

    /// Time since the start or the last lap.
    fn lap(&mut self) -> std::time::Duration {
        let now = web_time::Instant::now();
        let d = now - self.0;
        self.0 = now;
        d
    }
}

/// Runs a [`LoadedDelegate`] may have in flight at once.
pub(crate) const MAX_PENDING: usize = 2;

/// A submitted run whose outputs are not read back yet: per output, the
/// buffer to read, the shape, the bytes to read (0: none) and the device
/// and host dtypes.
#[derive(Debug)]
struct PendingRun {
    outputs: Vec<(wgpu::Buffer, Vec<u64>, u64, DType, DType)>,
    /// Its submission, which its read-back waits for (and nothing later).
    submission: wgpu::SubmissionIndex,
}

/// The device objects of an argmax appended to one output.
#[derive(Debug)]
struct ArgmaxPost {
    /// Its dispatch (workgroups set per run).
    dispatch: CompiledDispatch,
    uniforms: wgpu::Buffer,
    /// int32 indices, one per row.
    result: wgpu::Buffer,
    /// Two, used in turn, so a run can be read back while the next one
    /// copies its indices out.
    readback: [wgpu::Buffer; 2],
}

/// Bytes of a tensor's buffer at its maximum shape (bools take a `u32`
/// each on the device; see `ElemType::device_size_bytes`).
fn device_size_bytes(t: &etwgpu_format::VkTensor) -> u64 {
    t.numel().saturating_mul(elem_type(t.dtype).device_size_bytes() as u64)
}

fn align4(n: u64) -> u64 {
    n.div_ceil(4).max(1) * 4
}

fn tensor_of(graph: &VkGraph, id: ValueId) -> Result<&etwgpu_format::VkTensor> {
    match graph.value(id) {
        VkValue::Tensor(t) => Ok(t),
        other => Err(Error::NotATensor { value: id.0, found: other.kind() }),
    }
}

/// Maps method-level values onto graph values through the call's args.
fn io_specs(
    m: &etwgpu_format::Method,
    graph: &VkGraph,
    args: &[usize],
    plan_values: &[usize],
    graph_ids: &[ValueId],
    arg_range: std::ops::Range<usize>,
) -> Result<Vec<IoSpec>> {
    let plumbing = |what: String| Error::Plumbing { method: m.name.clone(), what };
    plan_values
        .iter()
        .map(|&p| {
            let pos = args[arg_range.clone()]
                .iter()
                .position(|&a| a == p)
                .ok_or_else(|| plumbing(format!("method value {p} is not an argument of the delegate call")))?;
            let value = graph_ids[pos];
            if let VkValue::SymInt(_) = graph.value(value) {
                return Ok(IoSpec {
                    value,
                    device_dtype: DType::I64,
                    host_dtype: DType::I64,
                    max_shape: Vec::new(),
                    symint: true,
                });
            }
            let t = tensor_of(graph, value)?;
            let host_dtype = match &m.values.get(p) {
                Some(PlanValue::Tensor(pt)) => pt.scalar_type.dtype().unwrap_or(t.io_dtype()),
                _ => t.io_dtype(),
            };
            Ok(IoSpec { value, device_dtype: t.dtype, host_dtype, max_shape: t.dims.clone(), symint: false })
        })
        .collect()
}

/// The argmax dispatch of output `output` (`spec`) at `shape`.
fn argmax_dispatch(spec: &IoSpec, output: usize, shape: &[u64]) -> Result<etwgpu_kernels::Dispatch> {
    let x = etwgpu_kernels::TensorInfo {
        id: Vid(spec.value.0),
        dtype: elem_type(spec.device_dtype),
        shape,
        is_constant: false,
    };
    etwgpu_kernels::ops::reduce::argmax_last_dim(&x, Vid(u32::MAX)).map_err(|source| Error::ArgmaxOutput {
        output,
        dtype: spec.device_dtype,
        shape: shape.to_vec(),
        reason: source.to_string(),
    })
}

/// The graph inputs at these live shapes, as the lowerer takes them.
fn input_refs<'a>(specs: &[IoSpec], shapes: &'a [Vec<u64>]) -> Vec<InputRef<'a>> {
    specs
        .iter()
        .zip(shapes)
        .map(|(spec, shape)| InputRef { value: spec.value, shape: (!spec.symint).then_some(shape.as_slice()) })
        .collect()
}

/// Fails, naming the tensor, when one is larger than a storage binding (or a
/// buffer) of this device may be: caught before any GPU object is made.
fn check_tensor_sizes(rt: &Runtime, graph: &VkGraph) -> Result<()> {
    let limits = rt.device.limits();
    let limit = limits.max_storage_buffer_binding_size.min(limits.max_buffer_size);
    for (idx, v) in graph.values.iter().enumerate() {
        if let VkValue::Tensor(t) = v {
            let bytes = device_size_bytes(t);
            if bytes > limit {
                return Err(Error::TensorTooLarge { value: idx as u32, shape: t.dims.clone(), bytes, limit });
            }
        }
    }
    Ok(())
}

impl LoadedDelegate {
    /// Loads one delegate call of method `m`: `args` are its plan values,
    /// the graph's inputs then its outputs; `method` labels the objects.
    /// With `options.fuse` the chain is fused first, for this device's
    /// storage-buffer limit (inputs, outputs and value ids are unchanged).
    #[expect(
        clippy::too_many_arguments,
        reason = "one internal call site per caller kind; a struct would only rename them"
    )]
    pub(crate) async fn load(
        rt: &Runtime,
        program: &Program,
        m: &etwgpu_format::Method,
        graph: &VkGraph,
        args: &[usize],
        method: &str,
        options: &LoadOptions,
        progress: &mut dyn FnMut(LoadProgress),
    ) -> Result<Self> {
        let fused;
        let graph = if options.fuse {
            let max_storage_buffers = rt.device.limits().max_storage_buffers_per_shader_stage;
            fused = etwgpu_graph::fuse(graph, &etwgpu_graph::FuseOptions { max_storage_buffers }).graph;
            &fused
        } else {
            graph
        };
        let n_in = graph.input_ids.len();
        if args.len() != n_in + graph.output_ids.len() {
            return Err(Error::Plumbing {
                method: method.to_string(),
                what: format!(
                    "the delegate call has {} args for {} inputs and {} outputs",
                    args.len(),
                    n_in,
                    graph.output_ids.len()
                ),
            });
        }

        // Without SHADER_F16, float16 tensors live on the device as float32
        // (constants and inputs are widened on upload, outputs narrowed on
        // read-back) and every kernel runs its f32 variant.
        // With it, float32 KV caches may be stored as float16.
        let (mut graph, file_dtype) = if !rt.device.features().contains(wgpu::Features::SHADER_F16) {
            etwgpu_graph::retype::promote_f16(graph)
        } else if let Some(narrowed) =
            options.kv_cache_f16.then(|| etwgpu_graph::retype::narrow_kv_caches(graph)).flatten()
        {
            narrowed
        } else {
            (graph.clone(), Vec::new())
        };
        // Scratch tensors shared by the ops (split-KV attention partials),
        // sized at the maximum shapes and pinned by the memory plan.
        let caps = etwgpu_kernels::DeviceCaps { precision: options.precision.unwrap_or(rt.caps.precision), ..rt.caps };
        let lowerer = Lowerer::with_scratch(&mut graph, PLACEHOLDER_SYMINT)?.with_caps(caps);
        let graph = &graph;
        let inputs = io_specs(m, graph, args, &args[..n_in], &graph.input_ids, 0..n_in)?;
        let outputs = io_specs(m, graph, args, &args[n_in..], &graph.output_ids, n_in..args.len())?;
        if let Some(spec) = outputs.iter().find(|s| s.symint) {
            return Err(Error::NotATensor { value: spec.value.0, found: "SymInt" });
        }
        check_tensor_sizes(rt, graph)?;
        let max_inputs: Vec<Vec<u64>> = inputs.iter().map(|s| s.max_shape.clone()).collect();
        let refs = input_refs(&inputs, &max_inputs);
        let live = lowerer.lower_live(graph, &refs, |_, _| PLACEHOLDER_SYMINT)?;
        let mut me = LoadedDelegate {
            rt: rt.clone(),
            name: method.to_string(),
            graph: graph.clone(),
            file_dtype,
            lowerer,
            inputs,
            outputs,
            root: (0..graph.values.len() as u32).collect(),
            buffers: vec![None; graph.values.len()],
            memory: None,
            arenas: Vec::new(),
            profiling: false,
            last_times: Vec::new(),
            last_times_gpu: false,
            readback: Vec::new(),
            live,
            stale: false,
            plan: Plan {
                dispatches: Vec::new(),
                node_dispatch: Vec::new(),
                offsets: Vec::new(),
                uniform_bytes: Vec::new(),
                uniforms: None,
            },
            device_inputs: Vec::new(),
            keep_on_device: Vec::new(),
            argmax: Vec::new(),
            times: RunTimes::default(),
            pending: std::collections::VecDeque::new(),
            argmax_flip: 0,
        };
        me.device_inputs = vec![None; me.inputs.len()];
        me.keep_on_device = vec![false; me.outputs.len()];
        me.argmax = (0..me.outputs.len()).map(|_| None).collect();
        me.times.chain_lowerings = 1;
        me.times.op_lowerings = me.live.rule_calls();
        let steps = me.live.flatten().steps;
        me.allocate(program, &steps, progress).await?;
        me.compile_pipelines(&steps, progress).await?;
        // Host reads at load saw placeholders: the first run re-reads them
        // and re-runs the rules of the ops they reach.
        me.plan = me.build_plan().await?;
        Ok(me)
    }

    /// Brings the plan to these (checked) inputs: re-runs the host rules
    /// of the ops whose inputs changed ([`Lowerer::relower`]); when their
    /// shaders and bindings stay, patches the uniforms (one queue write)
    /// and workgroup counts, else makes the bind groups anew (and leaves
    /// the arenas when the new steps no longer fit their plan).
    async fn update_plan(&mut self, inputs: &[Tensor]) -> Result<()> {
        let shapes: Vec<Vec<u64>> = inputs.iter().map(|t| t.shape.clone()).collect();
        let refs = input_refs(&self.inputs, &shapes);
        let read = |input: usize, elem| int_at(&inputs[input], elem).unwrap_or(PLACEHOLDER_SYMINT);
        let rebuild = if self.stale {
            self.live = self.lowerer.lower_live(&self.graph, &refs, read)?;
            self.times.chain_lowerings += 1;
            self.times.op_lowerings += self.live.rule_calls();
            true
        } else {
            let before = self.live.rule_calls();
            // Until the plan matches the chain again.
            self.stale = true;
            let r = self.lowerer.relower(&self.graph, &mut self.live, &refs, read)?;
            self.times.op_lowerings += self.live.rule_calls() - before;
            if r.structure_kept {
                self.patch_plan(&r.nodes);
            }
            !r.structure_kept
        };
        self.stale = true;
        if rebuild {
            let steps = self.live.flatten().steps;
            if self.memory.as_ref().is_some_and(|m| !m.fits(&steps)) {
                if !self.pending.is_empty() {
                    return Err(self.in_flight_error("the new shapes need new buffers"));
                }
                self.leave_arenas()?;
            }
            self.plan = self.build_plan().await?;
            self.times.plan_builds += 1;
        }
        self.stale = false;
        Ok(())
    }

    /// Writes the uniforms and workgroup counts of the re-lowered ops
    /// `nodes` (whose structure held) into the plan, with one queue write
    /// of the bytes that changed.
    fn patch_plan(&mut self, nodes: &[usize]) {
        let plan = &mut self.plan;
        let mut span: Option<(usize, usize)> = None;
        for &node in nodes {
            for (j, d) in dispatches_of(self.live.node_steps(node)).enumerate() {
                let i = plan.node_dispatch[node] + j;
                plan.dispatches[i].workgroups = d.workgroups;
                let at = plan.offsets[i] as usize;
                let slot = &mut plan.uniform_bytes[at..at + d.params.len()];
                if slot != d.params.as_slice() {
                    slot.copy_from_slice(&d.params);
                    span =
                        Some(span.map_or((at, at + d.params.len()), |(a, b)| (a.min(at), b.max(at + d.params.len()))));
                }
            }
        }
        if let (Some((a, b)), Some(u)) = (span, &plan.uniforms) {
            self.rt.queue.write_buffer(u, a as u64, &plan.uniform_bytes[a..b]);
        }
    }

    fn root_of(&self, v: Vid) -> usize {
        self.root[v.0 as usize] as usize
    }

    /// The arena and offset of root `idx`, when it lives in an arena.
    fn arena_slot(&self, idx: usize) -> Option<(usize, u64)> {
        match self.memory.as_ref()?.placement(Vid(idx as u32))? {
            etwgpu_graph::Placement::Arena { arena, offset } => Some((arena as usize, offset)),
            etwgpu_graph::Placement::Dedicated => None,
        }
    }

    /// Where root `idx` is bound: its own buffer or its slot of an arena.
    fn binding(&self, idx: usize) -> Result<wgpu::BindingResource<'_>> {
        Ok(match self.arena_slot(idx) {
            Some((arena, offset)) => wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer: &self.arenas[arena],
                offset,
                size: wgpu::BufferSize::new(align4(device_size_bytes(tensor_of(&self.graph, ValueId(idx as u32))?))),
            }),
            None => self.buffers[idx].as_ref().expect("bound values have buffers").as_entire_binding(),
        })
    }

    /// Gives every arena tensor its own buffer: the chain re-lowered at
    /// other shapes no longer fits the plan made at the maximum shapes.
    fn leave_arenas(&mut self) -> Result<()> {
        let Some(memory) = self.memory.take() else { return Ok(()) };
        let usage = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC;
        for c in memory.classes.values() {
            if matches!(c.placement, etwgpu_graph::Placement::Arena { .. }) {
                let idx = self.root_of(c.root);
                let t = tensor_of(&self.graph, ValueId(idx as u32))?;
                self.buffers[idx] = Some(self.rt.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some(&format!("{} %{idx}", self.name)),
                    size: align4(device_size_bytes(t)),
                    usage,
                    mapped_at_creation: false,
                }));
            }
        }
        self.arenas.clear();
        Ok(())
    }

    /// Resolves aliases, creates the buffers and uploads constants and
    /// prepacked tensors (once). Running out of device memory is
    /// [`Error::OutOfMemory`], caught before anything is written into the
    /// buffers that could not be made.
    async fn allocate(
        &mut self,
        program: &Program,
        steps: &[Step],
        progress: &mut dyn FnMut(LoadProgress),
    ) -> Result<()> {
        let oom = self.rt.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let created = self.create_buffers(steps);
        let oom = oom.pop().await;
        let (uploads, bytes) = created?;
        if let Some(e) = oom {
            return Err(Error::OutOfMemory { method: self.name.clone(), bytes, reason: e.to_string() });
        }
        let sizes: Vec<u64> = uploads
            .iter()
            .map(|&(_, src)| tensor_of(&self.graph, src).map(etwgpu_format::VkTensor::size_bytes))
            .collect::<Result<_>>()?;
        let total = sizes.iter().sum();
        let mut done = 0;
        for ((idx, src), size) in uploads.into_iter().zip(sizes) {
            let buffer = self.buffers[idx].clone().expect("uploaded values have buffers");
            self.upload_constant(program, src, &buffer)?;
            done += size;
            progress(LoadProgress { stage: LoadStage::Weights, done, total });
        }
        Ok(())
    }

    /// Compiles the pipelines of `steps` (into the runtime's cache), in
    /// order of first use.
    async fn compile_pipelines(&self, steps: &[Step], progress: &mut dyn FnMut(LoadProgress)) -> Result<()> {
        let mut shaders = Vec::new();
        for step in steps {
            if let Step::Dispatch(d) = step
                && !shaders.contains(&d.shader)
            {
                shaders.push(d.shader.clone());
            }
        }
        let total = shaders.len() as u64;
        for (i, shader) in shaders.into_iter().enumerate() {
            self.rt.pipelines.get_async(&shader).await?;
            progress(LoadProgress { stage: LoadStage::Pipelines, done: i as u64 + 1, total });
        }
        Ok(())
    }

    /// Creates every buffer of the method; returns the constants to upload
    /// (buffer root, constant value) and the bytes asked for.
    fn create_buffers(&mut self, steps: &[Step]) -> Result<(Vec<(usize, ValueId)>, u64)> {
        let mut needed = vec![false; self.graph.values.len()];
        let mut prepacked: Vec<(usize, ValueId)> = Vec::new();
        for step in steps {
            match step {
                Step::Alias { out, src } => self.root[out.0 as usize] = self.root[src.0 as usize],
                Step::Prepack { out, src } => {
                    needed[out.0 as usize] = true;
                    prepacked.push((out.0 as usize, ValueId(src.0)));
                }
                Step::Dispatch(d) => {
                    for v in d.inputs.iter().chain(&d.outputs) {
                        needed[self.root_of(*v)] = true;
                    }
                }
                Step::SymInt { .. } | Step::ReadSymInt { .. } | Step::Scratch { .. } => {}
            }
        }
        let scratch = self.lowerer.scratch();
        for v in &scratch {
            needed[self.root_of(*v)] = true;
        }
        for spec in self.inputs.iter().chain(&self.outputs).filter(|s| !s.symint) {
            needed[self.root[spec.value.idx()] as usize] = true;
        }
        let usage = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC;
        // Intermediates share arenas when the device can bind them at the
        // planned offsets; otherwise each keeps its own buffer.
        let memory = etwgpu_graph::plan_graph(&self.graph, steps, &scratch)?;
        let limits = self.rt.device.limits();
        let usable = u64::from(limits.min_storage_buffer_offset_alignment) <= etwgpu_graph::memory::ALIGN
            && memory
                .arenas
                .iter()
                .all(|&b| b <= limits.max_storage_buffer_binding_size && b <= limits.max_buffer_size)
            && memory.fits(steps);
        let mut uploads = Vec::new();
        let mut bytes = 0u64;
        if usable && !memory.arenas.is_empty() {
            bytes = memory.arenas.iter().map(|&b| align4(b)).fold(0, u64::saturating_add);
            self.arenas = memory
                .arenas
                .iter()
                .enumerate()
                .map(|(i, &size)| {
                    self.rt.device.create_buffer(&wgpu::BufferDescriptor {
                        label: Some(&format!("{} arena {i}", self.name)),
                        size: align4(size),
                        usage,
                        mapped_at_creation: false,
                    })
                })
                .collect();
            self.memory = Some(memory);
        }
        for (idx, need) in needed.iter().enumerate() {
            if !need || self.arena_slot(idx).is_some() {
                continue;
            }
            let t = tensor_of(&self.graph, ValueId(idx as u32))?;
            let size = align4(device_size_bytes(t));
            bytes = bytes.saturating_add(size);
            let buffer = self.rt.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(&format!("{} %{idx}", self.name)),
                size,
                usage,
                mapped_at_creation: false,
            });
            // A constant bound directly (not through prepack) keeps its data.
            if t.constant.is_some() {
                uploads.push((idx, ValueId(idx as u32)));
            }
            self.buffers[idx] = Some(buffer);
        }
        uploads.extend(prepacked);
        bytes = bytes.saturating_add(
            self.outputs
                .iter()
                .filter_map(|s| tensor_of(&self.graph, s.value).ok())
                .map(|t| align4(device_size_bytes(t)))
                .sum::<u64>(),
        );
        self.readback = self
            .outputs
            .iter()
            .enumerate()
            .map(|(i, spec)| {
                let t = tensor_of(&self.graph, spec.value).expect("outputs are tensors");
                self.rt.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some(&format!("{} output {i} read-back", self.name)),
                    size: align4(device_size_bytes(t)),
                    usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                })
            })
            .collect();
        Ok((uploads, bytes))
    }

    fn upload_constant(&self, program: &Program, value: ValueId, buffer: &wgpu::Buffer) -> Result<()> {
        let t = tensor_of(&self.graph, value)?;
        let cid = t.constant.expect("only constants are uploaded");
        let constant = &self.graph.constants[cid.0 as usize];
        let data = match &constant.source {
            etwgpu_format::ConstantSource::Missing { key } => {
                return Err(Error::MissingConstant { value: value.0, key: key.clone() });
            }
            _ => program.data(constant.data().expect("resolved constants have data")),
        };
        // A promoted float16 constant or a narrowed float32 cache: its
        // bytes in the file have the other float type.
        let file_dtype = self.file_dtype.get(value.idx()).copied().flatten().unwrap_or(t.dtype);
        let expected = t.numel() * file_dtype.size_bytes() as u64;
        if data.len() as u64 != expected {
            return Err(Error::ConstantSize { value: value.0, expected, found: data.len() as u64 });
        }
        if !data.is_empty() {
            let data = convert(data, file_dtype, t.dtype)
                .expect("only float16 and float32 trade places")
                .expect("floats always convert");
            let mut padded = to_device_layout(data, t.dtype);
            padded.resize(align4(padded.len() as u64) as usize, 0);
            self.rt.queue.write_buffer(buffer, 0, &padded);
        }
        Ok(())
    }

    /// Alignment of each dispatch's slice of the uniform buffer.
    fn uniform_align(&self) -> u64 {
        u64::from(self.rt.device.limits().min_uniform_buffer_offset_alignment).max(16)
    }

    /// Creates the uniforms and bind groups of the dispatches of `live`.
    async fn build_plan(&self) -> Result<Plan> {
        let align = self.uniform_align();
        let mut node_dispatch = Vec::with_capacity(self.live.n_nodes() + 1);
        let mut dispatches: Vec<(usize, &etwgpu_kernels::Dispatch)> = Vec::new();
        for node in 0..self.live.n_nodes() {
            node_dispatch.push(dispatches.len());
            for step in self.live.node_steps(node) {
                match step {
                    Step::Dispatch(d) => dispatches.push((node, d)),
                    Step::Alias { out, src } => assert_eq!(
                        self.root[out.0 as usize], self.root[src.0 as usize],
                        "aliasing is structural and must not change with shapes"
                    ),
                    Step::Prepack { .. } | Step::SymInt { .. } | Step::ReadSymInt { .. } | Step::Scratch { .. } => {}
                }
            }
        }
        node_dispatch.push(dispatches.len());
        let (offsets, uniform_bytes) = uniform_layout(dispatches.iter().map(|(_, d)| d.params.as_slice()), align);
        let uniforms = (!uniform_bytes.is_empty()).then(|| {
            let b = self.rt.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(&format!("{} uniforms", self.name)),
                size: uniform_bytes.len() as u64,
                usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            self.rt.queue.write_buffer(&b, 0, &uniform_bytes);
            b
        });
        let scope = self.rt.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let mut out = Vec::with_capacity(dispatches.len());
        for (i, &(node, d)) in dispatches.iter().enumerate() {
            let pipeline = self.rt.pipelines.get_async(&d.shader).await?;
            let uniforms = uniforms.as_ref().expect("dispatches have uniforms");
            let mut entries = vec![wgpu::BindGroupEntry {
                binding: 0,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer: uniforms,
                    offset: offsets[i],
                    size: wgpu::BufferSize::new(d.params.len() as u64),
                }),
            }];
            let read_roots: Vec<usize> = d.inputs.iter().map(|v| self.root_of(*v)).collect();
            for (j, v) in d.inputs.iter().chain(&d.outputs).enumerate() {
                let root = self.root_of(*v);
                if j >= d.inputs.len() {
                    assert!(
                        !read_roots.contains(&root),
                        "{}: output %{} shares a buffer with an input",
                        d.shader.label(),
                        v.0
                    );
                }
                entries.push(wgpu::BindGroupEntry { binding: j as u32 + 1, resource: self.binding(root)? });
            }
            let bind_group = self.rt.device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some(&format!("{} dispatch {i} ({})", self.name, d.shader.label())),
                layout: &pipeline.get_bind_group_layout(0),
                entries: &entries,
            });
            out.push(CompiledDispatch {
                pipeline,
                bind_group,
                workgroups: d.workgroups,
                node,
                label: d.shader.label(),
            });
        }
        if let Some(e) = scope.pop().await {
            return Err(Error::Gpu { during: "creating bind groups", reason: e.to_string() });
        }
        Ok(Plan { dispatches: out, node_dispatch, offsets, uniform_bytes, uniforms })
    }

    /// Turns the device argmax of output `output` on or off: while on,
    /// [`run`](Self::run) returns for it the int64 index of the largest
    /// element of each row (last dim), and reads back only those.
    pub(crate) async fn set_argmax(&mut self, output: usize, on: bool) -> Result<()> {
        if !on {
            self.argmax[output] = None;
            return Ok(());
        }
        let spec = &self.outputs[output];
        let max_shape = spec.max_shape.clone();
        let d = argmax_dispatch(spec, output, &max_shape)?;
        let rows = max_shape.iter().rev().skip(1).product::<u64>().max(1);
        let label = |what: &str| format!("{} output {output} argmax {what}", self.name);
        let device = &self.rt.device;
        let pipeline = self.rt.pipelines.get_async(&d.shader).await?;
        let uniforms = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(&label("uniforms")),
            size: d.params.len() as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let result = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(&label("indices")),
            size: rows * 4,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let readback = [0, 1].map(|k| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(&label(&format!("read-back {k}"))),
                size: rows * 4,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        });
        let logits = self.buffers[self.root[spec.value.idx()] as usize].as_ref().expect("outputs have buffers");
        let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(&label("bind group")),
            layout: &pipeline.get_bind_group_layout(0),
            entries: &[
                wgpu::BindGroupEntry { binding: 0, resource: uniforms.as_entire_binding() },
                wgpu::BindGroupEntry { binding: 1, resource: logits.as_entire_binding() },
                wgpu::BindGroupEntry { binding: 2, resource: result.as_entire_binding() },
            ],
        });
        let dispatch = CompiledDispatch {
            pipeline,
            bind_group,
            workgroups: d.workgroups,
            node: usize::MAX,
            label: d.shader.label(),
        };
        self.argmax[output] = Some(ArgmaxPost { dispatch, uniforms, result, readback });
        Ok(())
    }

    /// Number of inputs [`run`](Self::run) takes.
    pub fn n_inputs(&self) -> usize {
        self.inputs.len()
    }

    /// Number of outputs [`run`](Self::run) returns.
    pub fn n_outputs(&self) -> usize {
        self.outputs.len()
    }

    /// Dtype and maximum shape of each input, as the caller passes them.
    pub fn input_specs(&self) -> Vec<(DType, Vec<u64>)> {
        self.inputs.iter().map(|s| (s.host_dtype, s.max_shape.clone())).collect()
    }

    /// Device dtype of input `i` and whether it is a SymInt.
    pub(crate) fn input_device(&self, i: usize) -> (DType, bool) {
        (self.inputs[i].device_dtype, self.inputs[i].symint)
    }

    /// Buffer and device dtype of output `i`.
    pub(crate) fn output_device(&self, i: usize) -> (wgpu::Buffer, DType) {
        let spec = &self.outputs[i];
        (self.buffers[self.root[spec.value.idx()] as usize].clone().expect("outputs have buffers"), spec.device_dtype)
    }

    /// Whether its KV caches are stored as float16 though the program
    /// declares them float32 ([`LoadOptions::kv_cache_f16`]).
    pub fn kv_cache_f16(&self) -> bool {
        self.file_dtype.contains(&Some(DType::F32))
    }

    /// Bytes of the arenas intermediates share (0 when each has its own
    /// buffer).
    pub fn arena_bytes(&self) -> u64 {
        self.arenas.iter().map(wgpu::Buffer::size).sum()
    }

    /// Turns per-dispatch timing on or off for the next runs.
    pub fn set_profiling(&mut self, on: bool) {
        self.profiling = on;
    }

    /// The last profiled run, one row per op of the graph in chain order:
    /// op name, node id, shader labels, dispatches and nanoseconds (GPU
    /// timestamps when the device has `TIMESTAMP_QUERY`, else wall time of
    /// each dispatch submitted alone).
    pub fn profile(&self) -> Vec<crate::NodeProfile> {
        let mut rows: Vec<crate::NodeProfile> = self
            .graph
            .chain
            .iter()
            .map(|call| crate::NodeProfile {
                call: self.name.clone(),
                op: call.name.clone(),
                node_id: call.node_id,
                kernels: Vec::new(),
                dispatches: 0,
                nanos: 0.0,
                gpu_timestamps: self.last_times_gpu,
            })
            .collect();
        for (i, &CompiledDispatch { node, label, .. }) in self.plan.dispatches.iter().enumerate() {
            let row = &mut rows[node];
            row.dispatches += 1;
            if !row.kernels.iter().any(|k| k == label) {
                row.kernels.push(label.to_string());
            }
            row.nanos += self.last_times.get(i).copied().unwrap_or(0.0);
        }
        rows
    }

    /// Records every dispatch in its own pass: with timestamp writes when
    /// the device has `TIMESTAMP_QUERY`, else submitted and waited for one
    /// at a time (wall time). Returns the encoder to go on with.
    async fn record_profiled(
        &self,
        mut encoder: wgpu::CommandEncoder,
    ) -> Result<(wgpu::CommandEncoder, Vec<f64>, bool)> {
        let rt = &self.rt;
        let n = self.plan.dispatches.len();
        let gpu = rt.device.features().contains(wgpu::Features::TIMESTAMP_QUERY) && n > 0;
        let new_encoder = || {
            rt.device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some(&format!("{} profiled run", self.name)),
            })
        };
        if gpu {
            let queries = rt.device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some(&format!("{} timestamps", self.name)),
                ty: wgpu::QueryType::Timestamp,
                count: 2 * n as u32,
            });
            for (i, d) in self.plan.dispatches.iter().enumerate() {
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some(&format!("{} dispatch {i}", self.name)),
                    timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                        query_set: &queries,
                        beginning_of_pass_write_index: Some(2 * i as u32),
                        end_of_pass_write_index: Some(2 * i as u32 + 1),
                    }),
                });
                d.record(&mut pass);
            }
            let bytes = 16 * n as u64;
            let resolve = rt.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(&format!("{} timestamp resolve", self.name)),
                size: bytes,
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            });
            let read = rt.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(&format!("{} timestamp read-back", self.name)),
                size: bytes,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            encoder.resolve_query_set(&queries, 0..2 * n as u32, &resolve, 0);
            encoder.copy_buffer_to_buffer(&resolve, 0, &read, 0, bytes);
            rt.queue.submit([encoder.finish()]);
            rt.map_read(&[read.slice(..)]).await?;
            let view = read.slice(..).get_mapped_range().map_err(|e| Error::Map { reason: e.to_string() })?;
            let ticks: Vec<u64> =
                view.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect();
            drop(view);
            read.unmap();
            let period = f64::from(rt.queue.get_timestamp_period());
            let times = ticks.chunks_exact(2).map(|t| t[1].saturating_sub(t[0]) as f64 * period).collect();
            Ok((new_encoder(), times, true))
        } else {
            rt.queue.submit([encoder.finish()]);
            rt.wait_idle_async().await?;
            let mut times = Vec::with_capacity(n);
            for (i, d) in self.plan.dispatches.iter().enumerate() {
                let t = web_time::Instant::now();
                let mut e = new_encoder();
                {
                    let mut pass = e.begin_compute_pass(&wgpu::ComputePassDescriptor {
                        label: Some(&format!("{} dispatch {i}", self.name)),
                        timestamp_writes: None,
                    });
                    d.record(&mut pass);
                }
                rt.queue.submit([e.finish()]);
                rt.wait_idle_async().await?;
                times.push(t.elapsed().as_secs_f64() * 1e9);
            }
            Ok((new_encoder(), times, false))
        }
    }

    /// Number of compute dispatches one run records at the current shapes.
    pub fn n_dispatches(&self) -> usize {
        self.plan.dispatches.len()
    }

    /// Runs the method once: validates and uploads `inputs`, records every
    /// dispatch into one compute pass, submits once and reads the outputs.
    pub async fn run(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        if !self.pending.is_empty() {
            return Err(self.in_flight_error("a plain run waits for none"));
        }
        self.submit(inputs, None).await?;
        self.finish().await
    }

    fn in_flight_error(&self, what: &str) -> Error {
        Error::Plumbing { method: self.name.clone(), what: format!("{} run(s) in flight: {what}", self.pending.len()) }
    }

    /// Whether input `input` can be [fed](Self::submit) from the argmax of
    /// an output: an int32 tensor on the device (token ids), and an output
    /// with the argmax on. At submit, the input must have at most one
    /// element per argmax row (it takes the first ones).
    pub(crate) fn check_feed(&self, input: usize) -> Result<()> {
        let problem = |what: String| Error::Plumbing { method: self.name.clone(), what };
        if self.argmax.iter().flatten().next().is_none() {
            return Err(problem("no output has the device argmax on, so no input can be fed from it".into()));
        }
        let spec = self.inputs.get(input).ok_or_else(|| problem(format!("no input {input}")))?;
        if spec.symint || spec.device_dtype != DType::I32 {
            return Err(problem(format!(
                "input {input} ({:?} on the device) cannot take int32 argmax indices",
                spec.device_dtype
            )));
        }
        Ok(())
    }

    /// Starts one run without waiting for it; [`finish`](Self::finish)
    /// reads its outputs back (runs finish in the order submitted, at
    /// most [`MAX_PENDING`] in flight). With `fed = Some(i)`, input `i`
    /// (token ids; the tensor passed gives only its shape) is not
    /// uploaded: it takes, on the device, the argmax indices of the run
    /// submitted before, so greedy decoding can submit the next token's
    /// run before reading the last one's token (see
    /// [`check_feed`](Self::check_feed)). While another run is in flight
    /// every output must be an argmax or stay on the device.
    pub(crate) async fn submit(&mut self, inputs: &[Tensor], fed: Option<usize>) -> Result<()> {
        if self.pending.len() >= MAX_PENDING {
            return Err(self.in_flight_error("finish one first"));
        }
        if !self.pending.is_empty()
            && (self.profiling
                || self.argmax.iter().zip(&self.keep_on_device).any(|(post, keep)| post.is_none() && !keep))
        {
            return Err(self.in_flight_error("only argmax outputs can be read back while another run is in flight"));
        }
        if let Some(i) = fed {
            self.check_feed(i)?;
            let rows = self.argmax.iter().flatten().next().map_or(0, |post| post.result.size() / 4);
            let n = inputs.get(i).map_or(0, Tensor::numel);
            if n > rows {
                return Err(Error::Plumbing {
                    method: self.name.clone(),
                    what: format!("input {i} has {n} elements; the argmax it is fed from gives {rows}"),
                });
            }
        }
        let mut clock = Stopwatch::start();
        if inputs.len() != self.inputs.len() {
            return Err(Error::InputCount { expected: self.inputs.len(), found: inputs.len() });
        }
        let mut uploads = Vec::with_capacity(inputs.len());
        for (index, (t, spec)) in inputs.iter().zip(&self.inputs).enumerate() {
            if spec.symint {
                let is_int = matches!(t.dtype, DType::I64 | DType::I32 | DType::I16 | DType::I8 | DType::U8);
                if !is_int || t.numel() != 1 || int_at(t, 0).is_none() {
                    return Err(Error::SymIntInput { index, dtype: t.dtype, shape: t.shape.clone() });
                }
                uploads.push(Vec::new());
                continue;
            }
            if self.device_inputs[index].is_some() {
                uploads.push(Vec::new());
                continue;
            }
            if t.dtype != spec.host_dtype && t.dtype != spec.device_dtype {
                return Err(Error::InputDType { index, expected: spec.host_dtype, found: t.dtype });
            }
            let fits =
                t.shape.len() == spec.max_shape.len() && t.shape.iter().zip(&spec.max_shape).all(|(a, b)| a <= b);
            if !fits {
                return Err(Error::InputShape { index, max: spec.max_shape.clone(), found: t.shape.clone() });
            }
            let expected = t.numel() * t.dtype.size_bytes() as u64;
            if t.bytes.len() as u64 != expected {
                return Err(Error::TensorBytes {
                    dtype: t.dtype,
                    shape: t.shape.clone(),
                    expected,
                    found: t.bytes.len() as u64,
                });
            }
            let mut bytes = match convert(&t.bytes, t.dtype, spec.device_dtype) {
                Some(Ok(b)) => to_device_layout(b, spec.device_dtype),
                Some(Err(found)) => return Err(Error::InputOutOfRange { index, found }),
                None => return Err(Error::InputDType { index, expected: spec.device_dtype, found: t.dtype }),
            };
            bytes.resize(align4(bytes.len() as u64) as usize, 0);
            uploads.push(bytes);
        }
        self.times.inputs += clock.lap();
        self.update_plan(inputs).await?;
        self.times.lowering += clock.lap();
        let rt = &self.rt;
        let scope = rt.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let mut encoder = rt
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some(&format!("{} run", self.name)) });
        let fed_from = self.argmax.iter().flatten().next().map(|post| &post.result);
        for (index, ((spec, bytes), (t, src))) in self
            .inputs
            .iter()
            .zip(&uploads)
            .zip(inputs.iter().zip(&self.device_inputs))
            .enumerate()
            .filter(|(_, ((s, _), _))| !s.symint)
        {
            let buffer = self.buffers[self.root[spec.value.idx()] as usize].as_ref().expect("inputs have buffers");
            let src = if fed == Some(index) { fed_from } else { src.as_ref() };
            match src {
                Some(src) => {
                    let n_bytes = t.numel() * elem_type(spec.device_dtype).device_size_bytes() as u64;
                    if n_bytes > 0 {
                        encoder.copy_buffer_to_buffer(src, 0, buffer, 0, align4(n_bytes));
                    }
                }
                None => rt.queue.write_buffer(buffer, 0, bytes),
            }
        }
        if self.profiling {
            let (e, times, gpu) = self.record_profiled(encoder).await?;
            encoder = e;
            self.last_times = times;
            self.last_times_gpu = gpu;
        } else {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some(&format!("{} pass", self.name)),
                timestamp_writes: None,
            });
            for d in &self.plan.dispatches {
                d.record(&mut pass);
            }
        }
        // Per output: the buffer read back, the shape and bytes read, and
        // the device and host dtypes.
        let mut out_sizes = Vec::with_capacity(self.outputs.len());
        for (i, ((spec, readback), keep)) in
            self.outputs.iter().zip(&self.readback).zip(&self.keep_on_device).enumerate()
        {
            let shape = self.live.shapes()[spec.value.idx()].clone();
            if let Some(post) = &mut self.argmax[i] {
                let d = argmax_dispatch(&self.outputs[i], i, &shape)?;
                self.rt.queue.write_buffer(&post.uniforms, 0, &d.params);
                post.dispatch.workgroups = d.workgroups;
                {
                    let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                        label: Some(&format!("{} output {i} argmax", self.name)),
                        timestamp_writes: None,
                    });
                    post.dispatch.record(&mut pass);
                }
                let rows = &shape[..shape.len().saturating_sub(1)];
                let n_bytes = rows.iter().product::<u64>() * 4;
                let readback = &post.readback[self.argmax_flip];
                encoder.copy_buffer_to_buffer(&post.result, 0, readback, 0, n_bytes);
                out_sizes.push((readback.clone(), rows.to_vec(), n_bytes, DType::I32, DType::I64));
                continue;
            }
            let n_bytes = shape.iter().product::<u64>() * elem_type(spec.device_dtype).device_size_bytes() as u64;
            let n_bytes = if *keep { 0 } else { n_bytes };
            let buffer = self.buffers[self.root[spec.value.idx()] as usize].as_ref().expect("outputs have buffers");
            if n_bytes > 0 {
                encoder.copy_buffer_to_buffer(buffer, 0, readback, 0, align4(n_bytes));
            }
            out_sizes.push((readback.clone(), shape, n_bytes, spec.device_dtype, spec.host_dtype));
        }
        let rt = &self.rt;
        let submission = rt.queue.submit([encoder.finish()]);
        if let Some(e) = scope.pop().await {
            return Err(Error::Gpu { during: "recording the run", reason: e.to_string() });
        }
        if self.argmax.iter().any(Option::is_some) {
            self.argmax_flip ^= 1;
        }
        self.pending.push_back(PendingRun { outputs: out_sizes, submission });
        self.times.recording += clock.lap();
        Ok(())
    }

    /// Waits for the oldest run [submitted](Self::submit) and reads its
    /// outputs back.
    pub(crate) async fn finish(&mut self) -> Result<Vec<Tensor>> {
        let mut clock = Stopwatch::start();
        let Some(PendingRun { outputs: out_sizes, submission }) = self.pending.pop_front() else {
            return Err(Error::Plumbing { method: self.name.clone(), what: "no run to finish".into() });
        };
        let rt = &self.rt;
        let slices: Vec<wgpu::BufferSlice<'_>> =
            out_sizes.iter().filter(|o| o.2 > 0).map(|(readback, _, n, _, _)| readback.slice(..align4(*n))).collect();
        rt.map_read_after(&slices, Some(submission)).await?;
        self.times.waiting += clock.lap();
        let mut results = Vec::with_capacity(self.outputs.len());
        for (readback, shape, n, device_dtype, host_dtype) in out_sizes {
            let device_bytes = if n > 0 {
                let view =
                    readback.slice(..align4(n)).get_mapped_range().map_err(|e| Error::Map { reason: e.to_string() })?;
                let bytes = view[..n as usize].to_vec();
                drop(view);
                readback.unmap();
                from_device_layout(bytes, device_dtype)
            } else {
                Vec::new()
            };
            let bytes = match convert(&device_bytes, device_dtype, host_dtype) {
                Some(Ok(b)) => b,
                _ => device_bytes,
            };
            let dtype = if bytes.len() as u64 == shape.iter().product::<u64>() * host_dtype.size_bytes() as u64
                || bytes.is_empty()
            {
                host_dtype
            } else {
                device_dtype
            };
            results.push(Tensor { dtype, shape, bytes });
        }
        self.times.reading += clock.lap();
        self.times.runs += 1;
        Ok(results)
    }

    /// Host time per stage of the runs since load or the last reset.
    pub fn run_times(&self) -> RunTimes {
        self.times
    }
}
