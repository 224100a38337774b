//! 4-bit weight ops: `et_vk.linear_q4gsw` (`linear_q4gsw.wgsl`),
//! `et_vk.embedding_q4gsw` (`embedding_q4gsw.wgsl`) and the 8da4w pair
//! `torchao.choose_qparams_affine` (`choose_qparams.wgsl`) +
//! `et_vk.linear_dq8ca_q4gsw` (`linear_dq8ca_q4gsw.wgsl`).
//!
//! Packing (OPS.md §4.1): u8 bytes holding two weights each, even index in
//! the low nibble, both offset by +8; symmetric group-wise scales in the
//! activations' float dtype. Every kernel accumulates in f32.

use crate::error::{Error, Result};
use crate::generated::shaders::Family;
use crate::plan::{
    Ctx, Dispatch, ElemType, Lowered, Step, TensorInfo, Uniform, Vid, WG_ELEMENTWISE, WG_ROWS, float_shader, grid_1d,
    grid_groups, same_dtype, to_u32,
};

fn shape_err(arg_idx: usize, name: &'static str, expected: String, t: &TensorInfo<'_>) -> Error {
    Error::Shape { arg_idx, name, expected, found: t.shape.to_vec() }
}

fn dtype_err(arg_idx: usize, name: &'static str, expected: &'static str, t: &TensorInfo<'_>) -> Error {
    Error::DType { arg_idx, name, expected, found: t.dtype }
}

/// `torch.finfo(torch.float16).smallest_normal`.
const F16_SMALLEST_NORMAL: f64 = 6.103_515_625e-5;

/// Most rows of x for the bandwidth-bound GEMV route (`q4_gemv.wgsl`).
pub const Q4_GEMV_MAX_ROWS: u64 = 4;
/// Invocations per workgroup of `q4_gemv.wgsl` and `q4_gemv_swiglu.wgsl`.
const Q4_GEMV_WG: u64 = 256;

/// Output columns per workgroup of the 4-bit GEMVs for `n` outputs: 32
/// (a subgroup of adjacent columns reading one address of x) where that
/// still makes at least 256 workgroups, else 16 or 8, so that narrow
/// layers fill the GPU too.
fn q4_gemv_cols(n: u64) -> u64 {
    match n {
        n if n >= 32 * Q4_GEMV_WG => 32,
        n if n >= 16 * Q4_GEMV_WG => 16,
        _ => 8,
    }
}

/// Most inputs (K) of the int8-activation GEMV (`q4_gemv_i8.wgsl`: `8 *
/// XQ` octets of the rounded row in workgroup memory).
pub const Q4_GEMV_I8_MAX_K: u64 = 8192;

/// Whether a one-row 4-bit GEMV of `k` inputs takes its int8-activation
/// form on a device with `caps` (the load asked for it; one row; its
/// workgroup memory holds the row).
pub(crate) fn q4_gemv_i8(caps: crate::caps::DeviceCaps, m: u64, k: u64) -> bool {
    caps.int8_activations && m == 1 && k <= Q4_GEMV_I8_MAX_K
}

/// Output tile edge of `q4_gemm.wgsl` (and its split-K and QKV forms).
pub(crate) const Q4_GEMM_TILE: u64 = 64;
/// Inputs per step along K of `q4_gemm.wgsl` (and its forms).
pub(crate) const Q4_GEMM_TK: u64 = 16;

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
    let out = c.tensor(5, "out")?;
    linear_q4gsw_into(c, &x, &out)
}

