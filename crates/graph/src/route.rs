//! Where a KernelCall (an op the export left outside the Vulkan delegate)
//! runs: on the GPU when its functional op is in the kernel table
//! (`aten::log` + `out` → `aten.log.default`, `aten::mul` + `Scalar_out` →
//! `aten.mul.Scalar`, `aten::mean` + `out` → `aten.mean.dim`) and its host rule accepts the call at the declared
//! shapes, as a one-op graph ([`gpu_route`]); else in the runtime's CPU
//! fallback when it has the op ([`CPU_FALLBACK_OPS`]); else nowhere
//! ([`Route::Unsupported`]). Deciding needs no GPU, so `etwgpu inspect`
//! asks here.

use etwgpu_format::program::TensorData;
use etwgpu_format::vulkan::VhHeader;
use etwgpu_format::{
    Constant, ConstantId, ConstantSource, DType, Instruction, Method, OpCall, PlanValue, ValueId, VkGraph, VkTensor,
    VkValue,
};

/// Whether a tensor of `shape` fits one allocated at `max`, by
/// ExecuTorch's resize rule: the same rank and no more elements (each dim
/// may exceed its maximum, as `[3, 14, 15, 9]` within `[8, 13, 55, 68]`).
pub fn fits_allocation(shape: &[u64], max: &[u64]) -> bool {
    let numel = |s: &[u64]| s.iter().try_fold(1u64, |n, &d| n.checked_mul(d));
    shape.len() == max.len() && matches!((numel(shape), numel(max)), (Some(n), Some(m)) if n <= m)
}

/// The ops the runtime's CPU fallback computes, by plan name
/// (`name.overload`), with their schema arity (the `out` tensor included).
pub const CPU_FALLBACK_OPS: &[(&str, usize)] = &[
    ("aten::any.all_out", 2),
    ("aten::any.dims_out", 4),
    // `any.out` is the one-dim form: (self, dim, keepdim, out).
    ("aten::any.out", 4),
    // (self, size, stride, storage_offset, out)
    ("aten::as_strided_copy.out", 5),
    // (self, src, non_blocking, out)
    ("aten::copy.out", 4),
    ("aten::cumsum.out", 4),
    ("aten::fmod.Scalar_out", 3),
    // (self, indices: Tensor?[], out)
    ("aten::index.Tensor_out", 3),
    ("aten::log.out", 2),
    ("aten::maximum.out", 3),
    // (self, dim, keepdim, dtype, out)
    ("aten::mean.out", 5),
    ("aten::mul.Scalar_out", 3),
    ("aten::scalar_tensor.out", 2),
    // (self, src, dim, start, end, step, out)
    ("aten::slice_scatter.out", 7),
    // (self, non_blocking, dim_order, out): a cast, e.g. from uint8.
    ("dim_order_ops::_to_dim_order_copy.out", 4),
];

/// The schema arity of CPU fallback op `full_name` (`name.overload`), when
/// the fallback has it.
pub fn cpu_fallback_arity(full_name: &str) -> Option<usize> {
    CPU_FALLBACK_OPS.iter().find(|(n, _)| *n == full_name).map(|&(_, arity)| arity)
}

/// Where a KernelCall runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// On the GPU, through this kernel-table op.
    Gpu(String),
    /// In the CPU fallback.
    Cpu,
    /// Nowhere: etwgpu has neither.
    Unsupported,
}

/// The kernel-table name of a plan operator's functional form.
fn gpu_name(name: &str, overload: &str) -> Option<String> {
    // Out variants whose functional overload has another name (same args).
    match (name, overload) {
        ("aten::mean", "out") => return Some("aten.mean.dim".into()),
        ("aten::sum", "IntList_out") => return Some("aten.sum.dim_IntList".into()),
        _ => {}
    }
    let base = name.strip_prefix("aten::")?;
    let overload = if overload == "out" { "default" } else { overload.strip_suffix("_out")? };
    Some(format!("aten.{base}.{overload}"))
}

/// A KernelCall's schema args: its args up to the first `out` (the last
/// arg; the return value repeats it).
pub fn schema_args(args: &[usize]) -> &[usize] {
    match args.last() {
        Some(out) => &args[..=args.iter().position(|a| a == out).expect("last is present")],
        None => args,
    }
}

/// The Ints of a plan IntList, whose items are plan value indices.
pub fn int_list(values: &[PlanValue], items: &[i64]) -> Option<Vec<i64>> {
    items
        .iter()
        .map(|&i| match values.get(usize::try_from(i).ok()?)? {
            PlanValue::Int(x) => Some(*x),
            _ => None,
        })
        .collect()
}

