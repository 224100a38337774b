//! One delegate call loaded onto a device: [`LoadedDelegate`], its inputs
//! and outputs, the lowered op chain kept live, and `run` (or `submit`
//! and `finish`, with up to two runs in flight).
//!
//! Load: int64 tensors are made int32 ([`etwgpu_graph::retype::narrow_i64`]),
//! the chain is fused ([`etwgpu_graph::fuse()`], unless
//! [`LoadOptions::fuse`] is off) and retyped for the device
//! ([`etwgpu_graph::retype`]); every op is looked up in the kernel table
//! and lowered at the declared (maximum) shapes (by
//! [`etwgpu_graph::Lowerer`]). The scratch tensors ops share (split-KV
//! attention's partials) are appended to the graph at load
//! ([`etwgpu_graph::Lowerer::with_scratch`]), sized at the maximum shapes
//! for every live shape, so re-lowering at each decode position fits the
//! buffers (`buffers.rs`). The dispatches are compiled into a plan
//! (`plan.rs`).
//!
//! Run: inputs are uploaded; when input shapes or host-read SymInts
//! (SymInt inputs, `select_as_symint` sources) changed, the host rules of
//! the ops they reach run again at the live values, so every op re-infers
//! its output shape and records only the live work (uniforms carry live
//! sizes); a re-lowered chain that no longer fits the load-time memory
//! plan moves every intermediate to its own buffer. All dispatches go into
//! one compute pass and one submit (with the device argmax of an output,
//! `argmax.rs`, at the end of that pass, or in a pass of its own where
//! the chain is recorded on several threads or timed), and outputs are
//! read back at their live shapes. While the step timeline is on (`timeline.rs`), each run's chain
//! and argmax passes carry GPU timestamps.
//!
//! The file is past 700 lines because load, run and read-back share
//! [`LoadedDelegate`]'s fields; what stands alone (the argmax, the plan,
//! the buffers, profiles, the timeline) lives in modules of its own.

use etwgpu_format::{DType, Program, ValueId, VkGraph};
use etwgpu_graph::lower::elem_type;
use etwgpu_graph::{LiveChain, LowerError, Lowered, Lowerer};

use crate::argmax::{ArgmaxInput, ArgmaxPost};
use crate::buffers::{DeviceBuffers, Layout, align4, check_tensor_sizes};
use crate::device::Runtime;
use crate::error::{Error, Result};
use crate::io::{IoSpec, input_refs, int_at, io_specs};
use crate::options::{LoadOptions, LoadProgress, RunTimes, Stopwatch};
use crate::parked::{InputShapes, Parked};
use crate::plan::{Plan, compile_pipelines, record_threads};
use crate::profile::{NodeProfile, ProfileMode, Profiling};
use crate::tensor::{Tensor, convert, from_device_layout, to_device_layout};

/// `ETWGPU_Q4_LAYOUT=rows`: keep 4-bit weights in the file's row-major
/// layout instead of word-major (`etwgpu_graph::layout`), for comparisons.
pub const Q4_LAYOUT_ENV: &str = "ETWGPU_Q4_LAYOUT";

/// `ETWGPU_FOLD_ATTENTION=0`: leave the decode attention and the 4-bit
/// linear after it apart (`etwgpu_graph::FuseOptions::attention_linear`),
/// so the split-KV combine runs as its own dispatch, for comparisons.
pub const FOLD_ATTENTION_ENV: &str = "ETWGPU_FOLD_ATTENTION";

/// `ETWGPU_GEMV_ATTENTION=1`: compute decode attention over a short cache
/// inside the O projection's 4-bit GEMV at every position where the device
/// allows it (`etwgpu_kernels::DeviceCaps::gemv_attention`), `=0` never,
/// when [`LoadOptions::gemv_attention`] is not set. By default only while
/// the live context is at most [`etwgpu_kernels::GEMV_ATTN_AUTO_KEYS`]
/// keys: it is faster only below ~100 keys on the H200 and, with the
/// kernel of run as, ~120 on an H100 (`tools/device/NOTES.md`, runs aj,
/// aq and as).
pub const GEMV_ATTENTION_ENV: &str = "ETWGPU_GEMV_ATTENTION";

