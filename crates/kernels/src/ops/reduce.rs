//! Reductions: `aten.sum.dim_IntList`, `aten.mean.dim`, `aten.amax`,
//! `aten.amin` (`reduce.wgsl`) and `aten.argmax`, `aten.argmin`
//! (`arg_reduce.wgsl`). One workgroup per output element; any set of dims,
//! negative dims, `keepdim` both ways.

use crate::error::{Error, Result};
use crate::generated::shaders::Family;
use crate::plan::{
    Ctx, Dispatch, ElemType, Lowered, MAX_GROUPS_PER_DIM, Step, TensorInfo, Uniform, Value, float_shader, grid_1d,
    norm_dim, same_dtype, to_u32,
};

/// An op of `reduce.wgsl`; the discriminant is the shader's op code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReduceOp {
    /// Sum.
    Sum = 0,
    /// Sum divided by the count.
    Mean = 1,
    /// Maximum.
    Amax = 2,
    /// Minimum.
    Amin = 3,
}

/// An op of `arg_reduce.wgsl`; the discriminant is the shader's op code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgOp {
    /// Index of the maximum.
    Argmax = 0,
    /// Index of the minimum.
    Argmin = 1,
}

/// Coalesced dims (sizes and input strides, outermost first).
#[derive(Debug, Default)]
struct Dims {
    shape: Vec<u32>,
    strides: Vec<u32>,
}

/// How a reduction walks its contiguous input.
#[derive(Debug)]
struct Walk {
    kept: Dims,
    reduced: Dims,
    n_out: u64,
    n_red: u64,
    /// Output shape (reduced dims dropped, or 1 with `keepdim`).
    out_shape: Vec<u64>,
}