/// [`linear_q4gsw`] of the input `x` into `out`, its other arguments
/// (weights, scales, group size, bias: 1 to 4) read from `c` (a fused op
/// hands its normed input here, `etwgpu.rms_norm_linear_q4gsw`).
pub(crate) fn linear_q4gsw_into(c: &Ctx<'_>, x: &TensorInfo<'_>, out: &TensorInfo<'_>) -> Result<Lowered> {
    let weights = c.tensor(1, "weights")?;
    let scales = c.tensor(2, "weight_scales")?;
    let group_size = c.int(3, "group_size")?;
    let bias = c.opt_tensor(4, "bias")?;
    let (x, out) = (*x, *out);
    let shader = float_shader(Family::LinearQ4gsw, &x, 0, "input")?;
    same_dtype(&scales, x.dtype, 2, "weight_scales")?;
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
    let inputs = vec![x.id, weights.id, scales.id, bias.map_or(scales.id, |b| b.id)];
    let gs = group_size as u64;
    let q = Q4Linear { m, n, k, n_pad, group_size: gs };
    let fast = m * n > 0 && q4_fast(k, weights.shape[1], gs);
    let split = if fast && m > Q4_GEMV_MAX_ROWS {
        // Declared at every prefill lowering (sized by the one at the
        // maximum shapes); used where the output tiles leave SMs idle.
        use crate::ops::gemm::{SPLIT_K_SCRATCH, q4_coop, q4_split_k_steps, split_k_scratch_bytes};
        let coop = q4_coop(c, &x, k, gs);
        steps.push(Step::Scratch { slot: SPLIT_K_SCRATCH, bytes: split_k_scratch_bytes(m, n, coop) });
        let layout = u32::from(c.q4_word_major(weights.id));
        q4_split_k_steps(c, &x, &q, coop, bias.is_some(), layout, &inputs, out.id)?
    } else {
        None
    };
    if let Some(split) = split {
        steps.extend(split);
    } else if fast {
        steps.push(Step::Dispatch(q4_fast_dispatch(
            c,
            &x,
            &q,
            Q4Route::Linear { has_bias: bias.is_some() },
            inputs,
            vec![out.id],
        )?));
    } else if m * n > 0 {
        let params = Uniform::new()
            .u32(to_u32("M", m)?)
            .u32(to_u32("N", n)?)
            .u32(to_u32("K", k)?)
            .u32(to_u32("packed K", weights.shape[1])?)
            .u32(to_u32("padded N", n_pad)?)
            .u32(to_u32("group_size", gs)?)
            .u32(u32::from(bias.is_some()))
            .finish();
        steps.push(Step::Dispatch(Dispatch {
            shader: shader.into(),
            entry: "main",
            inputs,
            outputs: vec![out.id],
            params,
            workgroups: grid_groups(m * n)?,
        }));
    }
    Ok(Lowered { shapes: vec![(out.id, out_shape)], steps })
}

/// Whether the fast 4-bit routes (`q4_gemv.wgsl`, `q4_gemm.wgsl` and their
/// SwiGLU forms) take a linear of `k` inputs with rows of `k_packed` bytes
/// and groups of `group_size`: they read whole 16-byte words of a row, each
/// inside one scale group.
pub fn q4_fast(k: u64, k_packed: u64, group_size: u64) -> bool {
    k.is_multiple_of(32) && group_size.is_multiple_of(32) && k_packed == k / 2
}

/// The sizes of one 4-bit linear (or fused pair) on the fast routes.
pub(crate) struct Q4Linear {
    pub m: u64,
    pub n: u64,
    pub k: u64,
    pub n_pad: u64,
    pub group_size: u64,
}

/// What a fast-route dispatch computes.
pub(crate) enum Q4Route {
    /// One linear; inputs `[x, weights, scales, bias or scales]`.
    Linear { has_bias: bool },
    /// `silu(gate) * up`; inputs `[x, w_gate, s_gate, w_up, s_up]`.
    Swiglu,
}

