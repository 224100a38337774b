//! Indexing by an int32 index tensor (`take.wgsl`): `aten.embedding`,
//! `aten.index_select`, `aten.gather` and `aten.index.Tensor` with one index
//! tensor. Negative indices count from the end, as in PyTorch's `x[idx]`;
//! indices still out of range read 0.

use crate::error::{Error, Result};
use crate::generated::shaders::{Family, ShaderId};
use crate::plan::{
    Ctx, Dispatch, ElemType, Lowered, Step, TensorInfo, Uniform, Value, WG_ELEMENTWISE, check_rank, contiguous_strides,
    dims_u32, grid_1d, norm_dim, same_dtype, to_u32,
};

/// One `take.wgsl` gather, described per output dim.
struct Take<'a> {
    x: TensorInfo<'a>,
    idx: TensorInfo<'a>,
    out: TensorInfo<'a>,
    out_idx: usize,
    /// Output shape.
    shape: Vec<u64>,
    /// Strides of `x` per output dim (0 where the index addresses it).
    x_strides: Vec<u64>,
    /// Strides of the index tensor per output dim.
    i_strides: Vec<u64>,
    /// Size of the indexed dim of `x` (for wrapping negative indices).
    dim_size: u64,
    /// Stride of the indexed dim of `x`.
    x_dim_stride: u64,
    /// The rows of the indexed dim `x` holds (first, count) when it is one
    /// chunk of a table split past the binding limit; `None`: all of them.
    held: Option<(u64, u64)>,
}

fn u32s(what: &'static str, xs: &[u64]) -> Result<Vec<u32>> {
    xs.iter().map(|&x| to_u32(what, x)).collect()
}

fn lower(t: Take<'_>) -> Result<Lowered> {
    let shader = t.x.dtype.copy_variant().and_then(|v| ShaderId::find(Family::Take, v)).ok_or(Error::DType {
        arg_idx: 0,
        name: "self",
        expected: "float32, float16, int32 or bool",
        found: t.x.dtype,
    })?;
    same_dtype(&t.out, t.x.dtype, t.out_idx, "out")?;
    check_rank(&t.shape)?;
    let numel: u64 = t.shape.iter().product();
    let held = t.held.unwrap_or((0, t.dim_size));
    let mut steps = Vec::new();
    if numel > 0 {
        let params = Uniform::new()
            .u32(to_u32("numel", numel)?)
            .u32(t.shape.len() as u32)
            .u32(to_u32("indexed dim size", t.dim_size)?)
            .u32(to_u32("stride", t.x_dim_stride)?)
            .dims_u32(&dims_u32(&t.shape)?)
            .dims_u32(&u32s("stride", &t.x_strides)?)
            .dims_u32(&u32s("stride", &t.i_strides)?)
            .u32(to_u32("first row", held.0)?)
            .u32(to_u32("rows", held.1)?)
            .finish();
        steps.push(Step::Dispatch(Dispatch {
            shader: shader.into(),
            entry: "main",
            inputs: vec![t.x.id, t.idx.id],
            outputs: vec![t.out.id],
            params,
            workgroups: grid_1d(numel, WG_ELEMENTWISE)?,
        }));
    }
    Ok(Lowered { shapes: vec![(t.out.id, t.shape)], steps })
}

fn need_int_index(t: &TensorInfo<'_>, arg_idx: usize, name: &'static str) -> Result<()> {
    if t.dtype == ElemType::I32 {
        Ok(())
    } else {
        Err(Error::DType { arg_idx, name, expected: "int32 (int64 indices are held as int32)", found: t.dtype })
    }
}

fn dim_arg(c: &Ctx<'_>, i: usize, rank: usize) -> Result<usize> {
    let dim = c.int(i, "dim")?;
    norm_dim(dim, rank).ok_or(Error::ArgValue {
        arg_idx: i,
        name: "dim",
        found: dim.to_string(),
        reason: "dim out of range",
    })
}