/// Splits `shape` into kept and reduced dims, merging neighbours of the same
/// kind (the input is contiguous, so they form one dim) and dropping size-1
/// dims, which do not move the offset.
fn walk(shape: &[u64], reduced: &[bool], keepdim: bool) -> Result<Walk> {
    let mut kept = Dims::default();
    let mut red = Dims::default();
    let mut last_reduced: Option<bool> = None;
    let mut stride = 1u64;
    let mut rev: Vec<(bool, u64, u64)> = Vec::new();
    for d in (0..shape.len()).rev() {
        rev.push((reduced[d], shape[d], stride));
        stride *= shape[d];
    }
    // Outermost first, merging runs of one kind.
    let mut merged: Vec<(bool, u64, u64)> = Vec::new();
    for (is_red, size, stride) in rev.into_iter().rev() {
        if size == 1 {
            continue;
        }
        match merged.last_mut() {
            Some(last) if last_reduced == Some(is_red) => {
                last.1 *= size;
                last.2 = stride;
            }
            _ => merged.push((is_red, size, stride)),
        }
        last_reduced = Some(is_red);
    }
    for (is_red, size, stride) in merged {
        let dims = if is_red { &mut red } else { &mut kept };
        dims.shape.push(to_u32("a reduction dim", size)?);
        dims.strides.push(to_u32("a reduction stride", stride)?);
    }
    let out_shape: Vec<u64> = shape
        .iter()
        .zip(reduced)
        .filter_map(|(&s, &r)| match (r, keepdim) {
            (false, _) => Some(s),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect();
    let n_red: u64 = shape.iter().zip(reduced).filter(|(_, r)| **r).map(|(s, _)| *s).product();
    let n_out: u64 = shape.iter().zip(reduced).filter(|(_, r)| !**r).map(|(s, _)| *s).product();
    Ok(Walk { kept, reduced: red, n_out, n_red, out_shape })
}

fn dim_err(arg_idx: usize, name: &'static str, found: String) -> Error {
    Error::ArgValue { arg_idx, name, found, reason: "dims in range, each at most once" }
}

/// Which dims of `x` a `dim` list reduces; `None` or an empty list means
/// all of them (PyTorch's `sum(x, dim=[])`). A 0-d tensor reduces as one
/// element.
fn reduced_dims(c: &Ctx<'_>, x: &TensorInfo<'_>, arg_idx: usize) -> Result<Vec<bool>> {
    let rank = x.shape.len();
    let dims = match c.value(arg_idx) {
        Value::Null => Vec::new(),
        _ => c.int_list(arg_idx, "dim")?,
    };
    let mut reduced = vec![dims.is_empty(); rank];
    for &d in &dims {
        let i = norm_dim(d, rank.max(1)).ok_or_else(|| dim_err(arg_idx, "dim", format!("{dims:?}")))?;
        if rank == 0 {
            continue;
        }
        if reduced[i] {
            return Err(dim_err(arg_idx, "dim", format!("{dims:?}")));
        }
        reduced[i] = true;
    }
    Ok(reduced)
}

fn params(w: &Walk, op: u32, scale: f32) -> Result<Vec<u8>> {
    Ok(Uniform::new()
        .u32(to_u32("outputs", w.n_out)?)
        .u32(to_u32("reduced elements", w.n_red)?)
        .u32(op)
        .u32(w.kept.shape.len() as u32)
        .u32(w.reduced.shape.len() as u32)
        .f32(scale)
        .u32(0)
        .u32(0)
        .dims_u32(&w.kept.shape)
        .dims_u32(&w.kept.strides)
        .dims_u32(&w.reduced.shape)
        .dims_u32(&w.reduced.strides)
        .finish())
}

fn empty_err(x: &TensorInfo<'_>, what: &'static str) -> Error {
    Error::Shape {
        arg_idx: 0,
        name: "self",
        expected: format!("a non-empty reduction ({what} of no elements is undefined)"),
        found: x.shape.to_vec(),
    }
}

/// `aten.sum.dim_IntList(self, dim?, keepdim, dtype, →out)`,
/// `aten.mean.dim(self, dim?, keepdim, dtype, →out)` and
/// `aten.{amax,amin}.default(self, dim, keepdim, →out)`.
pub fn reduce(c: &Ctx<'_>, op: ReduceOp) -> Result<Lowered> {
    let has_dtype = matches!(op, ReduceOp::Sum | ReduceOp::Mean);
    let out_idx = if has_dtype { 4 } else { 3 };
    c.expect_args(out_idx + 1)?;
    let x = c.tensor(0, "self")?;
    let reduced = reduced_dims(c, &x, 1)?;
    let keepdim = c.bool(2, "keepdim")?;
    let out = c.tensor(out_idx, "out")?;
    let shader = float_shader(Family::Reduce, &x, 0, "self")?;
    same_dtype(&out, x.dtype, out_idx, "out")?;
    let shape: &[u64] = if x.shape.is_empty() { &[1] } else { x.shape };
    let mut w = walk(shape, &if x.shape.is_empty() { vec![true] } else { reduced }, keepdim)?;
    if x.shape.is_empty() {
        w.out_shape.clear();
    }
    if w.n_red == 0 && matches!(op, ReduceOp::Amax | ReduceOp::Amin) {
        return Err(empty_err(&x, "the max or min"));
    }
    let mut steps = Vec::new();
    if w.n_out > 0 {
        steps.push(Step::Dispatch(Dispatch {
            shader: shader.into(),
            entry: "main",
            inputs: vec![x.id],
            outputs: vec![out.id],
            params: params(&w, op as u32, 1.0 / w.n_red as f32)?,
            workgroups: grid_1d(w.n_out, 1)?,
        }));
    }
    Ok(Lowered { shapes: vec![(out.id, w.out_shape)], steps })
}

/// `aten.{argmax,argmin}.default(self, dim?, keepdim, →out int)`: `None`
/// flattens the whole tensor. The int64 result is held as int32.
pub fn arg_reduce(c: &Ctx<'_>, op: ArgOp) -> Result<Lowered> {
    c.expect_args(4)?;
    let x = c.tensor(0, "self")?;
    let rank = x.shape.len();
    let dim = match c.value(1) {
        Value::Null => None,
        _ => Some(c.int(1, "dim")?),
    };
    let keepdim = c.bool(2, "keepdim")?;
    let out = c.tensor(3, "out")?;
    let shader = float_shader(Family::ArgReduce, &x, 0, "self")?;
    if out.dtype != ElemType::I32 {
        return Err(Error::DType { arg_idx: 3, name: "out", expected: "int32", found: out.dtype });
    }
    let mut reduced = vec![dim.is_none(); rank];
    if let Some(d) = dim {
        let i = norm_dim(d, rank.max(1)).ok_or_else(|| dim_err(1, "dim", d.to_string()))?;
        if rank > 0 {
            reduced[i] = true;
        }
    }
    let shape: &[u64] = if rank == 0 { &[1] } else { x.shape };
    let mut w = walk(shape, &if rank == 0 { vec![true] } else { reduced }, keepdim)?;
    if rank == 0 {
        w.out_shape.clear();
    }
    if w.n_red == 0 {
        return Err(empty_err(&x, "the argmax or argmin"));
    }
    let mut steps = Vec::new();
    if w.n_out > 0 {
        steps.push(Step::Dispatch(Dispatch {
            shader: shader.into(),
            entry: "main",
            inputs: vec![x.id],
            outputs: vec![out.id],
            params: params(&w, op as u32, 0.0)?,
            workgroups: grid_1d(w.n_out, 1)?,
        }));
    }
    Ok(Lowered { shapes: vec![(out.id, w.out_shape)], steps })
}

/// Values one `argmax_rows.wgsl` stage-0 workgroup folds (`CHUNK`).
const ARGMAX_CHUNK: u64 = 256 * 16;

/// The two dispatches of [`argmax_last_dim`]: one shader and binding
/// layout (`x`, the partials, the int32 indices), a uniform block and a
/// grid per stage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgmaxRows {
    /// `argmax_rows.wgsl` in `x`'s dtype.
    pub shader: crate::ShaderId,
    /// Stage 0 (chunks into partials), then stage 1 (partials into
    /// indices): uniforms and workgroups.
    pub stages: [(Vec<u8>, [u32; 3]); 2],
    /// Bytes of the partials buffer (8 per row and chunk).
    pub partial_bytes: u64,
}

/// `argmax` over the last dim of `x` (at its live shape, contiguous), as
/// int32 indices, one per row: not an op of the table but what the
/// runtime appends to a method whose caller wants token ids instead of
/// logits (greedy decode then reads back 4 bytes per row). Two dispatches
/// of `argmax_rows.wgsl`, so a wide row (a vocabulary) spreads over many
/// workgroups.
pub fn argmax_last_dim(x: &TensorInfo<'_>) -> Result<ArgmaxRows> {
    let shader = float_shader(Family::ArgmaxRows, x, 0, "self")?;
    let n = x.shape.last().copied().unwrap_or(1);
    let rows = x.shape.iter().rev().skip(1).product::<u64>().max(1);
    if n == 0 {
        return Err(empty_err(x, "the argmax"));
    }
    let chunks = n.div_ceil(ARGMAX_CHUNK);
    // Rows and chunks are grid dimensions.
    let grid_dim = |what: &'static str, v: u64| -> Result<u32> {
        let v32 = to_u32(what, v)?;
        if v32 > MAX_GROUPS_PER_DIM {
            return Err(Error::ArgValue {
                arg_idx: 0,
                name: "self",
                found: format!("{v} {what}"),
                reason: "the device argmax takes at most 65535 rows, and rows of at most 65535 chunks of 4096",
            });
        }
        Ok(v32)
    };
    let (rows32, chunks32) = (grid_dim("rows", rows)?, grid_dim("chunks a row", chunks)?);
    let n32 = to_u32("argmax row length", n)?;
    let stage = |stage: u32| Uniform::new().u32(stage).u32(n32).u32(chunks32).u32(0).finish();
    Ok(ArgmaxRows {
        shader,
        stages: [(stage(0), [chunks32, rows32, 1]), (stage(1), [1, rows32, 1])],
        partial_bytes: rows * chunks * 8,
    })
}