/// The fast-route dispatch (GEMV for at most [`Q4_GEMV_MAX_ROWS`] rows,
/// beyond them the cooperative-matrix GEMM where `c`'s device has it, else
/// the tiled GEMM) of `q`, which [`q4_fast`] accepted.
pub(crate) fn q4_fast_dispatch(
    c: &Ctx<'_>,
    x: &TensorInfo<'_>,
    q: &Q4Linear,
    route: Q4Route,
    inputs: Vec<Vid>,
    outputs: Vec<Vid>,
) -> Result<Dispatch> {
    let gemv = q.m <= Q4_GEMV_MAX_ROWS;
    // Bit 0: the (first) weight is word-major; bit 1: the second (SwiGLU's up).
    let word_major = |i: usize| inputs.get(i).is_some_and(|&v| c.q4_word_major(v));
    let layout = match route {
        Q4Route::Linear { .. } => u32::from(word_major(1)),
        Q4Route::Swiglu => u32::from(word_major(1)) | (u32::from(word_major(3)) << 1),
    };
    if !gemv && crate::ops::gemm::q4_coop(c, x, q.k, q.group_size) {
        return crate::ops::gemm::q4_coop_dispatch(x, q, route, layout, inputs, outputs);
    }
    let family = match (&route, gemv) {
        (Q4Route::Linear { .. }, true) if q4_gemv_i8(c.caps(), q.m, q.k) => Family::Q4GemvI8,
        (Q4Route::Linear { .. }, true) => Family::Q4Gemv,
        (Q4Route::Linear { .. }, false) => Family::Q4Gemm,
        (Q4Route::Swiglu, true) => Family::Q4GemvSwiglu,
        (Q4Route::Swiglu, false) => Family::Q4GemmSwiglu,
    };
    let tiles_n = q.n.div_ceil(Q4_GEMM_TILE);
    let mut params = Uniform::new()
        .u32(to_u32("M", q.m)?)
        .u32(to_u32("N", q.n)?)
        .u32(to_u32("K", q.k)?)
        .u32(to_u32("padded N", q.n_pad)?)
        .u32(to_u32("group_size", q.group_size)?);
    if let Q4Route::Linear { has_bias } = route {
        params = params.u32(u32::from(has_bias));
    }
    let cols = q4_gemv_cols(q.n);
    params = if gemv {
        params.u32(to_u32("columns per workgroup", cols)?)
    } else {
        params.u32(to_u32("tiles along N", tiles_n)?)
    };
    params = params.u32(layout);
    Ok(Dispatch {
        shader: float_shader(family, x, 0, "input")?.into(),
        entry: "main",
        inputs,
        outputs,
        params: params.finish(),
        workgroups: if gemv {
            grid_groups(q.n.div_ceil(cols))?
        } else {
            grid_groups(q.m.div_ceil(Q4_GEMM_TILE) * tiles_n)?
        },
    })
}

/// The sizes of a fused 4-bit Q/K/V on the fast routes: `ns` and
/// `n_pads` are the projections' output features and scale row lengths.
pub(crate) struct Q4Qkv {
    pub m: u64,
    pub k: u64,
    pub group_size: u64,
    pub ns: [u64; 3],
    pub n_pads: [u64; 3],
}

impl Q4Qkv {
    /// The uniforms of the one-dispatch kernels (`q4_gemv_qkv.wgsl`,
    /// `q4_gemm_qkv.wgsl`, `q4_gemm_coop_qkv*.wgsl`): M, K, the group,
    /// then `fourth` (the GEMV's columns per workgroup, the GEMMs' tiles
    /// along N), the Ns, the layout bits, the padded Ns, and where K's and
    /// V's workgroups (GEMV) or tiles along N (GEMMs) start, from `units`,
    /// each projection's count of them.
    fn params(&self, fourth: u64, units: [u64; 3], layout: u32) -> Result<Vec<u8>> {
        let mut params = Uniform::new()
            .u32(to_u32("M", self.m)?)
            .u32(to_u32("K", self.k)?)
            .u32(to_u32("group_size", self.group_size)?)
            .u32(to_u32("workgroups or tiles", fourth)?);
        for n in self.ns {
            params = params.u32(to_u32("N", n)?);
        }
        params = params.u32(layout);
        for n_pad in self.n_pads {
            params = params.u32(to_u32("padded N", n_pad)?);
        }
        Ok(params
            .u32(to_u32("workgroups or tiles", units[0])?)
            .u32(to_u32("workgroups or tiles", units[0] + units[1])?)
            .u32(0)
            .u32(0)
            .u32(0)
            .finish())
    }

    /// [`Self::params`] of the GEMMs, whose projections have `tiles`
    /// tiles along N.
    pub(crate) fn gemm_params(&self, tiles: [u64; 3], layout: u32) -> Result<Vec<u8>> {
        self.params(tiles.iter().sum(), tiles, layout)
    }
}

