//! A method's plan, without a GPU: each instruction of the ExecutionPlan as
//! a step (a Vulkan delegate call, a KernelCall on the GPU or in the CPU
//! fallback, a move, a free, or something nothing here runs), and which
//! GPU call outputs stay on the device because only later GPU calls read
//! them. `etwgpu inspect` prints it; the runtime instantiates it.

use etwgpu_format::{DType, Instruction, Method, ValueId, VkGraph, VkValue};

use crate::route::{cpu_fallback_arity, gpu_route, schema_args};

/// Why no step here runs an instruction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unrunnable {
    /// A delegate call of another backend (its id), which has no VK00 graph.
    ForeignDelegate(String),
    /// A KernelCall with neither a GPU kernel nor a CPU fallback (its
    /// operator, `name.overload`).
    NoKernel(String),
    /// Control flow (JumpFalse).
    ControlFlow,
}

/// One instruction of a method, as it will run.
#[derive(Debug, Clone)]
pub enum MethodStep {
    /// A Vulkan delegate call: `args` are the plan values of its graph's
    /// inputs, then of its outputs.
    Delegate {
        /// Index of the delegate in the method.
        delegate_index: usize,
        /// Plan values: inputs then outputs.
        args: Vec<usize>,
        /// Inputs among `args`.
        n_in: usize,
    },
    /// A KernelCall run on the GPU as the one-op `graph`.
    GpuKernel {
        /// The operator (`name.overload`).
        op: String,
        /// The one-op graph.
        graph: VkGraph,
        /// Plan values of the graph's inputs, then of its one output.
        args: Vec<usize>,
        /// Plan values that get a copy of the output (return values
        /// other than `out`).
        extra: Vec<usize>,
    },
    /// A KernelCall run by the CPU fallback.
    CpuCall {
        /// The operator (`name.overload`).
        op: String,
        /// Its schema args, the `out` tensor last.
        schema: Vec<usize>,
        /// Its arity in the CPU fallback (the `out` tensor included).
        arity: usize,
        /// Plan values that alias the out.
        extra: Vec<usize>,
    },
    /// MoveCall: copies plan value `from` into `to`.
    Move {
        /// The source value.
        from: usize,
        /// The destination value.
        to: usize,
    },
    /// FreeCall: drops a plan value.
    Free(usize),
    /// An instruction nothing here runs.
    Unrunnable(Unrunnable),
}

/// A GPU call output that stays on the device: copied buffer to buffer
/// into a later GPU call's input instead of read back and uploaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceLink {
    /// Step index of the GPU call that writes it.
    pub producer: usize,
    /// Its output position there.
    pub output: usize,
    /// Step index of a GPU call that reads it.
    pub consumer: usize,
    /// Its input position there.
    pub input: usize,
}

/// A method's steps in instruction order, with the outputs that stay on
/// the device.
#[derive(Debug, Clone)]
pub struct MethodPlan {
    /// One step per instruction.
    pub steps: Vec<MethodStep>,
    /// Outputs that only later GPU calls read, with the same dtype.
    pub on_device: Vec<DeviceLink>,
}

impl MethodStep {
    /// Plan values the step reads.
    pub fn reads(&self) -> Vec<usize> {
        match self {
            MethodStep::Delegate { args, n_in, .. } => args[..*n_in].to_vec(),
            MethodStep::GpuKernel { args, .. } => args[..args.len() - 1].to_vec(),
            MethodStep::CpuCall { schema, .. } => schema[..schema.len() - 1].to_vec(),
            MethodStep::Move { from, .. } => vec![*from],
            MethodStep::Free(_) | MethodStep::Unrunnable(_) => Vec::new(),
        }
    }

    /// Plan values the step sets (or drops).
    pub fn writes(&self) -> Vec<usize> {
        match self {
            MethodStep::Delegate { args, n_in, .. } => args[*n_in..].to_vec(),
            MethodStep::GpuKernel { args, extra, .. } => args.last().into_iter().chain(extra).copied().collect(),
            MethodStep::CpuCall { schema, extra, .. } => schema.last().into_iter().chain(extra).copied().collect(),
            MethodStep::Move { to, .. } => vec![*to],
            MethodStep::Free(v) => vec![*v],
            MethodStep::Unrunnable(_) => Vec::new(),
        }
    }

