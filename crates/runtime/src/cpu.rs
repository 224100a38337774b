//! CPU fallback for the portable ops that exports leave outside the
//! Vulkan delegate and that have no GPU kernel here. Each takes the
//! KernelCall's schema args (the `out` tensor last) and computes in f64,
//! writing the out tensor's dtype; the ops that only move elements
//! ([`layout`]) copy them.

use etwgpu_format::{DType, PlanValue};
use etwgpu_graph::route::int_list;

use crate::error::{Error, Result};
use crate::tensor::Tensor;

mod layout;

/// A CPU fallback op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CpuOp {
    AnyDims,
    AnyDim,
    Any,
    AsStridedCopy,
    Copy,
    Cumsum,
    FmodScalar,
    Index,
    Log,
    Maximum,
    Mean,
    MulScalar,
    ScalarTensor,
    SliceScatter,
    ToDimOrderCopy,
}

/// The fallback op of a plan op name (`name.overload`); the names and
/// their schema arities are listed once, in
/// [`etwgpu_graph::route::CPU_FALLBACK_OPS`] (a unit test checks each has
/// an op here).
fn cpu_op(full_name: &str) -> Option<CpuOp> {
    Some(match full_name {
        "aten::any.all_out" => CpuOp::Any,
        "aten::any.dims_out" => CpuOp::AnyDims,
        "aten::any.out" => CpuOp::AnyDim,
        "aten::as_strided_copy.out" => CpuOp::AsStridedCopy,
        "aten::copy.out" => CpuOp::Copy,
        "aten::cumsum.out" => CpuOp::Cumsum,
        "aten::fmod.Scalar_out" => CpuOp::FmodScalar,
        "aten::index.Tensor_out" => CpuOp::Index,
        "aten::log.out" => CpuOp::Log,
        "aten::maximum.out" => CpuOp::Maximum,
        "aten::mean.out" => CpuOp::Mean,
        "aten::mul.Scalar_out" => CpuOp::MulScalar,
        "aten::scalar_tensor.out" => CpuOp::ScalarTensor,
        "aten::slice_scatter.out" => CpuOp::SliceScatter,
        "dim_order_ops::_to_dim_order_copy.out" => CpuOp::ToDimOrderCopy,
        _ => return None,
    })
}

/// The fallback for a plan op name, with its schema arity (the `out`
/// tensor included), when both the route table and this file have it.
pub(crate) fn lookup(full_name: &str) -> Option<(CpuOp, usize)> {
    Some((cpu_op(full_name)?, etwgpu_graph::route::cpu_fallback_arity(full_name)?))
}

/// One argument as the fallback sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Arg<'a> {
    Tensor(&'a Tensor),
    Int(i64),
    Double(f64),
    Bool(bool),
    IntList(&'a [i64]),
    /// A (possibly optional) tensor list; `None` items are absent.
    TensorList(&'a [Option<&'a Tensor>]),
    Null,
    Other(&'static str),
}

/// What an argument is, for error messages.
fn describe(arg: Option<&Arg<'_>>) -> String {
    match arg {
        None => "nothing".into(),
        Some(Arg::Tensor(t)) => format!("a {} tensor {:?}", t.dtype, t.shape),
        Some(Arg::Int(x)) => format!("Int {x}"),
        Some(Arg::Double(x)) => format!("Double {x}"),
        Some(Arg::Bool(x)) => format!("Bool {x}"),
        Some(Arg::IntList(x)) => format!("IntList {x:?}"),
        Some(Arg::TensorList(x)) => format!("a list of {} tensors", x.len()),
        Some(Arg::Null) => "Null".into(),
        Some(Arg::Other(kind)) => (*kind).into(),
    }
}

/// An argument error: position and problem.
pub(crate) type ArgError = (usize, String);

fn tensor<'a>(args: &[Arg<'a>], i: usize) -> Result<&'a Tensor, ArgError> {
    match args.get(i) {
        Some(Arg::Tensor(t)) => Ok(t),
        other => Err((i, format!("expected a tensor, found {}", describe(other)))),
    }
}