/// `aten.embedding.default(weight [V, E], indices, padding_idx,
/// scale_grad_by_freq, sparse, →out [..., E])`: rows of the weight.
pub fn embedding(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(6)?;
    let w = c.tensor(0, "weight")?;
    let idx = c.tensor(1, "indices")?;
    need_int_index(&idx, 1, "indices")?;
    let &[v, e] = w.shape else {
        return Err(Error::Shape {
            arg_idx: 0,
            name: "weight",
            expected: "rank 2 [V, E]".into(),
            found: w.shape.to_vec(),
        });
    };
    let n = idx.shape.len();
    let mut shape = idx.shape.to_vec();
    shape.push(e);
    let mut x_strides = vec![0; n];
    x_strides.push(1);
    let mut i_strides = contiguous_strides(idx.shape);
    i_strides.push(0);
    lower(Take {
        x: w,
        idx,
        out: c.tensor(5, "out")?,
        out_idx: 5,
        shape,
        x_strides,
        i_strides,
        dim_size: v,
        x_dim_stride: e,
        held: None,
    })
}

/// `etwgpu.embedding_rows.default(weight [n, E], indices, row_start,
/// vocab, →out [..., E])`: the rows `row_start .. row_start + n` of an
/// `aten.embedding` table of `vocab` rows split past the binding limit
/// (`etwgpu_graph::split`); indices outside them give zeros, so the sum of
/// the chunks' outputs is the whole embedding.
pub fn embedding_rows(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(5)?;
    let w = c.tensor(0, "weight")?;
    let idx = c.tensor(1, "indices")?;
    need_int_index(&idx, 1, "indices")?;
    let &[n, e] = w.shape else {
        return Err(Error::Shape {
            arg_idx: 0,
            name: "weight",
            expected: "rank 2 [n, E]".into(),
            found: w.shape.to_vec(),
        });
    };
    let start = non_negative(c, 2, "row_start")?;
    let vocab = non_negative(c, 3, "vocab")?;
    if start.checked_add(n).is_none_or(|end| end > vocab) {
        return Err(Error::ArgValue {
            arg_idx: 2,
            name: "row_start",
            found: start.to_string(),
            reason: "the chunk's rows must lie inside the vocabulary",
        });
    }
    let k = idx.shape.len();
    let mut shape = idx.shape.to_vec();
    shape.push(e);
    let mut x_strides = vec![0; k];
    x_strides.push(1);
    let mut i_strides = contiguous_strides(idx.shape);
    i_strides.push(0);
    lower(Take {
        x: w,
        idx,
        out: c.tensor(4, "out")?,
        out_idx: 4,
        shape,
        x_strides,
        i_strides,
        dim_size: vocab,
        x_dim_stride: e,
        held: Some((start, n)),
    })
}

/// Int argument `i`, which must not be negative.
pub(crate) fn non_negative(c: &Ctx<'_>, i: usize, name: &'static str) -> Result<u64> {
    let x = c.int(i, name)?;
    u64::try_from(x).map_err(|_| Error::ArgValue {
        arg_idx: i,
        name,
        found: x.to_string(),
        reason: "must not be negative",
    })
}

/// `aten.index_select.default(self, dim, index 1-D, →out)`.
pub fn index_select(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(4)?;
    let x = c.tensor(0, "self")?;
    let rank = x.shape.len();
    let d = dim_arg(c, 1, rank.max(1))?;
    let idx = c.tensor(2, "index")?;
    need_int_index(&idx, 2, "index")?;
    if idx.shape.len() > 1 {
        return Err(Error::Shape {
            arg_idx: 2,
            name: "index",
            expected: "rank 0 or 1".into(),
            found: idx.shape.to_vec(),
        });
    }
    let x_shape: Vec<u64> = if rank == 0 { vec![1] } else { x.shape.to_vec() };
    let own = contiguous_strides(&x_shape);
    let mut shape = x_shape.clone();
    shape[d] = idx.numel();
    let mut x_strides = own.clone();
    x_strides[d] = 0;
    let mut i_strides = vec![0; shape.len()];
    i_strides[d] = 1;
    let mut lowered = lower(Take {
        x,
        idx,
        out: c.tensor(3, "out")?,
        out_idx: 3,
        shape,
        x_strides,
        i_strides,
        dim_size: x_shape[d],
        x_dim_stride: own[d],
        held: None,
    })?;
    if rank == 0 {
        lowered.shapes[0].1.clear();
    }
    Ok(lowered)
}

