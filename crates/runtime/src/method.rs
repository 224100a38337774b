//! A whole method: the ExecutionPlan's instruction chain, run in order.
//!
//! The steps come from the GPU-free method plan
//! ([`etwgpu_graph::method_plan`]); this file instantiates them. Each
//! Vulkan DelegateCall becomes a [`LoadedDelegate`] (one delegate,
//! [`crate::delegate`]). A KernelCall runs on the GPU as a one-op graph
//! (also a [`LoadedDelegate`]) or in the CPU fallback, as
//! [`etwgpu_graph::route`] decides, or loading fails with [`Error::NoKernel`].
//! MoveCall copies a value and FreeCall drops it. A GPU call's output that
//! only later GPU calls read (the plan's links, where the dtypes on the
//! device agree too) stays on the device, copied buffer to buffer into the
//! next call; every other output is read back to the host, and each GPU
//! call that reads back counts as one host round trip
//! ([`LoadedMethod::host_round_trips`]).

use etwgpu_format::program::TensorData;
use etwgpu_format::{DType, PlanValue, Program};
use etwgpu_graph::method_plan::{DeviceLink, MethodStep, Unrunnable, plan_method};

use crate::cpu::{self, CpuOp};
use crate::delegate::LoadedDelegate;
use crate::device::Runtime;
use crate::error::{Error, Result};
use crate::options::{LoadOptions, LoadProgress, RunTimes};
use crate::profile::{NodeProfile, ProfileMode};
use crate::tensor::Tensor;

/// One instruction, ready to run.
#[derive(Debug)]
enum Exec {
    /// A GPU call (a Vulkan delegate or a one-op graph): `args` are its
    /// inputs then its outputs; `extra` get a copy of the last output.
    Gpu {
        call: Box<LoadedDelegate>,
        args: Vec<usize>,
        n_in: usize,
        extra: Vec<usize>,
    },
    /// A CPU fallback call on its schema args; `extra` alias the out.
    Cpu {
        op: CpuOp,
        name: String,
        instruction: usize,
        schema: Vec<usize>,
        extra: Vec<usize>,
    },
    Move {
        from: usize,
        to: usize,
    },
    Free(usize),
}

impl Exec {
    /// Plan values the step reads.
    fn reads(&self) -> Vec<usize> {
        match self {
            Exec::Gpu { args, n_in, .. } => args[..*n_in].to_vec(),
            Exec::Cpu { schema, .. } => schema[..schema.len() - 1].to_vec(),
            Exec::Move { from, .. } => vec![*from],
            Exec::Free(_) => Vec::new(),
        }
    }
}

/// Keeps on the device the GPU call outputs the method plan links to later
/// GPU calls (`links`), where their dtypes on the device agree too (for
/// every reader of the output, or it is read back for all): those calls
/// copy them buffer to buffer instead of a read-back and an upload.
fn link_on_device(steps: &mut [Exec], links: &[DeviceLink]) {
    let device_io = |steps: &[Exec], l: &DeviceLink| {
        let (Exec::Gpu { call: from, .. }, Exec::Gpu { call: to, .. }) = (&steps[l.producer], &steps[l.consumer])
        else {
            unreachable!("links join GPU calls")
        };
        let (buffer, dtype) = from.output_device(l.output);
        (buffer, to.input_device(l.input) == (dtype, false))
    };
    for l in links {
        let (buffer, agrees) = device_io(steps, l);
        let same_output = |o: &&DeviceLink| (o.producer, o.output) == (l.producer, l.output);
        if !agrees || !links.iter().filter(same_output).all(|o| device_io(steps, o).1) {
            continue;
        }
        let Exec::Gpu { call, .. } = &mut steps[l.producer] else { unreachable!("links start at GPU calls") };
        call.keep_on_device[l.output] = true;
        let Exec::Gpu { call, .. } = &mut steps[l.consumer] else { unreachable!("links end at GPU calls") };
        call.device_inputs[l.input] = Some(buffer);
    }
}