/// The one-dispatch route of a fused 4-bit Q/K/V: the GEMV
/// (`q4_gemv_qkv.wgsl`) for at most [`Q4_GEMV_MAX_ROWS`] rows, past them
/// the cooperative-matrix GEMM where `c`'s device has it
/// ([`crate::ops::gemm::q4_coop_qkv_dispatch`]), else the tiled GEMM
/// (`q4_gemm_qkv.wgsl`); the three projections side by side, with no
/// barrier between them. `None` where a projection has no outputs (three
/// fast-route dispatches then). Inputs `[x, w_q, s_q, w_k, s_k, w_v, s_v]`,
/// outputs `[q, k, v]`.
pub(crate) fn q4_qkv_dispatch(
    c: &Ctx<'_>,
    x: &TensorInfo<'_>,
    q: &Q4Qkv,
    inputs: Vec<Vid>,
    outputs: Vec<Vid>,
) -> Result<Option<Dispatch>> {
    if q.ns.contains(&0) || q.m == 0 {
        return Ok(None);
    }
    // Bit j: weight j is word-major.
    let layout = (0..3).fold(0u32, |bits, j| bits | (u32::from(c.q4_word_major(inputs[1 + 2 * j])) << j));
    if q.m > Q4_GEMV_MAX_ROWS {
        if crate::ops::gemm::q4_coop(c, x, q.k, q.group_size) {
            return crate::ops::gemm::q4_coop_qkv_dispatch(x, q, layout, inputs, outputs).map(Some);
        }
        let tiles = q.ns.map(|n| n.div_ceil(Q4_GEMM_TILE));
        return Ok(Some(Dispatch {
            shader: float_shader(Family::Q4GemmQkv, x, 0, "input")?.into(),
            entry: "main",
            inputs,
            outputs,
            params: q.gemm_params(tiles, layout)?,
            workgroups: grid_groups(q.m.div_ceil(Q4_GEMM_TILE) * tiles.iter().sum::<u64>())?,
        }));
    }
    let cols = q4_gemv_cols(q.ns.iter().sum());
    let groups = q.ns.map(|n| n.div_ceil(cols));
    let params = q.params(cols, groups, layout)?;
    Ok(Some(Dispatch {
        shader: float_shader(Family::Q4GemvQkv, x, 0, "input")?.into(),
        entry: "main",
        inputs,
        outputs,
        params,
        workgroups: grid_groups(groups.iter().sum())?,
    }))
}

/// `et_vk.embedding_q4gsw.default(weight u8 [V, E/2], weight_scales [V, G],
/// group_size, indices int32, is_linear_weight, →out [..., E])`. Only the
/// linear packing (`is_linear_weight = True`, what the exporter writes).
pub fn embedding_q4gsw(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(6)?;
    embedding_q4gsw_with(c, 0)
}

/// `etwgpu.embedding_q4gsw_rows.default(weight [n, E/2], weight_scales
/// [n, G], group_size, indices, is_linear_weight, row_start, →out [..., E])`:
/// rows `row_start .. row_start + n` of an `et_vk.embedding_q4gsw` table
/// split past the binding limit (`etwgpu_graph::split`); indices outside
/// them give zeros, so the sum of the chunks' outputs is the whole
/// embedding.
pub fn embedding_q4gsw_rows(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(7)?;
    let start = crate::ops::index::non_negative(c, 5, "row_start")?;
    embedding_q4gsw_with(c, start)
}

/// The 4-bit embedding with its table's first row `row_start`; the output
/// is the last argument.
fn embedding_q4gsw_with(c: &Ctx<'_>, row_start: u64) -> Result<Lowered> {
    let weights = c.tensor(0, "weight")?;
    let scales = c.tensor(1, "weight_scales")?;
    let group_size = c.int(2, "group_size")?;
    let indices = c.tensor(3, "indices")?;
    let linear = c.bool(4, "is_linear_weight")?;
    let out_idx = c.n_args() - 1;
    let out = c.tensor(out_idx, "out")?;
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
    if indices.dtype != ElemType::I32 {
        return Err(dtype_err(3, "indices", "int32", &indices));
    }
    same_dtype(&out, scales.dtype, out_idx, "out")?;
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
            .u32(to_u32("first row", row_start)?)
            .finish();
        steps.push(Step::Dispatch(Dispatch {
            shader: shader.into(),
            entry: "main",
            inputs: vec![weights.id, scales.id, indices.id],
            outputs: vec![out.id],
            params,
            workgroups: grid_1d(numel, WG_ELEMENTWISE)?,
        }));
    }
    Ok(Lowered { shapes: vec![(out.id, out_shape)], steps })
}