/// `aten.gather.default(self, dim, index, sparse_grad, →out)`:
/// `out[c] = self[c with c[dim] = index[c]]`, `out` shaped like `index`.
pub fn gather(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(5)?;
    let x = c.tensor(0, "self")?;
    let rank = x.shape.len();
    let d = dim_arg(c, 1, rank.max(1))?;
    let idx = c.tensor(2, "index")?;
    need_int_index(&idx, 2, "index")?;
    let x_shape: Vec<u64> = if rank == 0 { vec![1] } else { x.shape.to_vec() };
    let i_shape: Vec<u64> = if idx.shape.is_empty() { vec![1] } else { idx.shape.to_vec() };
    let fits = i_shape.len() == x_shape.len()
        && i_shape.iter().zip(&x_shape).enumerate().all(|(k, (&i, &s))| k == d || i <= s);
    if !fits {
        return Err(Error::Shape {
            arg_idx: 2,
            name: "index",
            expected: format!("the rank of self {:?} and no larger off dim {d}", x.shape),
            found: idx.shape.to_vec(),
        });
    }
    let own = contiguous_strides(&x_shape);
    let mut x_strides = own.clone();
    x_strides[d] = 0;
    let mut lowered = lower(Take {
        x,
        idx,
        out: c.tensor(4, "out")?,
        out_idx: 4,
        i_strides: contiguous_strides(&i_shape),
        shape: i_shape,
        x_strides,
        dim_size: x_shape[d],
        x_dim_stride: own[d],
        held: None,
    })?;
    lowered.shapes[0].1 = idx.shape.to_vec();
    Ok(lowered)
}

/// `aten.index.Tensor(self, indices [T?...], →out)` with exactly one int
/// index tensor (at any position; `None`s before it keep their dims):
/// `out = self[:, ..., idx, ...]`.
pub fn index_tensor(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(3)?;
    let x = c.tensor(0, "self")?;
    let ids = match c.value(1) {
        Value::List(ids) => ids,
        other => {
            return Err(Error::ArgKind { arg_idx: 1, name: "indices", expected: "ValueList", found: other.kind() });
        }
    };
    let mut found: Option<(usize, TensorInfo<'_>)> = None;
    for (pos, id) in ids.iter().enumerate() {
        match c.value_of(*id) {
            Value::Null => {}
            Value::Tensor(t) if found.is_none() => found = Some((pos, t)),
            Value::Tensor(_) => {
                return Err(Error::ArgValue {
                    arg_idx: 1,
                    name: "indices",
                    found: format!("{} index tensors", ids.len()),
                    reason: "exactly one index tensor (the rest None)",
                });
            }
            other => {
                return Err(Error::ArgKind {
                    arg_idx: 1,
                    name: "indices",
                    expected: "ValueList of Tensor or Null",
                    found: other.kind(),
                });
            }
        }
    }
    let Some((p, idx)) = found else {
        return Err(Error::ArgValue {
            arg_idx: 1,
            name: "indices",
            found: "no index tensor".into(),
            reason: "exactly one index tensor (the rest None)",
        });
    };
    need_int_index(&idx, 1, "indices")?;
    let rank = x.shape.len();
    if p >= rank {
        return Err(Error::Shape {
            arg_idx: 0,
            name: "self",
            expected: format!("more than {p} dims (an index tensor at position {p})"),
            found: x.shape.to_vec(),
        });
    }
    let own = contiguous_strides(x.shape);
    let n = idx.shape.len();
    let shape: Vec<u64> = x.shape[..p].iter().chain(idx.shape).chain(&x.shape[p + 1..]).copied().collect();
    let x_strides: Vec<u64> =
        own[..p].iter().copied().chain(std::iter::repeat_n(0, n)).chain(own[p + 1..].iter().copied()).collect();
    let i_strides: Vec<u64> = std::iter::repeat_n(0, p)
        .chain(contiguous_strides(idx.shape))
        .chain(std::iter::repeat_n(0, rank - p - 1))
        .collect();
    lower(Take {
        x,
        idx,
        out: c.tensor(2, "out")?,
        out_idx: 2,
        shape,
        x_strides,
        i_strides,
        dim_size: x.shape[p],
        x_dim_stride: own[p],
        held: None,
    })
}