    /// A GPU call's graph (in `m`), plan values and inputs among them.
    fn gpu<'a>(&'a self, m: &'a Method) -> Option<(&'a VkGraph, &'a [usize], usize, &'a [usize])> {
        match self {
            MethodStep::Delegate { delegate_index, args, n_in } => {
                Some((m.delegates.get(*delegate_index)?.graph.as_ref()?, args, *n_in, &[]))
            }
            MethodStep::GpuKernel { graph, args, extra, .. } => Some((graph, args, args.len() - 1, extra)),
            _ => None,
        }
    }
}

/// The dtype of graph value `id` (`None` for a SymInt or a non-tensor).
fn dtype_of(graph: &VkGraph, id: Option<&ValueId>) -> Option<DType> {
    match graph.values.get(id?.idx())? {
        VkValue::Tensor(t) => Some(t.dtype),
        _ => None,
    }
}

/// Plans method `m`: routes each instruction and finds the GPU call
/// outputs that stay on the device.
pub fn plan_method(m: &Method) -> MethodPlan {
    let steps: Vec<MethodStep> = m
        .instructions
        .iter()
        .enumerate()
        .map(|(k, ins)| match ins {
            Instruction::Delegate { delegate_index, args } => match m.delegates.get(*delegate_index) {
                Some(d) => match &d.graph {
                    Some(g) => MethodStep::Delegate {
                        delegate_index: *delegate_index,
                        args: args.clone(),
                        n_in: g.input_ids.len(),
                    },
                    None => MethodStep::Unrunnable(Unrunnable::ForeignDelegate(d.backend_id.clone())),
                },
                None => MethodStep::Unrunnable(Unrunnable::ForeignDelegate(format!("missing #{delegate_index}"))),
            },
            Instruction::Kernel { op_index, args } => {
                let op = m.operators.get(*op_index).map(|o| o.full_name()).unwrap_or_default();
                let schema = schema_args(args);
                let extra: Vec<usize> =
                    args[schema.len()..].iter().copied().filter(|a| Some(a) != schema.last()).collect();
                if let Some((graph, args)) = gpu_route(m, k) {
                    MethodStep::GpuKernel { op, graph, args, extra }
                } else if let Some(arity) = cpu_fallback_arity(&op) {
                    MethodStep::CpuCall { op, schema: schema.to_vec(), arity, extra }
                } else {
                    MethodStep::Unrunnable(Unrunnable::NoKernel(op))
                }
            }
            Instruction::Move { from, to } => MethodStep::Move { from: *from, to: *to },
            Instruction::Free { value } => MethodStep::Free(*value),
            Instruction::JumpFalse { .. } => MethodStep::Unrunnable(Unrunnable::ControlFlow),
        })
        .collect();
    let on_device = device_links(m, &steps);
    MethodPlan { steps, on_device }
}

/// Each GPU call output that only later GPU calls read, as the same dtype
/// (method outputs and values copied to `extra` are always read back).
fn device_links(m: &Method, steps: &[MethodStep]) -> Vec<DeviceLink> {
    let mut links = Vec::new();
    for (s, step) in steps.iter().enumerate() {
        let Some((graph, args, n_in, extra)) = step.gpu(m) else { continue };
        for (j, &p) in args[n_in..].iter().enumerate() {
            if m.outputs.contains(&p) || extra.contains(&p) || (!extra.is_empty() && n_in + j + 1 == args.len()) {
                continue;
            }
            let dtype = dtype_of(graph, graph.output_ids.get(j));
            let mut uses = Vec::new();
            let mut device_only = dtype.is_some();
            for (t, later) in steps.iter().enumerate().skip(s + 1) {
                if later.reads().contains(&p) {
                    match later.gpu(m) {
                        Some((g, a, k, _)) => {
                            for (i, _) in a[..k].iter().enumerate().filter(|(_, q)| **q == p) {
                                device_only &= dtype_of(g, g.input_ids.get(i)) == dtype;
                                uses.push((t, i));
                            }
                        }
                        None => device_only = false,
                    }
                }
                if later.writes().contains(&p) {
                    break;
                }
            }
            if device_only && !uses.is_empty() {
                links.extend(uses.into_iter().map(|(t, i)| DeviceLink {
                    producer: s,
                    output: j,
                    consumer: t,
                    input: i,
                }));
            }
        }
    }
    links
}