fn num(args: &[Arg<'_>], i: usize) -> Result<f64, ArgError> {
    match args.get(i) {
        Some(Arg::Int(x)) => Ok(*x as f64),
        Some(Arg::Double(x)) => Ok(*x),
        Some(Arg::Bool(b)) => Ok(f64::from(u8::from(*b))),
        other => Err((i, format!("expected a number, found {}", describe(other)))),
    }
}

fn dim(args: &[Arg<'_>], i: usize, rank: usize) -> Result<usize, ArgError> {
    let d = match args.get(i) {
        Some(Arg::Int(x)) => *x,
        other => return Err((i, format!("expected an int dim, found {}", describe(other)))),
    };
    let r = rank.max(1) as i64;
    let w = if d < 0 { d + r } else { d };
    if !(0..r).contains(&w) {
        return Err((i, format!("dim {d} out of range for rank {rank}")));
    }
    Ok(w as usize)
}

/// Element bytes of `values` in `dtype`.
fn encode(values: &[f64], dtype: DType) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() * dtype.size_bytes());
    for &v in values {
        match dtype {
            DType::Bool => out.push(u8::from(v != 0.0)),
            DType::U8 => out.push(v as u8),
            DType::I8 => out.push(v as i8 as u8),
            DType::I16 => out.extend_from_slice(&(v as i16).to_le_bytes()),
            DType::I32 => out.extend_from_slice(&(v as i32).to_le_bytes()),
            DType::I64 => out.extend_from_slice(&(v as i64).to_le_bytes()),
            DType::F16 => out.extend_from_slice(&half::f16::from_f64(v).to_le_bytes()),
            DType::BF16 => out.extend_from_slice(&half::bf16::from_f64(v).to_le_bytes()),
            DType::F32 => out.extend_from_slice(&(v as f32).to_le_bytes()),
            DType::F64 => out.extend_from_slice(&v.to_le_bytes()),
        }
    }
    out
}