/// A method loaded onto a device, ready to [`run`](LoadedMethod::run).
#[derive(Debug)]
pub struct LoadedMethod {
    name: String,
    values: Vec<PlanValue>,
    inputs: Vec<usize>,
    outputs: Vec<usize>,
    input_specs: Vec<(DType, Vec<u64>)>,
    /// Per plan value: its constant data, if any.
    initial: Vec<Option<Tensor>>,
    steps: Vec<Exec>,
    host_round_trips: usize,
    /// Whether its pipelines came from the trusted view of the cache.
    trusted_shaders: bool,
}

impl LoadedMethod {
    pub(crate) async fn load(
        rt: &Runtime,
        program: &Program,
        method: &str,
        options: &LoadOptions,
        progress: &mut dyn FnMut(LoadProgress),
    ) -> Result<Self> {
        let m = program.method(method).ok_or_else(|| Error::MethodNotFound {
            name: method.to_string(),
            available: program.methods.iter().map(|m| m.name.clone()).collect(),
        })?;
        let cannot = |found: String| Error::NotFullyDelegated { method: method.to_string(), found };
        // A trusted load's delegates keep the runtime with the cache's
        // trusted view: every pipeline they create, at load or at a later
        // re-lowering, goes through it.
        #[cfg(not(target_arch = "wasm32"))]
        let trusting = if rt.trusts(options) { rt.trusting() } else { None };
        #[cfg(target_arch = "wasm32")]
        let trusting: Option<Runtime> = None;
        let rt = trusting.as_ref().unwrap_or(rt);
        let plan = plan_method(m);
        let mut steps = Vec::with_capacity(plan.steps.len());
        let mut n_delegates = 0;
        for (k, step) in plan.steps.into_iter().enumerate() {
            steps.push(match step {
                MethodStep::Delegate { delegate_index, args, n_in } => {
                    let graph = m.delegates[delegate_index].graph.as_ref().expect("planned delegates have a graph");
                    let label =
                        if n_delegates == 0 { method.to_string() } else { format!("{method} delegate {n_delegates}") };
                    n_delegates += 1;
                    let call = LoadedDelegate::load(rt, program, m, graph, &args, &label, options, progress).await?;
                    Exec::Gpu { call: Box::new(call), args, n_in, extra: Vec::new() }
                }
                MethodStep::GpuKernel { op, graph, args, extra } => {
                    let label = format!("{method} {op} (instruction {k})");
                    let call = LoadedDelegate::load(rt, program, m, &graph, &args, &label, options, progress).await?;
                    let n_in = args.len() - 1;
                    Exec::Gpu { call: Box::new(call), args, n_in, extra }
                }
                MethodStep::CpuCall { op, schema, arity, extra } => {
                    if schema.len() != arity {
                        return Err(Error::CpuArg {
                            op,
                            instruction: k,
                            arg: schema.len(),
                            problem: format!("expected {arity} args (out last), found {}", schema.len()),
                        });
                    }
                    let (cop, _) =
                        cpu::lookup(&op).expect("every planned CPU call has a fallback (a unit test checks)");
                    Exec::Cpu { op: cop, name: op, instruction: k, schema, extra }
                }
                MethodStep::Move { from, to } => Exec::Move { from, to },
                MethodStep::Free(v) => Exec::Free(v),
                MethodStep::Unrunnable(Unrunnable::ForeignDelegate(backend)) => {
                    return Err(cannot(format!("a {backend} delegate")));
                }
                MethodStep::Unrunnable(Unrunnable::NoKernel(op)) => {
                    return Err(Error::NoKernel { method: method.to_string(), instruction: k, op });
                }
                MethodStep::Unrunnable(Unrunnable::ControlFlow) => {
                    return Err(cannot("control flow (JumpFalse)".into()));
                }
            });
        }
        link_on_device(&mut steps, &plan.on_device);
        let initial = m
            .values
            .iter()
            .enumerate()
            .map(|(p, v)| match v {
                PlanValue::Tensor(t) => match &t.data {
                    TensorData::None => Ok(None),
                    TensorData::Constant(r) => Ok(Some(Tensor {
                        dtype: t
                            .scalar_type
                            .dtype()
                            .ok_or_else(|| cannot(format!("value {p} has an unknown dtype")))?,
                        shape: t.sizes.iter().map(|&s| s.max(0) as u64).collect(),
                        bytes: program.data(r).to_vec(),
                    })),
                    TensorData::External(key) => Err(Error::MissingConstant { value: p as u32, key: key.clone() }),
                },
                _ => Ok(None),
            })
            .collect::<Result<Vec<_>>>()?;
        let input_specs = m
            .inputs
            .iter()
            .map(|&p| match &m.values.get(p) {
                Some(PlanValue::Tensor(t)) => {
                    (t.scalar_type.dtype().unwrap_or(DType::F32), t.sizes.iter().map(|&s| s.max(0) as u64).collect())
                }
                _ => (DType::I64, Vec::new()),
            })
            .collect();
        Ok(LoadedMethod {
            name: method.to_string(),
            values: m.values.clone(),
            inputs: m.inputs.clone(),
            outputs: m.outputs.clone(),
            input_specs,
            initial,
            steps,
            host_round_trips: 0,
            trusted_shaders: trusting.is_some(),
        })
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
        self.input_specs.clone()
    }

