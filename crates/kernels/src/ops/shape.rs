//! Shape and memory ops. Reshapes of contiguous tensors (`view_copy`,
//! `squeeze_copy`, `unsqueeze_copy`, `clone`, `alias_copy`) alias their
//! input's buffer; the rest are strided copies (`gather.wgsl`): permute,
//! slice, select, expand, flip, pixel shuffle, unfold; dtype casts (`cast.wgsl`).

use crate::error::{Error, Result};
use crate::generated::shaders::{Family, ShaderId, Variant};
use crate::plan::{
    Ctx, Dispatch, ElemType, Lowered, Step, TensorInfo, Uniform, WG_ELEMENTWISE, check_rank, contiguous_strides,
    dims_u32, grid_1d, norm_dim, same_dtype, to_u32,
};

fn alias(x: &TensorInfo<'_>, out: &TensorInfo<'_>, out_idx: usize, shape: Vec<u64>) -> Result<Lowered> {
    same_dtype(out, x.dtype, out_idx, "out")?;
    Ok(Lowered { shapes: vec![(out.id, shape)], steps: vec![Step::Alias { out: out.id, src: x.id }] })
}

fn dim_err(arg_idx: usize, name: &'static str, dim: i64) -> Error {
    Error::ArgValue { arg_idx, name, found: dim.to_string(), reason: "dim out of range" }
}

/// `out[i] = x[offset + sum coord_d * strides[d]]` over the contiguous
/// `shape`.
pub(crate) fn gather(
    x: &TensorInfo<'_>,
    out: &TensorInfo<'_>,
    out_idx: usize,
    shape: Vec<u64>,
    strides: &[i64],
    offset: i64,
) -> Result<Lowered> {
    same_dtype(out, x.dtype, out_idx, "out")?;
    check_rank(&shape)?;
    let shader = x.dtype.copy_variant().and_then(|v| ShaderId::find(Family::Gather, v)).ok_or(Error::DType {
        arg_idx: 0,
        name: "self",
        expected: "float32, float16 or int32",
        found: x.dtype,
    })?;
    let numel = crate::plan::checked_numel(&shape)?;
    let mut steps = Vec::new();
    if numel > 0 {
        let i32_of = |what, v: i64| i32::try_from(v).map_err(|_| Error::TooLarge { what, found: v.unsigned_abs() });
        let strides: Vec<i32> = strides.iter().map(|&s| i32_of("stride", s)).collect::<Result<_>>()?;
        let params = Uniform::new()
            .u32(to_u32("numel", numel)?)
            .u32(shape.len() as u32)
            .i32(i32_of("offset", offset)?)
            .u32(0)
            .dims_u32(&dims_u32(&shape)?)
            .dims_i32(&strides)
            .finish();
        steps.push(Step::Dispatch(Dispatch {
            shader: shader.into(),
            entry: "main",
            inputs: vec![x.id],
            outputs: vec![out.id],
            params,
            workgroups: grid_1d(numel, WG_ELEMENTWISE)?,
        }));
    }
    Ok(Lowered { shapes: vec![(out.id, shape)], steps })
}

pub(crate) fn own_strides(shape: &[u64]) -> Vec<i64> {
    contiguous_strides(shape).into_iter().map(|s| s as i64).collect()
}

/// `aten.view_copy.default(self, size, →out)`: one size may be -1.
pub fn view_copy(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(3)?;
    let x = c.tensor(0, "self")?;
    let size = c.int_list(1, "size")?;
    let out = c.tensor(2, "out")?;
    let numel = x.numel();
    let bad = || Error::Shape {
        arg_idx: 0,
        name: "self",
        expected: format!("as many elements as size {size:?}"),
        found: x.shape.to_vec(),
    };
    let Some(known) = size.iter().filter(|&&d| d >= 0).try_fold(1u64, |acc, &d| acc.checked_mul(d as u64)) else {
        return Err(bad());
    };
    let n_infer = size.iter().filter(|&&d| d == -1).count();
    if n_infer > 1 || size.iter().any(|&d| d < -1) {
        return Err(Error::ArgValue {
            arg_idx: 1,
            name: "size",
            found: format!("{size:?}"),
            reason: "sizes are >= 0, with at most one -1",
        });
    }
    let shape: Vec<u64> = if n_infer == 1 {
        if known == 0 || !numel.is_multiple_of(known) {
            return Err(bad());
        }
        size.iter().map(|&d| if d == -1 { numel / known } else { d as u64 }).collect()
    } else {
        size.iter().map(|&d| d as u64).collect()
    };
    if shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d)) != Some(numel) {
        return Err(bad());
    }
    alias(&x, &out, 2, shape)
}