/// `torchao.choose_qparams_affine.default(input, mapping_type, block_size,
/// target_dtype, quant_min, quant_max, eps?, scale_dtype, zero_point_dtype,
/// keepdim, →[scale (the input's float dtype), zero_point int8])`: only ASYMMETRIC over per-row
/// blocks `[1, ..., 1, K]`.
pub fn choose_qparams_affine(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(11)?;
    let x = c.tensor(0, "input")?;
    let mapping = c.opt_str(1, "mapping_type")?;
    let block_size = c.int_list(2, "block_size")?;
    let quant_min = c.opt_num(4, "quant_min")?.unwrap_or(-128.0);
    let quant_max = c.opt_num(5, "quant_max")?.unwrap_or(127.0);
    let eps = c.opt_num(6, "eps")?;
    let keepdim = c.bool(9, "keepdim")?;
    let outs = c.tensor_list(10, "out")?;
    let [scale, zero_point] = outs[..] else {
        return Err(Error::ArgKind {
            arg_idx: 10,
            name: "out",
            expected: "ValueList of 2 tensors",
            found: "ValueList",
        });
    };
    let shader = float_shader(Family::ChooseQparams, &x, 0, "input")?;
    // torchao's default: the smallest normal of the input's dtype (so a
    // float16 scale of an all-zero row stays nonzero).
    let eps = eps.unwrap_or(if x.dtype == ElemType::F16 { F16_SMALLEST_NORMAL } else { f64::from(f32::MIN_POSITIVE) });
    if mapping != Some("ASYMMETRIC") {
        return Err(Error::ArgValue {
            arg_idx: 1,
            name: "mapping_type",
            found: format!("{mapping:?}"),
            reason: "only ASYMMETRIC is supported",
        });
    }
    same_dtype(&scale, x.dtype, 10, "scale")?;
    if zero_point.dtype != ElemType::I8 {
        return Err(dtype_err(10, "zero_point", "int8", &zero_point));
    }
    let Some(&k) = x.shape.last() else { return Err(shape_err(0, "input", "[..., K]".into(), &x)) };
    let per_row = block_size.len() == x.shape.len()
        && block_size.last().is_some_and(|&b| u64::try_from(b) == Ok(k))
        && block_size[..block_size.len() - 1].iter().all(|&b| b == 1);
    if !per_row {
        return Err(Error::ArgValue {
            arg_idx: 2,
            name: "block_size",
            found: format!("{block_size:?}"),
            reason: "only per-row blocks [1, ..., 1, K] are supported",
        });
    }
    let in_range = |q: f64| (-128.0..=127.0).contains(&q) && q.fract() == 0.0;
    if !(in_range(quant_min) && in_range(quant_max) && quant_min < quant_max) {
        return Err(Error::ArgValue {
            arg_idx: 4,
            name: "quant_min",
            found: format!("{quant_min}..{quant_max}"),
            reason: "the int8 range must lie within -128..127",
        });
    }
    let rows = x.numel().checked_div(k).unwrap_or(0);
    let mut out_shape = x.shape[..x.shape.len() - 1].to_vec();
    if keepdim {
        out_shape.push(1);
    }
    let mut steps = Vec::new();
    if rows > 0 {
        let params = Uniform::new()
            .u32(to_u32("rows", rows)?)
            .u32(to_u32("row size", k)?)
            .i32(quant_min as i32)
            .i32(quant_max as i32)
            .f32(eps as f32)
            .finish();
        steps.push(Step::Dispatch(Dispatch {
            shader: shader.into(),
            entry: "main",
            inputs: vec![x.id],
            outputs: vec![scale.id, zero_point.id],
            params,
            workgroups: grid_1d(rows.div_ceil(4), WG_ROWS)?,
        }));
    }
    Ok(Lowered { shapes: vec![(scale.id, out_shape.clone()), (zero_point.id, out_shape)], steps })
}