    /// Number of compute dispatches one run records at the current shapes,
    /// over every GPU call.
    pub fn n_dispatches(&self) -> usize {
        self.steps.iter().map(|s| if let Exec::Gpu { call, .. } = s { call.n_dispatches() } else { 0 }).sum()
    }

    /// Turns per-dispatch timing of every GPU call on or off for the next
    /// runs (slower: each dispatch gets its own pass).
    pub fn set_profiling(&mut self, on: bool) {
        for s in &mut self.steps {
            if let Exec::Gpu { call, .. } = s {
                call.set_profiling(on);
            }
        }
    }

    /// How profiled runs of every GPU call are timed (see
    /// [`ProfileMode`]; per dispatch by default).
    pub fn set_profile_mode(&mut self, mode: ProfileMode) {
        for s in &mut self.steps {
            if let Exec::Gpu { call, .. } = s {
                call.set_profile_mode(mode);
            }
        }
    }

    /// GPU nanoseconds of the GPU calls' whole chains (each in one pass),
    /// summed, from the last run profiled [`ProfileMode::ByKernel`]; `None`
    /// when a call has no such figure.
    pub fn profiled_total_nanos(&self) -> Option<f64> {
        self.steps
            .iter()
            .filter_map(|s| if let Exec::Gpu { call, .. } = s { Some(call.profiled_total_nanos()) } else { None })
            .sum()
    }

    /// Per op of every GPU call, in order: the last profiled run.
    pub fn profile(&self) -> Vec<NodeProfile> {
        self.steps
            .iter()
            .flat_map(|s| if let Exec::Gpu { call, .. } = s { call.profile() } else { Vec::new() })
            .collect()
    }

    /// Whether any GPU call stores its KV caches as float16 though the
    /// program declares them float32 ([`LoadOptions::kv_cache_f16`]).
    pub fn kv_cache_f16(&self) -> bool {
        self.steps.iter().any(|s| matches!(s, Exec::Gpu { call, .. } if call.kv_cache_f16()))
    }

    /// Whether any GPU call's one-row 4-bit GEMVs take int8 activations
    /// ([`LoadOptions::int8_activations`]).
    pub fn int8_activations(&self) -> bool {
        self.steps.iter().any(|s| matches!(s, Exec::Gpu { call, .. } if call.int8_activations()))
    }