/// `aten.clone.default(self, memory_format, →out)`.
pub fn clone(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(3)?;
    let x = c.tensor(0, "self")?;
    alias(&x, &c.tensor(2, "out")?, 2, x.shape.to_vec())
}

/// `aten.alias_copy.default(self, →out)`.
pub fn alias_copy(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(2)?;
    let x = c.tensor(0, "self")?;
    alias(&x, &c.tensor(1, "out")?, 1, x.shape.to_vec())
}

/// `aten.squeeze_copy.dims(self, dims, →out)`: drops the listed dims of
/// size 1 (others are kept, as in PyTorch).
pub fn squeeze_copy(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(3)?;
    let x = c.tensor(0, "self")?;
    let dims = c.int_list(1, "dims")?;
    let rank = x.shape.len();
    let mut drop = vec![false; rank];
    for &d in &dims {
        let i = norm_dim(d, rank.max(1)).ok_or_else(|| dim_err(1, "dims", d))?;
        if i < rank && x.shape[i] == 1 {
            drop[i] = true;
        }
    }
    let shape = x.shape.iter().zip(&drop).filter(|(_, d)| !**d).map(|(s, _)| *s).collect();
    alias(&x, &c.tensor(2, "out")?, 2, shape)
}

/// `aten.unsqueeze_copy.default(self, dim, →out)`.
pub fn unsqueeze_copy(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(3)?;
    let x = c.tensor(0, "self")?;
    let dim = c.int(1, "dim")?;
    let i = norm_dim(dim, x.shape.len() + 1).ok_or_else(|| dim_err(1, "dim", dim))?;
    let mut shape = x.shape.to_vec();
    shape.insert(i, 1);
    alias(&x, &c.tensor(2, "out")?, 2, shape)
}

/// `aten.permute_copy.default(self, dims, →out)` (and `aten.permute`).
pub fn permute_copy(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(3)?;
    let x = c.tensor(0, "self")?;
    let dims = c.int_list(1, "dims")?;
    let rank = x.shape.len();
    let perm: Vec<usize> =
        dims.iter().map(|&d| norm_dim(d, rank).ok_or_else(|| dim_err(1, "dims", d))).collect::<Result<_>>()?;
    let mut seen = vec![false; rank];
    for &p in &perm {
        seen[p] = true;
    }
    if perm.len() != rank || seen.contains(&false) {
        return Err(Error::ArgValue {
            arg_idx: 1,
            name: "dims",
            found: format!("{dims:?}"),
            reason: "a permutation of the input's dims",
        });
    }
    let own = own_strides(x.shape);
    let shape = perm.iter().map(|&p| x.shape[p]).collect();
    let strides: Vec<i64> = perm.iter().map(|&p| own[p]).collect();
    gather(&x, &c.tensor(2, "out")?, 2, shape, &strides, 0)
}

/// `aten.slice_copy.Tensor(self, dim, start?, end?, step, →out)`.
pub fn slice_copy(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(6)?;
    let x = c.tensor(0, "self")?;
    let dim = c.int(1, "dim")?;
    let d = norm_dim(dim, x.shape.len()).ok_or_else(|| dim_err(1, "dim", dim))?;
    let size = x.shape[d] as i64;
    let clamp_idx = |v: i64| if v < 0 { (v + size).max(0) } else { v.min(size) };
    let start = match c.value(2) {
        crate::plan::Value::Null => 0,
        _ => clamp_idx(c.int(2, "start")?),
    };
    let end = match c.value(3) {
        crate::plan::Value::Null => size,
        _ => clamp_idx(c.int(3, "end")?),
    };
    let step = c.int(4, "step")?;
    if step <= 0 {
        return Err(Error::ArgValue { arg_idx: 4, name: "step", found: step.to_string(), reason: "step > 0" });
    }
    let len = if end > start { (end - start + step - 1) / step } else { 0 };
    let own = own_strides(x.shape);
    let mut shape = x.shape.to_vec();
    shape[d] = len as u64;
    let mut strides = own.clone();
    strides[d] *= step;
    gather(&x, &c.tensor(5, "out")?, 5, shape, &strides, start * own[d])
}

