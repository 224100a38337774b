//! Copies that rearrange whole tensors: `aten.cat` (`place.wgsl`, one
//! dispatch per input), `aten.split_with_sizes_copy` and `aten.repeat`
//! (strided copies of `gather.wgsl`) and `aten.constant_pad_nd`
//! (`pad.wgsl`).

use crate::error::{Error, Result};
use crate::generated::shaders::{Family, ShaderId};
use crate::ops::shape::{gather, own_strides};
use crate::plan::{
    Ctx, Dispatch, ElemType, Lowered, Step, TensorInfo, Uniform, WG_ELEMENTWISE, check_rank, contiguous_strides,
    dims_u32, grid_1d, norm_dim, same_dtype, to_u32,
};

fn copy_shader(family: Family, t: &TensorInfo<'_>, arg_idx: usize, name: &'static str) -> Result<ShaderId> {
    t.dtype.copy_variant().and_then(|v| ShaderId::find(family, v)).ok_or(Error::DType {
        arg_idx,
        name,
        expected: "float32, float16, int32 or bool",
        found: t.dtype,
    })
}

fn dim_err(arg_idx: usize, dim: i64) -> Error {
    Error::ArgValue { arg_idx, name: "dim", found: dim.to_string(), reason: "dim out of range" }
}

/// `aten.cat.default(tensors [T...], dim, →out)`. Inputs of shape `[0]`
/// are skipped, as PyTorch does for legacy empty tensors.
pub fn cat(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(3)?;
    let all = c.tensor_list(0, "tensors")?;
    let dim = c.int(1, "dim")?;
    let out = c.tensor(2, "out")?;
    let parts: Vec<TensorInfo<'_>> = all.iter().copied().filter(|t| t.shape != [0]).collect();
    let Some(first) = parts.first() else {
        same_dtype(&out, all.first().map_or(out.dtype, |t| t.dtype), 2, "out")?;
        return Ok(Lowered { shapes: vec![(out.id, vec![0])], steps: Vec::new() });
    };
    let rank = first.shape.len();
    let d = norm_dim(dim, rank).ok_or_else(|| dim_err(1, dim))?;
    let shader = copy_shader(Family::Place, first, 0, "tensors")?;
    let mut shape = first.shape.to_vec();
    shape[d] = 0;
    for t in &parts {
        same_dtype(t, first.dtype, 0, "tensors")?;
        let fits = t.shape.len() == rank && (0..rank).all(|k| k == d || t.shape[k] == first.shape[k]);
        if !fits {
            return Err(Error::Shape {
                arg_idx: 0,
                name: "tensors",
                expected: format!("the shape of the first tensor {:?} off dim {d}", first.shape),
                found: t.shape.to_vec(),
            });
        }
        shape[d] += t.shape[d];
    }
    same_dtype(&out, first.dtype, 2, "out")?;
    check_rank(&shape)?;
    let out_strides = contiguous_strides(&shape);
    let dst_strides: Vec<u32> = out_strides.iter().map(|&s| to_u32("stride", s)).collect::<Result<_>>()?;
    let mut steps = Vec::new();
    let mut start = 0u64;
    for t in &parts {
        let numel = t.numel();
        if numel > 0 {
            let params = Uniform::new()
                .u32(to_u32("numel", numel)?)
                .u32(rank as u32)
                .u32(to_u32("offset", start * out_strides[d])?)
                .u32(0)
                .dims_u32(&dims_u32(t.shape)?)
                .dims_u32(&dst_strides)
                .finish();
            steps.push(Step::Dispatch(Dispatch {
                shader: shader.into(),
                entry: "main",
                inputs: vec![t.id],
                outputs: vec![out.id],
                params,
                workgroups: grid_1d(numel, WG_ELEMENTWISE)?,
            }));
        }
        start += t.shape[d];
    }
    Ok(Lowered { shapes: vec![(out.id, shape)], steps })
}

/// `aten.split_with_sizes_copy.default(self, split_sizes, dim, →[T...])`:
/// one strided copy per output.
pub fn split_with_sizes_copy(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(4)?;
    let x = c.tensor(0, "self")?;
    let sizes = c.int_list(1, "split_sizes")?;
    let dim = c.int(2, "dim")?;
    let outs = c.tensor_list(3, "out")?;
    let d = norm_dim(dim, x.shape.len()).ok_or_else(|| dim_err(2, dim))?;
    let total = sizes.iter().try_fold(0i64, |acc, &s| acc.checked_add(s));
    if sizes.iter().any(|&s| s < 0) || total != Some(x.shape[d] as i64) || sizes.len() != outs.len() {
        return Err(Error::ArgValue {
            arg_idx: 1,
            name: "split_sizes",
            found: format!("{sizes:?}"),
            reason: "sizes >= 0, one per output, summing to the size of dim",
        });
    }
    let own = own_strides(x.shape);
    let mut lowered = Lowered::default();
    let mut start = 0i64;
    for (out, &size) in outs.iter().zip(&sizes) {
        let mut shape = x.shape.to_vec();
        shape[d] = size as u64;
        let part = gather(&x, out, 3, shape, &own, start * own[d])?;
        lowered.shapes.extend(part.shapes);
        lowered.steps.extend(part.steps);
        start += size;
    }
    Ok(lowered)
}