    /// The largest live context up to which a GPU call's decode attention
    /// runs inside the O projection's GEMV by default (0: no call changes
    /// route by the live context; see `LoadedDelegate::gemv_attention_keys`).
    pub fn gemv_attention_keys(&self) -> u32 {
        let bounds = self.steps.iter().filter_map(|s| match s {
            Exec::Gpu { call, .. } => Some(call.gemv_attention_keys()),
            _ => None,
        });
        bounds.max().unwrap_or(0)
    }

    /// Whether it was loaded on the trusted path
    /// ([`LoadOptions::trusted_shaders`] asked for it, on Vulkan): its
    /// kernels of families marked `// bounds: host-checked` run without
    /// index clamps.
    pub fn trusted_shaders(&self) -> bool {
        self.trusted_shaders
    }

    /// Bytes of the arenas the intermediates of every GPU call share.
    pub fn arena_bytes(&self) -> u64 {
        self.steps.iter().map(|s| if let Exec::Gpu { call, .. } = s { call.arena_bytes() } else { 0 }).sum()
    }

    /// Number of GPU calls of the method (Vulkan delegates and KernelCalls
    /// run on the GPU).
    pub fn n_gpu_calls(&self) -> usize {
        self.steps.iter().filter(|s| matches!(s, Exec::Gpu { .. })).count()
    }

    /// Number of KernelCalls run by the CPU fallback.
    pub fn n_cpu_calls(&self) -> usize {
        self.steps.iter().filter(|s| matches!(s, Exec::Cpu { .. })).count()
    }

    /// Host round trips of the last [`run`](Self::run): GPU calls whose
    /// outputs were read back to the host (outputs that only feed later GPU
    /// calls stay on the device and are copied buffer to buffer).
    pub fn host_round_trips(&self) -> usize {
        self.host_round_trips
    }