/// `aten.select_copy.int(self, dim, index, →out)`: drops `dim`.
pub fn select_copy(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(4)?;
    let x = c.tensor(0, "self")?;
    let dim = c.int(1, "dim")?;
    let d = norm_dim(dim, x.shape.len()).ok_or_else(|| dim_err(1, "dim", dim))?;
    let index = c.int(2, "index")?;
    let size = x.shape[d] as i64;
    let i = if index < 0 { index + size } else { index };
    if !(0..size).contains(&i) {
        return Err(Error::ArgValue { arg_idx: 2, name: "index", found: index.to_string(), reason: "index in range" });
    }
    let own = own_strides(x.shape);
    let mut shape = x.shape.to_vec();
    shape.remove(d);
    let mut strides = own.clone();
    strides.remove(d);
    gather(&x, &c.tensor(3, "out")?, 3, shape, &strides, i * own[d])
}

/// `aten.expand_copy.default(self, size, implicit, →out)`: -1 keeps a dim.
pub fn expand_copy(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(4)?;
    let x = c.tensor(0, "self")?;
    let size = c.int_list(1, "size")?;
    let rank = size.len();
    let bad = || Error::Shape {
        arg_idx: 0,
        name: "self",
        expected: format!("expandable to {size:?}"),
        found: x.shape.to_vec(),
    };
    if rank < x.shape.len() {
        return Err(bad());
    }
    let lead = rank - x.shape.len();
    let own = own_strides(x.shape);
    let mut shape = Vec::with_capacity(rank);
    let mut strides = Vec::with_capacity(rank);
    for (d, &s) in size.iter().enumerate() {
        match d.checked_sub(lead) {
            None if s >= 0 => {
                shape.push(s as u64);
                strides.push(0);
            }
            None => return Err(bad()),
            Some(i) => {
                let have = x.shape[i];
                let want = if s == -1 { have } else { u64::try_from(s).map_err(|_| bad())? };
                if have == want {
                    shape.push(want);
                    strides.push(own[i]);
                } else if have == 1 {
                    shape.push(want);
                    strides.push(0);
                } else {
                    return Err(bad());
                }
            }
        }
    }
    gather(&x, &c.tensor(3, "out")?, 3, shape, &strides, 0)
}

/// `aten.flip.default(self, dims, →out)`.
pub fn flip(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(3)?;
    let x = c.tensor(0, "self")?;
    let dims = c.int_list(1, "dims")?;
    let mut strides = own_strides(x.shape);
    let mut offset = 0i64;
    let mut flipped = vec![false; x.shape.len()];
    for &d in &dims {
        let i = norm_dim(d, x.shape.len()).ok_or_else(|| dim_err(1, "dims", d))?;
        if !flipped[i] {
            flipped[i] = true;
            offset += (x.shape[i] as i64 - 1).max(0) * strides[i];
            strides[i] = -strides[i];
        }
    }
    gather(&x, &c.tensor(2, "out")?, 2, x.shape.to_vec(), &strides, offset)
}

/// `dim_order_ops._to_dim_order_copy.default(self, dtype, layout, device,
/// pin_memory, non_blocking, dim_order, →out)` and `aten._to_copy.default`
/// (the same arguments with `memory_format` for `dim_order`): the target
/// dtype is the output's. The same dtype aliases; any of float32, float16,
/// int32 and bool casts to any other (`cast.wgsl`).
pub fn to_dim_order_copy(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(8)?;
    let x = c.tensor(0, "self")?;
    let out = c.tensor(7, "out")?;
    if out.dtype == x.dtype {
        return alias(&x, &out, 7, x.shape.to_vec());
    }
    let src = match x.dtype {
        ElemType::F32 => 0,
        ElemType::F16 => 1,
        ElemType::I32 => 2,
        ElemType::Bool => 3,
        found => {
            return Err(Error::DType { arg_idx: 0, name: "self", expected: "float32, float16, int32 or bool", found });
        }
    };
    let variant = match out.dtype {
        ElemType::F32 => Variant::F32,
        ElemType::F16 => Variant::F16,
        ElemType::I32 | ElemType::Bool => Variant::I32,
        found => {
            return Err(Error::DType { arg_idx: 7, name: "out", expected: "float32, float16, int32 or bool", found });
        }
    };
    let shader = ShaderId::find(Family::Cast, variant).expect("cast.wgsl has the f32, f16 and i32 variants");
    let numel = x.numel();
    let mut steps = Vec::new();
    if numel > 0 {
        let to_bool = u32::from(out.dtype == ElemType::Bool);
        steps.push(Step::Dispatch(Dispatch {
            shader: shader.into(),
            entry: "main",
            inputs: vec![x.id],
            outputs: vec![out.id],
            params: Uniform::new().u32(to_u32("numel", numel)?).u32(src).u32(to_bool).finish(),
            workgroups: grid_1d(numel, WG_ELEMENTWISE)?,
        }));
    }
    Ok(Lowered { shapes: vec![(out.id, x.shape.to_vec())], steps })
}