fn strides(shape: &[u64]) -> Vec<u64> {
    let mut s = vec![1u64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// The broadcast shape of two shapes, or `None` when they do not broadcast.
fn broadcast(a: &[u64], b: &[u64]) -> Option<Vec<u64>> {
    let n = a.len().max(b.len());
    (0..n)
        .map(|i| {
            let x = if i + a.len() >= n { a[i + a.len() - n] } else { 1 };
            let y = if i + b.len() >= n { b[i + b.len() - n] } else { 1 };
            match (x, y) {
                _ if x == y => Some(x),
                (1, _) => Some(y),
                (_, 1) => Some(x),
                _ => None,
            }
        })
        .collect()
}

/// Flat index into a tensor of `shape` broadcast to `out` for the output
/// multi-index `idx`.
fn source_index(idx: &[u64], shape: &[u64]) -> usize {
    let off = idx.len() - shape.len();
    let st = strides(shape);
    shape.iter().enumerate().map(|(i, &s)| if s == 1 { 0 } else { idx[off + i] * st[i] }).sum::<u64>() as usize
}

fn unravel(mut flat: u64, shape: &[u64]) -> Vec<u64> {
    let mut idx = vec![0; shape.len()];
    for i in (0..shape.len()).rev() {
        idx[i] = flat % shape[i].max(1);
        flat /= shape[i].max(1);
    }
    idx
}

/// Reduces `x` of `shape` with logical or over `dims` (all when empty).
fn any_over(x: &[f64], shape: &[u64], dims: &[usize], keepdim: bool) -> (Vec<u64>, Vec<f64>) {
    let all = dims.is_empty();
    let reduced: Vec<bool> = (0..shape.len()).map(|i| all || dims.contains(&i)).collect();
    let kept: Vec<u64> = shape.iter().zip(&reduced).map(|(&s, &r)| if r { 1 } else { s }).collect();
    let mut out = vec![0.0; kept.iter().product::<u64>() as usize];
    for (flat, &v) in x.iter().enumerate() {
        let idx = unravel(flat as u64, shape);
        let o: Vec<u64> = idx.iter().zip(&reduced).map(|(&i, &r)| if r { 0 } else { i }).collect();
        let st = strides(&kept);
        let at = o.iter().zip(&st).map(|(a, b)| a * b).sum::<u64>() as usize;
        if v != 0.0 {
            out[at] = 1.0;
        }
    }
    let shape =
        if keepdim { kept } else { shape.iter().zip(&reduced).filter(|(_, r)| !**r).map(|(&s, _)| s).collect() };
    (shape, out)
}

/// Runs KernelCall `instruction` (`name`, fallback `op`) on its schema args
/// `schema` (plan values, the `out` last): each arg is the tensor in its
/// slot of `slots`, else the plan value in `values`; the result has the
/// `out` tensor's dtype.
pub(crate) fn call(
    op: CpuOp,
    name: &str,
    instruction: usize,
    schema: &[usize],
    values: &[PlanValue],
    slots: &[Option<Tensor>],
) -> Result<Tensor> {
    let out = *schema.last().expect("schema has the out arg");
    let held: Vec<Option<&Tensor>> = schema.iter().map(|&p| slots.get(p).and_then(Option::as_ref)).collect();
    let lists: Vec<Option<Vec<i64>>> = schema
        .iter()
        .map(|&p| match &values[p] {
            PlanValue::IntList(items) => int_list(values, items),
            _ => None,
        })
        .collect();
    // A tensor list's items, each the tensor in its slot (`None` where the
    // list has no tensor there; an item that is unset makes the list one).
    let tensor_lists: Vec<Option<Vec<Option<&Tensor>>>> = schema
        .iter()
        .map(|&p| {
            let items: Vec<Option<usize>> = match &values[p] {
                PlanValue::TensorList(items) => items.iter().copied().map(Some).collect(),
                PlanValue::OptionalTensorList(items) => items.clone(),
                _ => return None,
            };
            items
                .iter()
                .map(|item| match item {
                    None => Some(None),
                    Some(q) => slots.get(*q).and_then(Option::as_ref).map(Some),
                })
                .collect()
        })
        .collect();
    let args: Vec<Arg<'_>> = schema
        .iter()
        .zip(held.iter().zip(lists.iter().zip(&tensor_lists)))
        .map(|(&p, (t, (list, tensors)))| match (t, &values[p]) {
            (Some(t), _) => Arg::Tensor(t),
            (None, PlanValue::TensorList(_) | PlanValue::OptionalTensorList(_)) => match tensors {
                Some(x) => Arg::TensorList(x),
                None => Arg::Other("a tensor list with an unset tensor"),
            },
            (None, PlanValue::IntList(_)) => match list {
                Some(x) => Arg::IntList(x),
                None => Arg::Other("an IntList with non-Int items"),
            },
            (None, PlanValue::Int(x)) => Arg::Int(*x),
            (None, PlanValue::Double(x)) => Arg::Double(*x),
            (None, PlanValue::Bool(x)) => Arg::Bool(*x),
            (None, PlanValue::Null) => Arg::Null,
            (None, PlanValue::Tensor(_)) => Arg::Other("an unset tensor"),
            (None, v) => Arg::Other(v.kind()),
        })
        .collect();
    let err = |(arg, problem): ArgError| Error::CpuArg { op: name.to_string(), instruction, arg, problem };
    let dtype = match &values[out] {
        PlanValue::Tensor(t) => t.scalar_type.dtype(),
        _ => None,
    };
    let dtype = dtype.ok_or_else(|| err((schema.len() - 1, "out is not a tensor".into())))?;
    run(op, &args[..args.len() - 1], dtype).map_err(err)
}

/// Runs `op` on its schema args; the out tensor (last arg) gives the dtype.
pub(crate) fn run(op: CpuOp, args: &[Arg<'_>], out_dtype: DType) -> Result<Tensor, ArgError> {
    let (shape, values) = match op {
        CpuOp::AsStridedCopy => return Ok(layout::as_strided(tensor(args, 0)?, args)?.into_tensor(out_dtype)),
        CpuOp::Copy => return Ok(layout::copy(tensor(args, 0)?, tensor(args, 1)?)?.into_tensor(out_dtype)),
        CpuOp::SliceScatter => {
            let t = layout::slice_scatter(tensor(args, 0)?, tensor(args, 1)?, args)?;
            if t.dtype != out_dtype {
                return Err((0, format!("self is {}, out is {out_dtype}", t.dtype)));
            }
            return Ok(t);
        }
        CpuOp::Index => {
            let x = tensor(args, 0)?;
            let indices = match args.get(1) {
                Some(Arg::TensorList(items)) => *items,
                other => return Err((1, format!("expected a tensor list, found {}", describe(other)))),
            };
            return Ok(layout::index(x, indices)?.into_tensor(out_dtype));
        }
        CpuOp::Mean => {
            let x = tensor(args, 0)?;
            let dims = reduce_dims(args, 1, x.shape.len())?;
            let keepdim = matches!(args.get(2), Some(Arg::Bool(true)));
            let (shape, sums, count) = sum_over(&x.to_f64_vec(), &x.shape, &dims, keepdim);
            (shape, sums.iter().map(|s| s / count as f64).collect())
        }
        CpuOp::ToDimOrderCopy => {
            // A cast (as the portable kernel: C casts, nonzero -> true);
            // only the contiguous dim order is laid out here.
            let x = tensor(args, 0)?;
            match args.get(2) {
                Some(Arg::Null) => {}
                Some(Arg::IntList(order)) if order.iter().enumerate().all(|(i, &d)| d == i as i64) => {}
                other => {
                    return Err((2, format!("only the contiguous dim order is supported, found {}", describe(other))));
                }
            }
            (x.shape.clone(), x.to_f64_vec())
        }
        CpuOp::FmodScalar => {
            let x = tensor(args, 0)?;
            let s = num(args, 1)?;
            if s == 0.0 && !is_float(out_dtype) {
                return Err((1, "integer fmod by zero".into()));
            }
            (x.shape.clone(), x.to_f64_vec().iter().map(|v| v % s).collect())
        }
        CpuOp::Cumsum => {
            let x = tensor(args, 0)?;
            let d = dim(args, 1, x.shape.len())?;
            let v = x.to_f64_vec();
            let mut out = v.clone();
            if !x.shape.is_empty() {
                let inner = strides(&x.shape)[d] as usize;
                let len = x.shape[d] as usize;
                for i in 0..v.len() {
                    let pos = (i / inner) % len;
                    out[i] = if pos == 0 { v[i] } else { out[i - inner] + v[i] };
                }
            }
            (x.shape.clone(), out)
        }
        CpuOp::Log => {
            let x = tensor(args, 0)?;
            (x.shape.clone(), x.to_f64_vec().iter().map(|v| v.ln()).collect())
        }
        CpuOp::MulScalar => {
            let x = tensor(args, 0)?;
            let s = num(args, 1)?;
            (x.shape.clone(), x.to_f64_vec().iter().map(|v| v * s).collect())
        }
        CpuOp::Maximum => {
            let (a, b) = (tensor(args, 0)?, tensor(args, 1)?);
            let shape = broadcast(&a.shape, &b.shape)
                .ok_or_else(|| (1, format!("shape {:?} does not broadcast with {:?}", b.shape, a.shape)))?;
            let (x, y) = (a.to_f64_vec(), b.to_f64_vec());
            let n: u64 = shape.iter().product();
            let out = (0..n)
                .map(|f| {
                    let idx = unravel(f, &shape);
                    let (p, q) = (x[source_index(&idx, &a.shape)], y[source_index(&idx, &b.shape)]);
                    if p.is_nan() || q.is_nan() { f64::NAN } else { p.max(q) }
                })
                .collect();
            (shape, out)
        }
        CpuOp::ScalarTensor => (Vec::new(), vec![num(args, 0)?]),
        CpuOp::Any => {
            let x = tensor(args, 0)?;
            let (_, v) = any_over(&x.to_f64_vec(), &x.shape, &[], false);
            (Vec::new(), v)
        }
        CpuOp::AnyDim | CpuOp::AnyDims => {
            let x = tensor(args, 0)?;
            let dims = reduce_dims(args, 1, x.shape.len())?;
            let keepdim = match args.get(2) {
                Some(Arg::Bool(b)) => *b,
                other => return Err((2, format!("expected keepdim bool, found {}", describe(other)))),
            };
            let (shape, v) = any_over(&x.to_f64_vec(), &x.shape, &dims, keepdim);
            (shape, v)
        }
    };
    Ok(Tensor { dtype: out_dtype, bytes: encode(&values, out_dtype), shape })
}

fn is_float(dtype: DType) -> bool {
    matches!(dtype, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
}

/// A reduction's dims (arg `i`: an int list, one int, or None for all;
/// an empty list also means all), wrapped and checked against `rank`.
fn reduce_dims(args: &[Arg<'_>], i: usize, rank: usize) -> Result<Vec<usize>, ArgError> {
    let wrap = |d: i64| {
        let r = rank.max(1) as i64;
        let w = if d < 0 { d + r } else { d };
        usize::try_from(w)
            .ok()
            .filter(|&w| w < rank.max(1))
            .ok_or_else(|| (i, format!("dim {d} out of range for rank {rank}")))
    };
    match args.get(i) {
        Some(Arg::IntList(ds)) => ds.iter().map(|&d| wrap(d)).collect(),
        Some(Arg::Int(_)) => Ok(vec![dim(args, i, rank)?]),
        Some(Arg::Null) => Ok(Vec::new()),
        other => Err((i, format!("expected dims, found {}", describe(other)))),
    }
}

/// Sums `x` of `shape` over `dims` (all when empty): the result shape,
/// the sums and how many elements each sums.
fn sum_over(x: &[f64], shape: &[u64], dims: &[usize], keepdim: bool) -> (Vec<u64>, Vec<f64>, u64) {
    let all = dims.is_empty();
    let reduced: Vec<bool> = (0..shape.len()).map(|i| all || dims.contains(&i)).collect();
    let kept: Vec<u64> = shape.iter().zip(&reduced).map(|(&s, &r)| if r { 1 } else { s }).collect();
    let st = strides(&kept);
    let mut out = vec![0.0; kept.iter().product::<u64>() as usize];
    for (flat, &v) in x.iter().enumerate() {
        let idx = unravel(flat as u64, shape);
        let at = idx.iter().zip(&reduced).zip(&st).map(|((&i, &r), s)| if r { 0 } else { i * s }).sum::<u64>();
        out[at as usize] += v;
    }
    let count = shape.iter().zip(&reduced).filter(|(_, r)| **r).map(|(&s, _)| s).product();
    let shape =
        if keepdim { kept } else { shape.iter().zip(&reduced).filter(|(_, r)| !**r).map(|(&s, _)| s).collect() };
    (shape, out, count)
}