    /// Turns the device argmax of method output `output` on or off. While
    /// on, [`run`](Self::run) returns for that output an int64 tensor: the
    /// index of the largest element of each row (the last dim), computed on
    /// the GPU, so only the indices are read back (greedy decoding reads 4
    /// bytes per token instead of the logits). The output must be a float
    /// tensor written by a GPU call and read by no later instruction.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn set_output_argmax(&mut self, output: usize, on: bool) -> Result<()> {
        pollster::block_on(self.set_output_argmax_async(output, on))
    }

    /// [`LoadedMethod::set_output_argmax`] without blocking (the argmax
    /// pipeline is created on first use).
    pub async fn set_output_argmax_async(&mut self, output: usize, on: bool) -> Result<()> {
        let p = *self.outputs.get(output).ok_or_else(|| Error::NoOutput {
            method: self.name.clone(),
            output,
            n_outputs: self.outputs.len(),
        })?;
        let writer =
            self.steps.iter().rposition(|s| matches!(s, Exec::Gpu { args, n_in, .. } if args[*n_in..].contains(&p)));
        let Some(at) = writer else { return Err(Error::ArgmaxNotOnGpu { method: self.name.clone(), output }) };
        if self.steps[at + 1..].iter().any(|s| s.reads().contains(&p)) {
            return Err(Error::ArgmaxReadLater { method: self.name.clone(), output });
        }
        let Exec::Gpu { call, args, n_in, .. } = &mut self.steps[at] else { unreachable!("found as a GPU call") };
        let j = args[*n_in..].iter().rposition(|&a| a == p).expect("found among the outputs");
        call.set_argmax(j, on).await
    }

    /// Host time per stage of `run` over every GPU call, summed since load
    /// or the last [`reset_run_times`](Self::reset_run_times) (`runs`
    /// counts GPU calls run).
    pub fn run_times(&self) -> RunTimes {
        let mut t = RunTimes::default();
        for s in &self.steps {
            if let Exec::Gpu { call, .. } = s {
                t += call.run_times();
            }
        }
        t
    }

    /// Zeroes the counters of [`run_times`](Self::run_times).
    pub fn reset_run_times(&mut self) {
        for s in &mut self.steps {
            if let Exec::Gpu { call, .. } = s {
                call.times = RunTimes::default();
            }
        }
    }

    /// The step index of the method's one GPU call, when the method is
    /// one GPU call and moves (no CPU fallback), as
    /// [`submit`](Self::submit) needs.
    fn single_gpu_call(&self) -> Result<usize> {
        let gpu: Vec<usize> =
            self.steps.iter().enumerate().filter(|(_, s)| matches!(s, Exec::Gpu { .. })).map(|(i, _)| i).collect();
        match (gpu.as_slice(), self.n_cpu_calls()) {
            ([one], 0) => Ok(*one),
            _ => Err(Error::NotOneGpuCall { method: self.name.clone() }),
        }
    }

    /// Whether [`submit`](Self::submit) can feed input `input` from the
    /// device argmax of the method's output (see there).
    pub fn can_feed(&self, input: usize) -> bool {
        self.fed_arg(input).is_ok()
    }

    /// The GPU call's input that method input `input` is, checked for
    /// feeding.
    fn fed_arg(&self, input: usize) -> Result<usize> {
        let at = self.single_gpu_call()?;
        let Exec::Gpu { call, args, n_in, .. } = &self.steps[at] else { unreachable!("a GPU call") };
        let p = *self.inputs.get(input).ok_or_else(|| Error::NoInput {
            method: self.name.clone(),
            input,
            n_inputs: self.inputs.len(),
        })?;
        let j = args[..*n_in]
            .iter()
            .position(|&a| a == p)
            .ok_or_else(|| Error::FeedInputUnused { method: self.name.clone(), input })?;
        call.check_feed(j)?;
        Ok(j)
    }

    /// Starts a run without waiting for it: [`finish`](Self::finish) reads
    /// the outputs of the oldest run started (at most two in flight).
    /// With `fed = Some(i)`, method input `i` (token ids: the tensor passed
    /// gives only the shape) is taken on the device from the argmax of the
    /// run started before ([`set_output_argmax`](Self::set_output_argmax)
    /// must be on), so greedy decoding starts token `n + 1`'s run before
    /// reading token `n`, and the GPU never waits for the host between
    /// tokens. Only for a method of one GPU call (see
    /// [`can_feed`](Self::can_feed)); while a run is in flight, the method's
    /// outputs must all be argmaxes.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), etwgpu_runtime::Error> {
    /// use etwgpu_format::DType;
    /// use etwgpu_runtime::Tensor;
    /// # let rt = etwgpu_runtime::Runtime::new()?;
    /// # let program = etwgpu_format::Program::open("llama.pte").expect("a program");
    /// let int64 = |shape: &[u64], v: i64| Tensor::new(DType::I64, shape.to_vec(), v.to_le_bytes().to_vec());
    /// let mut forward = rt.load(&program, "forward")?;
    /// forward.set_output_argmax(0, true)?;
    /// // Token 42 at position 7, then (fed on the device) the token it picks, at 8.
    /// forward.submit(&[int64(&[1, 1], 42)?, int64(&[1], 7)?], None)?;
    /// forward.submit(&[int64(&[1, 1], 0)?, int64(&[1], 8)?], Some(0))?;
    /// let first = forward.finish()?; // [int64 [1]]: the token after 42
    /// let second = forward.finish()?; // the token after that
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(not(target_arch = "wasm32"))]
    pub fn submit(&mut self, inputs: &[Tensor], fed: Option<usize>) -> Result<()> {
        pollster::block_on(self.submit_async(inputs, fed))
    }

    /// [`LoadedMethod::submit`] without blocking.
    pub async fn submit_async(&mut self, inputs: &[Tensor], fed: Option<usize>) -> Result<()> {
        if inputs.len() != self.inputs.len() {
            return Err(Error::InputCount { expected: self.inputs.len(), found: inputs.len() });
        }
        let at = self.single_gpu_call()?;
        let fed = fed.map(|i| self.fed_arg(i)).transpose()?;
        let mut slots = self.initial.clone();
        for (&p, t) in self.inputs.iter().zip(inputs) {
            slots[p] = Some(t.clone());
        }
        for step in &self.steps[..at] {
            apply_move(step, &mut slots);
        }
        let Self { name, values, steps, .. } = self;
        let Exec::Gpu { call, args, n_in, .. } = &mut steps[at] else { unreachable!("a GPU call") };
        let ins = args[..*n_in].iter().map(|&p| slot_tensor(name, values, &slots, p)).collect::<Result<Vec<_>>>()?;
        call.submit(&ins, fed).await
    }

    /// Turns the step timeline of the method's one GPU call on for its next
    /// `runs` runs (at most 1,024), or off with `None`: GPU timestamps
    /// around each run's chain and its device argmax, as the runs are
    /// submitted, so the GPU time between runs shows ([`StepTimes`]).
    /// While on, the chain is recorded on one thread. Needs a device with
    /// timestamps and no runs in flight.
    ///
    /// [`StepTimes`]: crate::StepTimes
    pub fn set_step_timeline(&mut self, runs: Option<u32>) -> Result<()> {
        let at = self.single_gpu_call()?;
        let Exec::Gpu { call, .. } = &mut self.steps[at] else { unreachable!("a GPU call") };
        call.set_timeline(runs)
    }

    /// The runs the step timeline holds (empty when off), oldest first;
    /// it stays on, emptied. Needs no runs in flight.
    pub async fn take_step_timeline_async(&mut self) -> Result<Vec<crate::StepTimes>> {
        let at = self.single_gpu_call()?;
        let Exec::Gpu { call, .. } = &mut self.steps[at] else { unreachable!("a GPU call") };
        call.take_timeline().await
    }

    /// Waits for the oldest run [submitted](Self::submit) and returns its
    /// outputs.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn finish(&mut self) -> Result<Vec<Tensor>> {
        pollster::block_on(self.finish_async())
    }

    /// [`LoadedMethod::finish`] without blocking.
    pub async fn finish_async(&mut self) -> Result<Vec<Tensor>> {
        let at = self.single_gpu_call()?;
        let mut slots = self.initial.clone();
        let Self { name, values, steps, outputs, host_round_trips, .. } = self;
        let Exec::Gpu { call, args, n_in, extra } = &mut steps[at] else { unreachable!("a GPU call") };
        let outs = call.finish().await?;
        *host_round_trips = 1;
        store_outputs(&mut slots, &args[*n_in..], extra, outs);
        for step in &steps[at + 1..] {
            apply_move(step, &mut slots);
        }
        outputs.iter().map(|&p| slot_tensor(name, values, &slots, p)).collect()
    }

    /// Runs the method once: every instruction in chain order.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn run(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        pollster::block_on(self.run_async(inputs))
    }

    /// [`LoadedMethod::run`] without blocking: each GPU call's read-back is
    /// awaited (on the web, the browser's event loop runs meanwhile).
    pub async fn run_async(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        if inputs.len() != self.inputs.len() {
            return Err(Error::InputCount { expected: self.inputs.len(), found: inputs.len() });
        }
        let mut slots = self.initial.clone();
        for (&p, t) in self.inputs.iter().zip(inputs) {
            slots[p] = Some(t.clone());
        }
        let Self { name, values, steps, host_round_trips, outputs, .. } = self;
        let tensor_at = |slots: &[Option<Tensor>], p: usize| slot_tensor(name, values, slots, p);
        *host_round_trips = 0;
        for step in steps.iter_mut() {
            match step {
                Exec::Gpu { call, args, n_in, extra } => {
                    let ins = args[..*n_in].iter().map(|&p| tensor_at(&slots, p)).collect::<Result<Vec<_>>>()?;
                    let outs = call.run(&ins).await?;
                    if call.keep_on_device.iter().any(|keep| !keep) {
                        *host_round_trips += 1;
                    }
                    store_outputs(&mut slots, &args[*n_in..], extra, outs);
                }
                Exec::Cpu { op, name, instruction, schema, extra } => {
                    let out = *schema.last().expect("schema has the out arg");
                    let t = cpu::call(*op, name, *instruction, schema, values, &slots)?;
                    for &e in extra.iter() {
                        slots[e] = Some(t.clone());
                    }
                    slots[out] = Some(t);
                }
                Exec::Move { .. } | Exec::Free(_) => apply_move(step, &mut slots),
            }
        }
        outputs.iter().map(|&p| tensor_at(&slots, p)).collect()
    }
}