/// `aten.unfold_copy.default(self, dimension, size, step, →out)`: the
/// windows `x[.., j * step .. j * step + size, ..]` along `dimension`, that
/// dim becoming the window count `(len - size) / step + 1` and the window
/// a new last dim (a strided copy). A rank-0 input is one window of one.
pub fn unfold_copy(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(5)?;
    let x = c.tensor(0, "self")?;
    let dim = c.int(1, "dimension")?;
    let size = c.int(2, "size")?;
    let step = c.int(3, "step")?;
    let out = c.tensor(4, "out")?;
    if step <= 0 {
        return Err(Error::ArgValue { arg_idx: 3, name: "step", found: step.to_string(), reason: "positive" });
    }
    let rank = x.shape.len();
    let d = norm_dim(dim, rank.max(1)).ok_or_else(|| dim_err(1, "dimension", dim))?;
    let len = x.shape.get(d).copied().unwrap_or(1);
    if size < 0 || size as u64 > len {
        return Err(Error::ArgValue {
            arg_idx: 2,
            name: "size",
            found: size.to_string(),
            reason: "between 0 and the length of the dimension",
        });
    }
    let (size, step) = (size as u64, step as u64);
    let mut shape = x.shape.to_vec();
    let mut strides = own_strides(x.shape);
    let n_windows = (len - size) / step + 1;
    if rank == 0 {
        return gather(&x, &out, 4, vec![size], &[0], 0);
    }
    let dim_stride = strides[d];
    shape[d] = n_windows;
    strides[d] = dim_stride * step as i64;
    shape.push(size);
    strides.push(dim_stride);
    gather(&x, &out, 4, shape, &strides, 0)
}

/// `aten.pixel_shuffle.default(self, upscale_factor, →out)`: `[.., C r², H,
/// W]` to `[.., C, H r, W r]`, a strided copy of the input seen as `[..,
/// C, r, r, H, W]` permuted to `[.., C, H, r, W, r]`.
pub fn pixel_shuffle(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(3)?;
    let x = c.tensor(0, "self")?;
    let r = c.int(1, "upscale_factor")?;
    let rank = x.shape.len();
    if r <= 0 {
        return Err(Error::ArgValue { arg_idx: 1, name: "upscale_factor", found: r.to_string(), reason: "positive" });
    }
    let r = r as u64;
    if rank < 3 || !x.shape[rank - 3].is_multiple_of(r * r) {
        return Err(Error::Shape {
            arg_idx: 0,
            name: "self",
            expected: format!("rank >= 3 with channels divisible by {}", r * r),
            found: x.shape.to_vec(),
        });
    }
    let lead = &x.shape[..rank - 3];
    let (ch, h, w) = (x.shape[rank - 3] / (r * r), x.shape[rank - 2], x.shape[rank - 1]);
    let mut split = lead.to_vec();
    split.extend([ch, r, r, h, w]);
    let s = own_strides(&split);
    let l = lead.len();
    let mut shape = lead.to_vec();
    shape.extend([ch, h, r, w, r]);
    let mut strides = s[..l].to_vec();
    strides.extend([s[l], s[l + 3], s[l + 1], s[l + 4], s[l + 2]]);
    let out = c.tensor(2, "out")?;
    let mut lowered = gather(&x, &out, 2, shape, &strides, 0)?;
    let mut out_shape = lead.to_vec();
    out_shape.extend([ch, h * r, w * r]);
    lowered.shapes = vec![(out.id, out_shape)];
    Ok(lowered)
}