/// A one-op VK00 graph for a KernelCall: its tensors become graph values
/// (float32 only), the `out` tensor the one output. Returns the graph and
/// the delegate args (plan values of the graph inputs, then the output).
fn one_op_graph(m: &Method, op: &str, schema: &[usize], node_id: u32) -> Option<(VkGraph, Vec<usize>)> {
    let (&out, _) = schema.split_last()?;
    let mut values = Vec::new();
    let mut ids = Vec::new();
    let mut tensors: Vec<(usize, ValueId)> = Vec::new();
    let mut constants = Vec::new();
    for &p in schema {
        if let Some(&(_, id)) = tensors.iter().find(|(q, _)| *q == p) {
            ids.push(id);
            continue;
        }
        let id = ValueId(values.len() as u32);
        values.push(match m.values.get(p)? {
            PlanValue::Null => VkValue::Null,
            PlanValue::Int(x) => VkValue::Int(*x),
            PlanValue::Double(x) => VkValue::Double(*x),
            PlanValue::Bool(x) => VkValue::Bool(*x),
            PlanValue::String(s) => VkValue::String(s.clone()),
            PlanValue::IntList(x) => VkValue::IntList(int_list(&m.values, x)?),
            PlanValue::DoubleList(x) => VkValue::DoubleList(x.clone()),
            PlanValue::BoolList(x) => VkValue::BoolList(x.clone()),
            PlanValue::Tensor(t) if t.scalar_type.dtype() == Some(DType::F32) => {
                let constant = match &t.data {
                    TensorData::None => {
                        tensors.push((p, id));
                        None
                    }
                    TensorData::Constant(r) => {
                        constants.push(Constant {
                            len: r.range.len() as u64,
                            source: ConstantSource::DelegateBytes(r.clone()),
                        });
                        Some(ConstantId(constants.len() as u32 - 1))
                    }
                    TensorData::External(_) => return None,
                };
                VkValue::Tensor(VkTensor {
                    dtype: DType::F32,
                    dims: t.sizes.iter().map(|&s| u64::try_from(s).ok()).collect::<Option<_>>()?,
                    constant,
                    mem_obj_id: None,
                    storage_type: 255,
                    memory_layout: 255,
                    staging_dtype: None,
                })
            }
            _ => return None,
        });
        ids.push(id);
    }
    let out_id = *ids.last()?;
    if !matches!(values[out_id.idx()], VkValue::Tensor(_)) {
        return None;
    }
    let inputs: Vec<(usize, ValueId)> = tensors.iter().copied().filter(|&(p, _)| p != out).collect();
    if inputs.iter().any(|&(_, id)| id == out_id) {
        return None;
    }
    let graph = VkGraph {
        header: VhHeader { header_size: 0, flatbuffer_offset: 0, flatbuffer_size: 0, bytes_offset: 0, bytes_size: 0 },
        version: String::new(),
        values,
        chain: vec![OpCall { node_id, name: op.to_string(), args: ids }],
        input_ids: inputs.iter().map(|&(_, id)| id).collect(),
        output_ids: vec![out_id],
        constants,
        n_shaders: 0,
    };
    let args = inputs.iter().map(|&(p, _)| p).chain([out]).collect();
    Some((graph, args))
}

/// The GPU route of KernelCall `instruction` of `m`: the one-op graph and
/// its delegate args, when the kernel table has the op and accepts the call.
pub fn gpu_route(m: &Method, instruction: usize) -> Option<(VkGraph, Vec<usize>)> {
    let Instruction::Kernel { op_index, args } = m.instructions.get(instruction)? else { return None };
    let op = m.operators.get(*op_index)?;
    let name = gpu_name(&op.name, &op.overload)?;
    etwgpu_kernels::from_name(&name)?;
    // One output only: the return values must all be the `out` arg.
    let schema = schema_args(args);
    if args[schema.len()..].iter().any(|a| Some(a) != schema.last()) {
        return None;
    }
    let (graph, delegate_args) = one_op_graph(m, &name, schema, instruction as u32)?;
    crate::lower::lower_at_max(&graph, 0).ok()?;
    Some((graph, delegate_args))
}

/// Where KernelCall `instruction` of `m` runs (what `etwgpu inspect`
/// prints, and what the runtime loads);
/// [`Route::Unsupported`] for any other instruction.
pub fn kernel_route(m: &Method, instruction: usize) -> Route {
    let Some(Instruction::Kernel { op_index, .. }) = m.instructions.get(instruction) else {
        return Route::Unsupported;
    };
    if let Some((g, _)) = gpu_route(m, instruction) {
        return Route::Gpu(g.chain[0].name.clone());
    }
    match m.operators.get(*op_index) {
        Some(op) if cpu_fallback_arity(&op.full_name()).is_some() => Route::Cpu,
        _ => Route::Unsupported,
    }
}