/// Loading a method is the runtime's entry point; it is defined here, by
/// what it loads, so the device knows nothing of methods.
impl Runtime {
    /// Loads `method` of `program`: checks every instruction can run (on
    /// the GPU or the CPU fallback), creates the pipelines, allocates the
    /// buffers and uploads the constants of each GPU call.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn load(&self, program: &Program, method: &str) -> Result<LoadedMethod> {
        pollster::block_on(self.load_async(program, method, &LoadOptions::default(), &mut |_| {}))
    }

    /// [`Runtime::load`] with options (fusion off, for debugging).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn load_with(&self, program: &Program, method: &str, options: &LoadOptions) -> Result<LoadedMethod> {
        pollster::block_on(self.load_async(program, method, options, &mut |_| {}))
    }

    /// [`Runtime::load_with`], calling `progress` as weights are uploaded
    /// and pipelines compiled (for a progress bar on large models).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn load_with_progress(
        &self,
        program: &Program,
        method: &str,
        options: &LoadOptions,
        progress: &mut dyn FnMut(LoadProgress),
    ) -> Result<LoadedMethod> {
        pollster::block_on(self.load_async(program, method, options, progress))
    }

    /// [`Runtime::load_with_progress`] without blocking: pipelines are
    /// created, and their validation awaited, asynchronously.
    pub async fn load_async(
        &self,
        program: &Program,
        method: &str,
        options: &LoadOptions,
        progress: &mut dyn FnMut(LoadProgress),
    ) -> Result<LoadedMethod> {
        LoadedMethod::load(self, program, method, options, progress).await
    }
}