/// `ETWGPU_INT8_ACTIVATIONS=1`: one-row 4-bit GEMVs round their input to
/// int8 (`etwgpu_kernels::DeviceCaps::int8_activations`) when
/// [`LoadOptions::int8_activations`] is not set. Off by default.
pub const INT8_ACTIVATIONS_ENV: &str = "ETWGPU_INT8_ACTIVATIONS";

/// Environment variable: split constants larger than this many bytes where
/// [`LoadOptions::split_bytes`] is not set (see there).
pub const SPLIT_BYTES_ENV: &str = "ETWGPU_SPLIT_BYTES";

/// SymInt value used for host reads when lowering at load, before any
/// input exists: 0, because host-read SymInts are mostly positions
/// (`input_pos[0]`), and position 0 fits every cache bound at any length.
const PLACEHOLDER_SYMINT: i64 = 0;

/// One delegate call loaded onto a device, ready to [`run`](LoadedDelegate::run);
/// `LoadedMethod` runs whole methods through these.
#[derive(Debug)]
pub struct LoadedDelegate {
    rt: Runtime,
    name: String,
    graph: VkGraph,
    /// Per value: the dtype of its constant's bytes in the file where that
    /// differs from its device dtype (empty when none does): int64 tensors
    /// held as int32, float16 tensors made float32 because the device lacks
    /// SHADER_F16, float32 KV caches stored as float16
    /// ([`LoadOptions::kv_cache_f16`]).
    file_dtype: Vec<Option<DType>>,
    lowerer: Lowerer,
    inputs: Vec<IoSpec>,
    outputs: Vec<IoSpec>,
    buffers: DeviceBuffers,
    profiling: Profiling,
    /// The chain lowered at the last run's inputs (at the maximum shapes
    /// after load), op by op.
    live: LiveChain,
    /// Whether `live` may not match `plan` (a re-lowering failed part-way):
    /// the next run lowers the whole chain again.
    stale: bool,
    plan: Plan,
    /// Chains lowered at other input shapes, with their plans.
    parked: Parked,
    /// Threads that record a run's dispatches ([`crate::RECORD_THREADS_ENV`]).
    #[cfg_attr(target_arch = "wasm32", expect(dead_code, reason = "the browser records on one thread"))]
    record_threads: usize,
    /// Whether a run with nothing in flight submits its first dispatches
    /// before recording the rest ([`crate::EARLY_SUBMIT_ENV`]).
    early_submit: bool,
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
    /// GPU timestamps of consecutive runs, while on (`timeline.rs`).
    timeline: Option<crate::timeline::Timeline>,
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
        // int64 tensors (exports with `downcast_64_bit=False`) live on the
        // device as int32: constants and inputs are narrowed on upload (a
        // value out of range is an error), outputs widened on read-back.
        // Narrowed first, so the chain fuses as a downcast export's would.
        let narrowed_i64 = etwgpu_graph::retype::narrow_i64(graph);
        let graph = narrowed_i64.as_ref().map_or(graph, |(g, _)| g);
        let fused;
        let graph = if options.fuse {
            let max_storage_buffers = rt.device.limits().max_storage_buffers_per_shader_stage;
            let attention_linear = std::env::var(FOLD_ATTENTION_ENV).map_or(true, |v| v != "0");
            fused =
                etwgpu_graph::fuse(graph, &etwgpu_graph::FuseOptions { max_storage_buffers, attention_linear }).graph;
            &fused
        } else {
            graph
        };
        let n_in = graph.input_ids.len();
        if args.len() != n_in + graph.output_ids.len() {
            return Err(Error::DelegateArgs {
                method: method.to_string(),
                args: args.len(),
                inputs: n_in,
                outputs: graph.output_ids.len(),
            });
        }