/// The checked activation arguments of the 8da4w ops: the input
/// `[..., K]`, its per-row `input_scale [M]` (the input's dtype) and int8
/// `input_zp [M]` (arguments 0 to 2); returns `(m, k)`.
fn check_dq8_rows(x: &TensorInfo<'_>, in_scale: &TensorInfo<'_>, in_zp: &TensorInfo<'_>) -> Result<(u64, u64)> {
    let Some(&k) = x.shape.last() else { return Err(shape_err(0, "input", "[..., K]".into(), x)) };
    let m = x.numel().checked_div(k).unwrap_or(0);
    same_dtype(in_scale, x.dtype, 1, "input_scale")?;
    if in_zp.dtype != ElemType::I8 {
        return Err(dtype_err(2, "input_zp", "int8", in_zp));
    }
    for (t, idx, name) in [(in_scale, 1, "input_scale"), (in_zp, 2, "input_zp")] {
        if t.numel() != m {
            return Err(shape_err(idx, name, format!("{m} elements (one per row of input)"), t));
        }
    }
    Ok((m, k))
}

/// `etwgpu.dq8_rows.default(input [..., K], input_scale [M], input_zp [M]
/// int8, →out [..., K])`: the activation half of
/// `et_vk.linear_dq8ca_q4gsw`, each row rounded to its int8 grid and back
/// (`dq8_rows.wgsl`). Fusion splits each 8da4w linear into this and an
/// `et_vk.linear_q4gsw` of its output, so that the linears of one input
/// share one rounding and fuse as the 4-bit linears do.
pub fn dq8_rows(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(4)?;
    let x = c.tensor(0, "input")?;
    let in_scale = c.tensor(1, "input_scale")?;
    let in_zp = c.tensor(2, "input_zp")?;
    let out = c.tensor(3, "out")?;
    same_dtype(&out, x.dtype, 3, "out")?;
    let (m, k) = check_dq8_rows(&x, &in_scale, &in_zp)?;
    let mut steps = Vec::new();
    if m * k > 0 {
        let params = Uniform::new().u32(to_u32("M", m)?).u32(to_u32("K", k)?).u32(0).u32(0).finish();
        steps.push(Step::Dispatch(Dispatch {
            shader: float_shader(Family::Dq8Rows, &x, 0, "input")?.into(),
            entry: "main",
            inputs: vec![x.id, in_scale.id, in_zp.id],
            outputs: vec![out.id],
            params,
            workgroups: grid_1d(m * k, 256)?,
        }));
    }
    Ok(Lowered { shapes: vec![(out.id, x.shape.to_vec())], steps })
}

/// `et_vk.linear_dq8ca_q4gsw.default(input [..., K], input_scale [M],
/// input_zp [M] int8, weights u8 [N, K/2], weight_sums int32 [G, N],
/// weight_scales [G, N_pad], group_size, bias?, →out [..., N])`. The
/// weight sums are not needed: the kernel subtracts the zero point before
/// multiplying. One dispatch of `linear_dq8ca_q4gsw.wgsl`, a workgroup an
/// output element: the op as exported (`--no-fuse`). Fusion splits it
/// into [`dq8_rows`] and a `linear_q4gsw`, which take the fast 4-bit
/// routes.
pub fn linear_dq8ca_q4gsw(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(9)?;
    let x = c.tensor(0, "input")?;
    let in_scale = c.tensor(1, "input_scale")?;
    let in_zp = c.tensor(2, "input_zp")?;
    let weights = c.tensor(3, "weights")?;
    c.tensor(4, "weight_sums")?;
    let scales = c.tensor(5, "weight_scales")?;
    let group_size = c.int(6, "group_size")?;
    let bias = c.opt_tensor(7, "bias")?;
    let out = c.tensor(8, "out")?;
    let shader = float_shader(Family::LinearDq8caQ4gsw, &x, 0, "input")?;
    same_dtype(&out, x.dtype, 8, "out")?;
    let (m, k) = check_dq8_rows(&x, &in_scale, &in_zp)?;
    same_dtype(&scales, x.dtype, 5, "weight_scales")?;
    let (n, n_pad) = check_q4_weight(k, &weights, 3, &scales, 5, group_size, 6)?;
    if let Some(b) = &bias {
        same_dtype(b, x.dtype, 7, "bias")?;
        if b.numel() < n {
            return Err(shape_err(7, "bias", format!("at least {n} elements"), b));
        }
    }
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
            shader: shader.into(),
            entry: "main",
            inputs: vec![x.id, in_scale.id, in_zp.id, weights.id, scales.id, bias.map_or(scales.id, |b| b.id)],
            outputs: vec![out.id],
            params,
            workgroups: grid_groups(m * n)?,
        }));
    }
    Ok(Lowered { shapes: vec![(out.id, out_shape)], steps })
}
