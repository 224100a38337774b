//! 4-bit weight ops: `et_vk.linear_q4gsw` (`linear_q4gsw.wgsl`) and
//! `et_vk.embedding_q4gsw` (`embedding_q4gsw.wgsl`). Packing (OPS.md §4.1):
//! u8 bytes holding two weights each, even index in the low nibble, both
//! offset by +8; symmetric group-wise f32 scales.

use crate::error::{Error, Result};
use crate::generated::shaders::Family;
use crate::plan::{
    Ctx, Dispatch, ElemType, Lowered, Step, TensorInfo, Uniform, WG_ELEMENTWISE, float_shader, grid_1d, same_dtype,
    to_u32,
};

fn shape_err(arg_idx: usize, name: &'static str, expected: String, t: &TensorInfo<'_>) -> Error {
    Error::Shape { arg_idx, name, expected, found: t.shape.to_vec() }
}

fn dtype_err(arg_idx: usize, name: &'static str, expected: &'static str, t: &TensorInfo<'_>) -> Error {
    Error::DType { arg_idx, name, expected, found: t.dtype }
}

/// Largest workgroup count along one grid dimension.
const MAX_GROUPS_PER_DIM: u64 = 65535;

/// One workgroup per output element, folded into x and y.
fn per_output_grid(total: u64) -> Result<[u32; 3]> {
    Ok([
        to_u32("workgroups", total.min(MAX_GROUPS_PER_DIM))?,
        to_u32("workgroups", total.div_ceil(MAX_GROUPS_PER_DIM))?,
        1,
    ])
}

/// The packed 4-bit weight `[N, K_packed]` and its `[G, N_pad]` scales of
/// a linear with `k` inputs, checked: returns `(n, n_pad)`.
pub(crate) fn check_q4_weight(
    k: u64,
    weights: &TensorInfo<'_>,
    w_idx: usize,
    scales: &TensorInfo<'_>,
    s_idx: usize,
    group_size: i64,
    g_idx: usize,
) -> Result<(u64, u64)> {
    if weights.dtype != ElemType::U8 {
        return Err(dtype_err(w_idx, "weights", "uint8 (packed 4-bit)", weights));
    }
    if scales.dtype != ElemType::F32 {
        return Err(dtype_err(s_idx, "weight_scales", "float32", scales));
    }
    let [n, k_packed] = weights.shape[..] else {
        return Err(shape_err(w_idx, "weights", "[N, K/2]".into(), weights));
    };
    if k_packed * 2 < k {
        return Err(shape_err(w_idx, "weights", format!("[N, {}] (K = {k})", k.div_ceil(2)), weights));
    }
    let gs = u64::try_from(group_size).ok().filter(|&g| g > 0).ok_or_else(|| Error::ArgValue {
        arg_idx: g_idx,
        name: "group_size",
        found: group_size.to_string(),
        reason: "must be positive",
    })?;
    let n_groups = k.div_ceil(gs);
    let [g, n_pad] = scales.shape[..] else {
        return Err(shape_err(s_idx, "weight_scales", "[G, N_pad]".into(), scales));
    };
    if g < n_groups || n_pad < n {
        return Err(shape_err(s_idx, "weight_scales", format!("[{n_groups}, >= {n}]"), scales));
    }
    Ok((n, n_pad))
}