        // Without SHADER_F16, float16 tensors live on the device as float32
        // (constants and inputs are widened on upload, outputs narrowed on
        // read-back) and every kernel runs its f32 variant.
        // With it, float32 KV caches may be stored as float16.
        let (mut graph, mut file_dtype) = if !rt.device.features().contains(wgpu::Features::SHADER_F16) {
            etwgpu_graph::retype::promote_f16(graph)
        } else if let Some(narrowed) =
            options.kv_cache_f16.then(|| etwgpu_graph::retype::narrow_kv_caches(graph)).flatten()
        {
            narrowed
        } else {
            (graph.clone(), Vec::new())
        };
        if let Some((_, before)) = &narrowed_i64 {
            file_dtype = etwgpu_graph::retype::merge_before(before, &file_dtype);
        }
        // Constants past the binding limit (or `split_bytes`) are split by
        // rows, before the layout pass so that 4-bit chunks go word-major.
        let limits = rt.device.limits();
        let split_at = options
            .split_bytes
            .or_else(|| std::env::var(SPLIT_BYTES_ENV).ok().and_then(|v| v.parse().ok()))
            .unwrap_or(u64::MAX)
            .min(limits.max_storage_buffer_binding_size)
            .min(limits.max_buffer_size);
        let split = etwgpu_graph::split::split_large(&mut graph, &mut file_dtype, split_at);
        // Constant 4-bit weights that only the fast 4-bit kernels read are
        // held word-major (rearranged on upload) unless
        // `ETWGPU_Q4_LAYOUT=rows` keeps the file's rows.
        if std::env::var(Q4_LAYOUT_ENV).map_or(true, |v| v != "rows") {
            etwgpu_graph::layout::q4_word_major(&mut graph);
        }
        // The attention inside the O projection's GEMV: at every position
        // (`Some(true)`), never (`Some(false)`), or while the context is
        // short (`None`, the device's default).
        let gemv_attention = options.gemv_attention.or_else(|| match std::env::var(GEMV_ATTENTION_ENV).as_deref() {
            Ok("1") => Some(true),
            Ok("0") => Some(false),
            _ => None,
        });
        let caps = etwgpu_kernels::DeviceCaps {
            precision: options.precision.unwrap_or(rt.caps.precision),
            subgroups: rt.caps.subgroups.filter(|_| options.subgroups.unwrap_or(rt.subgroups_by_default)),
            conv: options.conv.unwrap_or(rt.caps.conv),
            gemv_attention: rt.caps.gemv_attention && gemv_attention == Some(true),
            gemv_attention_keys: if gemv_attention.is_none() { rt.caps.gemv_attention_keys } else { 0 },
            int8_activations: rt.caps.int8_activations
                && options
                    .int8_activations
                    .unwrap_or_else(|| std::env::var(INT8_ACTIVATIONS_ENV).is_ok_and(|v| v == "1")),
            ..rt.caps
        };
        // Scratch tensors shared by the ops (split-KV attention partials),
        // sized at the maximum shapes and pinned by the memory plan.
        let lowerer = Lowerer::with_scratch_for(&mut graph, PLACEHOLDER_SYMINT, caps)?;
        let graph = &graph;
        let inputs = io_specs(m, graph, args, &args[..n_in], &graph.input_ids, 0..n_in)?;
        let outputs = io_specs(m, graph, args, &args[n_in..], &graph.output_ids, n_in..args.len())?;
        if let Some(spec) = outputs.iter().find(|s| s.symint) {
            return Err(LowerError::NotATensor { value: spec.value.0, found: "SymInt" }.into());
        }
        check_tensor_sizes(rt, graph)?;
        let max_inputs: Vec<Vec<u64>> = inputs.iter().map(|s| s.max_shape.clone()).collect();
        let refs = input_refs(&inputs, &max_inputs);
        let live = lowerer.lower_live(graph, &refs, |_, _| PLACEHOLDER_SYMINT)?;
        let Lowered { steps, nodes, .. } = live.flatten();
        let scratch = lowerer.scratch();
        let io: Vec<ValueId> = inputs.iter().chain(&outputs).filter(|s| !s.symint).map(|s| s.value).collect();
        let output_ids: Vec<ValueId> = outputs.iter().map(|s| s.value).collect();
        let layout = Layout {
            rt,
            name: method,
            graph,
            file_dtype: &file_dtype,
            windows: &split.windows,
            steps: &steps,
            nodes: &nodes,
            scratch: &scratch,
            io: &io,
            outputs: &output_ids,
        };
        let buffers = DeviceBuffers::allocate(&layout, program, progress).await?;
        compile_pipelines(rt, &steps, progress).await?;
        // Host reads at load saw placeholders: the first run re-reads them
        // and re-runs the rules of the ops they reach.
        let plan = Plan::build(rt, method, graph, &live, &buffers).await?;
        let times = RunTimes { chain_lowerings: 1, op_lowerings: live.rule_calls(), ..RunTimes::default() };
        Ok(LoadedDelegate {
            rt: rt.clone(),
            name: method.to_string(),
            graph: graph.clone(),
            file_dtype,
            lowerer,
            device_inputs: vec![None; inputs.len()],
            keep_on_device: vec![false; outputs.len()],
            argmax: (0..outputs.len()).map(|_| None).collect(),
            inputs,
            outputs,
            buffers,
            profiling: Profiling::default(),
            live,
            stale: false,
            plan,
            parked: Parked::default(),
            record_threads: options.record_threads.map_or_else(record_threads, |n| n.max(1)),
            early_submit: options.early_submit.unwrap_or_else(crate::plan::early_submit),
            times,
            pending: std::collections::VecDeque::new(),
            argmax_flip: 0,
            timeline: None,
        })
    }

    /// Brings the plan to these (checked) inputs: re-runs the host rules
    /// of the ops whose inputs changed ([`Lowerer::relower`]); when their
    /// shaders and bindings stay at the same input shapes, patches the
    /// uniforms (one queue write) and workgroup counts, else makes the bind
    /// groups anew (and leaves the arenas when the new steps no longer fit
    /// their plan), parking the chain of the old shapes with its plan.
    async fn update_plan(&mut self, inputs: &[Tensor]) -> Result<()> {
        let shapes: Vec<Vec<u64>> = inputs.iter().map(|t| t.shape.clone()).collect();
        let refs = input_refs(&self.inputs, &shapes);
        let read = |input: usize, elem| int_at(&inputs[input], elem).unwrap_or(PLACEHOLDER_SYMINT);
        // New shapes that no parked chain holds: the chain of the old ones
        // is kept, with its plan.
        let mut leaving = if self.stale || self.unpark(&shapes) {
            None
        } else {
            Some((self.live_input_shapes(&self.live), self.live.clone()))
        };
        // The old shapes' chain keeps a plan of its own even where the new
        // shapes keep its structure (a prompt of a few rows and the decode
        // steps take the same kernels on the split route): built anew here
        // instead of patched, so the next call at those shapes swaps the
        // chain back, with its plan and its affine model, instead of
        // running every host rule again (run ar, fourth call).
        let shapes_changed = leaving.is_some();
        // The live chain at these shapes, at a position its affine model
        // does not reach (a decode plan whose attention route follows the
        // position, past the route's bound): a parked chain of these shapes
        // whose model does reach it takes over; else the live one is kept
        // too if lowering changes its structure, for the next time.
        if !self.stale && leaving.is_none() && self.live.has_affine() && !Lowerer::covers(&self.live, &refs, read) {
            let current = self.live_input_shapes(&self.live);
            let covering = |s: &InputShapes, l: &LiveChain| *s == current && Lowerer::covers(l, &refs, read);
            if !self.parked.swap_in(current.clone(), &mut self.live, &mut self.plan, covering) {
                leaving = Some((current, self.live.clone()));
            }
        }
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
            if r.structure_kept && !shapes_changed {
                self.plan.patch(&self.rt.queue, &self.live, &r.nodes);
            }
            !r.structure_kept || shapes_changed
        };
        self.stale = true;
        if rebuild {
            let steps = self.live.flatten().steps;
            let mut leaving = leaving;
            if !self.buffers.fits(&steps) {
                if !self.pending.is_empty() {
                    return Err(self.in_flight_error("the new shapes need new buffers"));
                }
                self.buffers.leave_arenas(&self.rt, &self.name, &self.graph)?;
                // Their bind groups name the arenas.
                self.parked.clear();
                leaving = None;
            }
            let plan = Plan::build(&self.rt, &self.name, &self.graph, &self.live, &self.buffers).await?;
            let old = std::mem::replace(&mut self.plan, plan);
            self.times.plan_builds += 1;
            if let Some((shapes, live)) = leaving {
                self.parked.park(shapes, live, old);
            }
        }
        self.stale = false;
        Ok(())
    }

    /// The plan's dispatches recorded on [`record_threads`] threads, when
    /// it splits (see [`Plan::record_threaded`]).
    fn record_threaded(&self) -> Option<Vec<wgpu::CommandBuffer>> {
        #[cfg(not(target_arch = "wasm32"))]
        {
            self.plan.record_threaded(&self.rt.device, &self.name, self.record_threads)
        }
        #[cfg(target_arch = "wasm32")]
        None
    }

    /// The shapes of the inputs as `live` holds them (`None` for SymInts).
    fn live_input_shapes(&self, live: &LiveChain) -> InputShapes {
        self.inputs.iter().map(|s| (!s.symint).then(|| live.shapes()[s.value.idx()].clone())).collect()
    }

    /// Whether `held` (per input, `None` for SymInts) are these `shapes`.
    fn same_shapes<'a>(&self, held: impl Iterator<Item = Option<&'a [u64]>>, shapes: &[Vec<u64>]) -> bool {
        held.zip(&self.inputs).zip(shapes).all(|((h, spec), shape)| spec.symint || h == Some(shape.as_slice()))
    }

    /// Before re-lowering for inputs of these `shapes`: whether the live
    /// chain holds them already (checked without allocating: every decode
    /// step asks), or a parked chain did and was swapped in (the live one
    /// parked in its place), so what is left to change is what changed
    /// since that chain last ran (a position, not shapes).
    fn unpark(&mut self, shapes: &[Vec<u64>]) -> bool {
        let live = self.inputs.iter().map(|s| (!s.symint).then(|| self.live.shapes()[s.value.idx()].as_slice()));
        if self.same_shapes(live, shapes) {
            return true;
        }
        let wanted: InputShapes =
            self.inputs.iter().zip(shapes).map(|(s, shape)| (!s.symint).then(|| shape.clone())).collect();
        let current = self.live_input_shapes(&self.live);
        self.parked.swap_in(current, &mut self.live, &mut self.plan, |s, _| *s == wanted)
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
        let x = ArgmaxInput { output, value: spec.value, dtype: spec.device_dtype };
        let post = ArgmaxPost::new(&self.rt, &self.name, x, &spec.max_shape, self.buffers.own(spec.value)).await?;
        self.argmax[output] = Some(post);
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
        (self.buffers.own(spec.value).clone(), spec.device_dtype)
    }

    /// Whether its KV caches are stored as float16 though the program
    /// declares them float32 ([`LoadOptions::kv_cache_f16`]).
    pub fn kv_cache_f16(&self) -> bool {
        self.file_dtype.contains(&Some(DType::F32))
    }

    /// Whether its one-row 4-bit GEMVs take int8 activations
    /// ([`LoadOptions::int8_activations`], where the device allows them).
    pub fn int8_activations(&self) -> bool {
        self.lowerer.caps().int8_activations
    }

    /// The live context (keys) up to which its decode attention runs
    /// inside the O projection's GEMV by default, then the split route
    /// (`etwgpu_kernels::DeviceCaps::gemv_attention_keys`; 0 where the
    /// route does not follow the live context: the device lacks the
    /// kernel, or the load asked for one route at every position).
    pub fn gemv_attention_keys(&self) -> u32 {
        self.lowerer.caps().gemv_attention_keys
    }

    /// Bytes of the arenas intermediates share (0 when each has its own
    /// buffer).
    pub fn arena_bytes(&self) -> u64 {
        self.buffers.arena_bytes()
    }

    /// Turns per-dispatch timing on or off for the next runs.
    pub fn set_profiling(&mut self, on: bool) {
        self.profiling.on = on;
    }

    /// How profiled runs are timed (per dispatch by default).
    pub fn set_profile_mode(&mut self, mode: ProfileMode) {
        self.profiling.mode = mode;
    }

    /// GPU nanoseconds of the whole chain in one pass, from the last
    /// [`ProfileMode::ByKernel`] run (`None` after any other run).
    pub fn profiled_total_nanos(&self) -> Option<f64> {
        self.profiling.total
    }

    /// The last profiled run, one row per op of the graph in chain order:
    /// op name, node id, shader labels, dispatches and nanoseconds (GPU
    /// timestamps when the device has `TIMESTAMP_QUERY`, else wall time of
    /// each dispatch submitted alone).
    pub fn profile(&self) -> Vec<NodeProfile> {
        self.profiling.rows(&self.name, &self.graph, &self.plan)
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

    /// The runs in flight block what a call was to do.
    fn in_flight_error(&self, blocked: &'static str) -> Error {
        Error::RunsInFlight { method: self.name.clone(), runs: self.pending.len(), blocked }
    }

    /// Whether input `input` can be [fed](Self::submit) from the argmax of
    /// an output: an int32 tensor on the device (token ids), and an output
    /// with the argmax on. At submit, the input must have at most one
    /// element per argmax row (it takes the first ones).
    pub(crate) fn check_feed(&self, input: usize) -> Result<()> {
        let method = || self.name.clone();
        if self.argmax.iter().flatten().next().is_none() {
            return Err(Error::FeedWithoutArgmax { method: method() });
        }
        let spec = self.inputs.get(input).ok_or_else(|| Error::NoInput {
            method: method(),
            input,
            n_inputs: self.inputs.len(),
        })?;
        if spec.symint || spec.device_dtype != DType::I32 {
            return Err(Error::FeedInputDType { method: method(), input, dtype: spec.device_dtype });
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
            && (self.profiling.on
                || self.argmax.iter().zip(&self.keep_on_device).any(|(post, keep)| post.is_none() && !keep))
        {
            return Err(self.in_flight_error("only argmax outputs can be read back while another run is in flight"));
        }
        if let Some(i) = fed {
            self.check_feed(i)?;
            let rows = self.argmax.iter().flatten().next().map_or(0, ArgmaxPost::rows);
            let n = inputs.get(i).map_or(0, Tensor::numel);
            if n > rows {
                return Err(Error::FeedTooLong { method: self.name.clone(), input: i, elements: n, rows });
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
            if !etwgpu_graph::route::fits_allocation(&t.shape, &spec.max_shape) {
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
            let buffer = self.buffers.own(spec.value);
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
        // Command buffers submitted before `encoder`'s: the inputs, then
        // the dispatches when several threads record them.
        let mut before = Vec::new();
        // The step timeline's writes for this run (its chain on one pass;
        // none while profiling, which records the chain its own way).
        let writes = if self.profiling.on {
            None
        } else {
            self.timeline.as_ref().and_then(crate::timeline::Timeline::next_writes)
        };
        let timed = writes.is_some();
        let (chain_writes, mut argmax_writes) = writes.map_or((None, None), |(c, a)| (Some(c), Some(a)));
        // Whether the argmax dispatches went into the chain's pass.
        let mut argmax_recorded = false;
        if self.profiling.on {
            encoder = self.profiling.record(&self.rt, &self.name, &self.plan, encoder).await?;
        } else if let Some(parts) = if timed { None } else { self.record_threaded() } {
            before
                .push(std::mem::replace(&mut encoder, rt.device.create_command_encoder(&Default::default())).finish());
            before.extend(parts);
        } else {
            // With nothing in flight (a prompt, a plain run), the GPU would
            // wait for the whole chain's recording: its first dispatches go
            // ahead with the inputs (one pass, submitted now), the rest
            // follow. Not on the step timeline, which times the chain as
            // one pass.
            let early = self.plan.early_dispatches(self.early_submit && self.pending.is_empty() && !timed);
            if early > 0 {
                {
                    let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                        label: Some(&format!("{} pass (first dispatches)", self.name)),
                        timestamp_writes: None,
                    });
                    self.plan.record_range(&mut pass, 0..early);
                }
                let head = std::mem::replace(&mut encoder, rt.device.create_command_encoder(&Default::default()));
                rt.queue.submit([head.finish()]);
                self.times.command_buffers += 1;
            }
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some(&format!("{} pass", self.name)),
                timestamp_writes: chain_writes,
            });
            self.plan.record_range(&mut pass, early..self.plan.dispatches.len());
            // The argmax in the same pass, except on the step timeline
            // (which times it as a pass of its own).
            if !timed {
                for (spec, post) in self.outputs.iter().zip(&mut self.argmax) {
                    if let Some(post) = post {
                        post.record_dispatches(&self.rt, &self.live.shapes()[spec.value.idx()], &mut pass)?;
                        argmax_recorded = true;
                    }
                }
            }
        }
        // Per output: the buffer read back, the shape and bytes read, and
        // the device and host dtypes.
        let mut out_sizes = Vec::with_capacity(self.outputs.len());
        for (i, ((spec, readback), keep)) in
            self.outputs.iter().zip(&self.buffers.readback).zip(&self.keep_on_device).enumerate()
        {
            let shape = self.live.shapes()[spec.value.idx()].clone();
            if let Some(post) = &mut self.argmax[i] {
                let (readback, rows, n_bytes) = if argmax_recorded {
                    post.copy_out(&mut encoder, &shape, self.argmax_flip)
                } else {
                    post.record(&self.rt, &self.name, &mut encoder, &shape, self.argmax_flip, argmax_writes.take())?
                };
                out_sizes.push((readback, rows, n_bytes, DType::I32, DType::I64));
                continue;
            }
            let n_bytes = shape.iter().product::<u64>() * elem_type(spec.device_dtype).device_size_bytes() as u64;
            let n_bytes = if *keep { 0 } else { n_bytes };
            let buffer = self.buffers.own(spec.value);
            if n_bytes > 0 {
                encoder.copy_buffer_to_buffer(buffer, 0, readback, 0, align4(n_bytes));
            }
            out_sizes.push((readback.clone(), shape, n_bytes, spec.device_dtype, spec.host_dtype));
        }
        let rt = &self.rt;
        before.push(encoder.finish());
        if timed && let Some(t) = &mut self.timeline {
            t.runs += 1;
        }
        self.times.recording += clock.lap();
        self.times.command_buffers += before.len() as u64;
        let submission = rt.queue.submit(before);
        if let Some(e) = scope.pop().await {
            return Err(Error::Gpu { during: "recording the run", reason: e.to_string() });
        }
        if self.argmax.iter().any(Option::is_some) {
            self.argmax_flip ^= 1;
        }
        self.pending.push_back(PendingRun { outputs: out_sizes, submission });
        self.times.submitting += clock.lap();
        Ok(())
    }

    /// Waits for the oldest run [submitted](Self::submit) and reads its
    /// outputs back.
    pub(crate) async fn finish(&mut self) -> Result<Vec<Tensor>> {
        let mut clock = Stopwatch::start();
        let Some(PendingRun { outputs: out_sizes, submission }) = self.pending.pop_front() else {
            return Err(Error::NothingToFinish { method: self.name.clone() });
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
            // Same dtypes: the bytes as read (`convert` would copy them).
            let bytes = if device_dtype == host_dtype {
                device_bytes
            } else {
                match convert(&device_bytes, device_dtype, host_dtype) {
                    Some(Ok(b)) => b,
                    _ => device_bytes,
                }
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

    /// Turns the step timeline on for the next `runs` runs (`None`: off);
    /// see [`crate::StepTimes`]. Not while runs are in flight.
    pub(crate) fn set_timeline(&mut self, runs: Option<u32>) -> Result<()> {
        if !self.pending.is_empty() {
            return Err(self.in_flight_error("finish the runs in flight before turning the timeline on or off"));
        }
        self.timeline = runs.map(|n| crate::timeline::Timeline::new(&self.rt, n)).transpose()?;
        Ok(())
    }

    /// The step timeline's runs so far (the timeline stays on, emptied).
    pub(crate) async fn take_timeline(&mut self) -> Result<Vec<crate::StepTimes>> {
        if !self.pending.is_empty() {
            return Err(self.in_flight_error("finish the runs in flight before reading the timeline"));
        }
        let Some(t) = &mut self.timeline else { return Ok(Vec::new()) };
        let with_argmax = self.argmax.iter().any(Option::is_some);
        let times = t.read(&self.rt, with_argmax).await?;
        t.runs = 0;
        Ok(times)
    }

    /// Host time per stage of the runs since load or the last reset.
    pub fn run_times(&self) -> RunTimes {
        self.times
    }
}