/// `aten.repeat.default(self, repeats, →out)`: tiles `self` (left-padded
/// with size-1 dims to `len(repeats)`). Output dim `d` of size
/// `r_d * s_d` is read as the pair (repeat `r_d`, stride 0) then
/// (`s_d`, the input stride), a strided copy of rank up to 2 x rank;
/// size-1 entries are dropped.
pub fn repeat(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(3)?;
    let x = c.tensor(0, "self")?;
    let repeats = c.int_list(1, "repeats")?;
    let out = c.tensor(2, "out")?;
    let rank = repeats.len();
    if rank < x.shape.len() || repeats.iter().any(|&r| r < 0) {
        return Err(Error::ArgValue {
            arg_idx: 1,
            name: "repeats",
            found: format!("{repeats:?}"),
            reason: "one count >= 0 per dim of self, at least",
        });
    }
    let mut x_shape = vec![1u64; rank - x.shape.len()];
    x_shape.extend_from_slice(x.shape);
    let own = own_strides(&x_shape);
    let out_shape: Vec<u64> = x_shape
        .iter()
        .zip(&repeats)
        .map(|(&s, &r)| s.checked_mul(r as u64))
        .collect::<Option<_>>()
        .ok_or(Error::TooLarge { what: "repeated dim", found: u64::MAX })?;
    let mut shape = Vec::new();
    let mut strides = Vec::new();
    for ((&s, &r), &st) in x_shape.iter().zip(&repeats).zip(&own) {
        if r != 1 {
            shape.push(r as u64);
            strides.push(0);
        }
        if s != 1 {
            shape.push(s);
            strides.push(st);
        }
    }
    let mut lowered = gather(&x, &out, 2, shape, &strides, 0)?;
    lowered.shapes[0].1 = out_shape;
    Ok(lowered)
}

/// Largest magnitude below which every integer is an exact f32.
const F32_EXACT_INT: f64 = 16_777_216.0;

/// The f32 a kernel converts to `dtype`, checked to convert exactly for
/// integer and bool tensors (floats round as PyTorch's cast does).
pub(crate) fn exact_f32(value: f64, dtype: ElemType, arg_idx: usize, name: &'static str) -> Result<f32> {
    match dtype {
        ElemType::Bool => Ok(if value != 0.0 { 1.0 } else { 0.0 }),
        ElemType::I32 if value.fract() != 0.0 || value.abs() > F32_EXACT_INT => Err(Error::ArgValue {
            arg_idx,
            name,
            found: value.to_string(),
            reason: "an integer of magnitude at most 2^24 for an int32 tensor",
        }),
        _ => Ok(value as f32),
    }
}

/// `aten.constant_pad_nd.default(self, pad, value, →out)`: `pad` holds
/// (before, after) pairs starting from the last dim; negative pads crop.
pub fn constant_pad_nd(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(4)?;
    let x = c.tensor(0, "self")?;
    let pad = c.int_list(1, "pad")?;
    let out = c.tensor(3, "out")?;
    let rank = x.shape.len();
    let bad_pad = |reason| Error::ArgValue { arg_idx: 1, name: "pad", found: format!("{pad:?}"), reason };
    if pad.len() % 2 != 0 || pad.len() / 2 > rank {
        return Err(bad_pad("(before, after) pairs, at most one per dim"));
    }
    let shader = copy_shader(Family::Pad, &x, 0, "self")?;
    same_dtype(&out, x.dtype, 3, "out")?;
    let value = exact_f32(c.num(2, "value")?, x.dtype, 2, "value")?;
    let mut before = vec![0i64; rank];
    let mut shape = x.shape.to_vec();
    for (k, pair) in pad.chunks(2).enumerate() {
        let d = rank - 1 - k;
        let size = x.shape[d] as i64 + pair[0] + pair[1];
        if size < 0 {
            return Err(bad_pad("pads that leave every dim a size >= 0"));
        }
        before[d] = pair[0];
        shape[d] = size as u64;
    }
    check_rank(&shape)?;
    let numel = crate::plan::checked_numel(&shape)?;
    let mut steps = Vec::new();
    if numel > 0 {
        let before: Vec<i32> = before
            .iter()
            .map(|&b| i32::try_from(b).map_err(|_| Error::TooLarge { what: "pad", found: b.unsigned_abs() }))
            .collect::<Result<_>>()?;
        let params = Uniform::new()
            .u32(to_u32("numel", numel)?)
            .u32(rank as u32)
            .f32(value)
            .u32(0)
            .dims_u32(&dims_u32(&shape)?)
            .dims_u32(&dims_u32(x.shape)?)
            .dims_i32(&before)
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