/// `et_vk.linear_q4gsw.default(input [..., K], weights u8 [N, K/2],
/// weight_scales [G, N_pad], group_size, bias? [N_pad], →out [..., N])`.
pub fn linear_q4gsw(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(6)?;
    let x = c.tensor(0, "input")?;
    let weights = c.tensor(1, "weights")?;
    let scales = c.tensor(2, "weight_scales")?;
    let group_size = c.int(3, "group_size")?;
    let bias = c.opt_tensor(4, "bias")?;
    let out = c.tensor(5, "out")?;
    let shader = float_shader(Family::LinearQ4gsw, &x, 0, "input")?;
    if x.dtype != ElemType::F32 {
        return Err(dtype_err(0, "input", "float32", &x));
    }
    same_dtype(&out, x.dtype, 5, "out")?;
    let Some(&k) = x.shape.last() else { return Err(shape_err(0, "input", "[..., K]".into(), &x)) };
    let (n, n_pad) = check_q4_weight(k, &weights, 1, &scales, 2, group_size, 3)?;
    if let Some(b) = &bias {
        same_dtype(b, x.dtype, 4, "bias")?;
        if b.numel() < n {
            return Err(shape_err(4, "bias", format!("at least {n} elements"), b));
        }
    }
    let m = x.numel().checked_div(k).unwrap_or(0);
    let mut out_shape = x.shape.to_vec();
    *out_shape.last_mut().expect("rank >= 1") = n;
    let mut steps = Vec::new();
    if m * n > 0 {
        let params = Uniform::new()
            .u32(to_u32("M", m)?)
            .u32(to_u32("N", n)?)
            .u32(to_u32("K", k)?)
            .u32(to_u32("packed K", weights.shape[1])?)
            .u32(to_u32("padded N", n_pad)?)
            .u32(to_u32("group_size", group_size as u64)?)
            .u32(u32::from(bias.is_some()))
            .finish();
        steps.push(Step::Dispatch(Dispatch {
            shader,
            entry: "main",
            inputs: vec![x.id, weights.id, scales.id, bias.map_or(scales.id, |b| b.id)],
            outputs: vec![out.id],
            params,
            workgroups: per_output_grid(m * n)?,
        }));
    }
    Ok(Lowered { shapes: vec![(out.id, out_shape)], steps })
}

/// `et_vk.embedding_q4gsw.default(weight u8 [V, E/2], weight_scales [V, G],
/// group_size, indices int32, is_linear_weight, →out [..., E])`. Only the
/// linear packing (`is_linear_weight = True`, what the exporter writes).
pub fn embedding_q4gsw(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(6)?;
    let weights = c.tensor(0, "weight")?;
    let scales = c.tensor(1, "weight_scales")?;
    let group_size = c.int(2, "group_size")?;
    let indices = c.tensor(3, "indices")?;
    let linear = c.bool(4, "is_linear_weight")?;
    let out = c.tensor(5, "out")?;
    let shader = float_shader(Family::EmbeddingQ4gsw, &scales, 1, "weight_scales")?;
    if !linear {
        return Err(Error::ArgValue {
            arg_idx: 4,
            name: "is_linear_weight",
            found: "false".into(),
            reason: "only the linear packing (True) is supported",
        });
    }
    if weights.dtype != ElemType::U8 {
        return Err(dtype_err(0, "weight", "uint8 (packed 4-bit)", &weights));
    }
    if scales.dtype != ElemType::F32 {
        return Err(dtype_err(1, "weight_scales", "float32", &scales));
    }
    if indices.dtype != ElemType::I32 {
        return Err(dtype_err(3, "indices", "int32", &indices));
    }
    same_dtype(&out, scales.dtype, 5, "out")?;
    let [vocab, row_bytes] = weights.shape[..] else {
        return Err(shape_err(0, "weight", "[V, E/2]".into(), &weights));
    };
    let dim = row_bytes * 2;
    let gs = u64::try_from(group_size).ok().filter(|&g| g > 0).ok_or_else(|| Error::ArgValue {
        arg_idx: 2,
        name: "group_size",
        found: group_size.to_string(),
        reason: "must be positive",
    })?;
    let n_groups = dim.div_ceil(gs);
    if scales.shape != [vocab, n_groups] {
        return Err(shape_err(1, "weight_scales", format!("[{vocab}, {n_groups}]"), &scales));
    }
    let mut out_shape = indices.shape.to_vec();
    out_shape.push(dim);
    let numel = indices.numel() * dim;
    let mut steps = Vec::new();
    if numel > 0 {
        let params = Uniform::new()
            .u32(to_u32("output elements", numel)?)
            .u32(to_u32("embedding dim", dim)?)
            .u32(to_u32("vocabulary", vocab)?)
            .u32(to_u32("row bytes", row_bytes)?)
            .u32(to_u32("groups", n_groups)?)
            .u32(to_u32("group_size", gs)?)
            .finish();
        steps.push(Step::Dispatch(Dispatch {
            shader,
            entry: "main",
            inputs: vec![weights.id, scales.id, indices.id],
            outputs: vec![out.id],
            params,
            workgroups: grid_1d(numel, WG_ELEMENTWISE)?,
        }));
    }
    Ok(Lowered { shapes: vec![(out.id, out_shape)], steps })
}