/// Puts a GPU call's outputs in their slots (`out_args`), and a copy of
/// the last one in each of `extra`.
fn store_outputs(slots: &mut [Option<Tensor>], out_args: &[usize], extra: &[usize], outs: Vec<Tensor>) {
    for (&p, t) in out_args.iter().zip(outs) {
        slots[p] = Some(t);
    }
    if let Some(&last) = out_args.last() {
        for &e in extra {
            slots[e] = slots[last].clone();
        }
    }
}

/// Applies a move or free step to the value slots (other steps: nothing).
fn apply_move(step: &Exec, slots: &mut [Option<Tensor>]) {
    match step {
        Exec::Move { from, to } => {
            if let Some(t) = slots.get(*from).cloned().flatten() {
                slots[*to] = Some(t);
            }
        }
        Exec::Free(v) => {
            if let Some(s) = slots.get_mut(*v) {
                *s = None;
            }
        }
        Exec::Gpu { .. } | Exec::Cpu { .. } => {}
    }
}

/// The tensor in slot `p`, or an Int value as a scalar int64 tensor.
fn slot_tensor(method: &str, values: &[PlanValue], slots: &[Option<Tensor>], p: usize) -> Result<Tensor> {
    match (slots.get(p), values.get(p)) {
        (Some(Some(t)), _) => Ok(t.clone()),
        (_, Some(PlanValue::Int(x))) => {
            Ok(Tensor { dtype: DType::I64, shape: Vec::new(), bytes: x.to_le_bytes().to_vec() })
        }
        _ => Err(Error::ValueUnset { method: method.to_string(), value: p }),
    }
}
