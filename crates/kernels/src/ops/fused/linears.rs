//! The fused linears: `etwgpu.linear_qkv` and `etwgpu.linear_swiglu`
//! (float weights) and their `_q4gsw_` forms (`et_vk.linear_q4gsw`
//! weights), each one dispatch over one input.

use crate::error::{Error, Result};
use crate::generated::shaders::Family;
use crate::ops::matmul::{GEMV_MAX_ROWS, gemv_cols};
use crate::ops::quant::{Q4Linear, Q4Qkv, Q4Route, check_q4_weight, q4_fast, q4_fast_dispatch, q4_qkv_dispatch};
use crate::plan::{
    Ctx, Dispatch, Lowered, MATMUL_TILE, Step, TensorInfo, Uniform, Vid, float_shader, grid_groups, same_dtype, to_u32,
};

fn shape_err(arg_idx: usize, name: &'static str, expected: String, t: &TensorInfo<'_>) -> Error {
    Error::Shape { arg_idx, name, expected, found: t.shape.to_vec() }
}

/// A linear weight `[N, K]` (and its bias `[N]`, if any) of a fused
/// linear: returns N.
fn check_weight(
    x: &TensorInfo<'_>,
    k: u64,
    w: &TensorInfo<'_>,
    w_idx: usize,
    bias: Option<&TensorInfo<'_>>,
) -> Result<u64> {
    same_dtype(w, x.dtype, w_idx, "weight")?;
    let [n, k2] = w.shape[..] else { return Err(shape_err(w_idx, "weight", "rank 2".into(), w)) };
    if k2 != k {
        return Err(shape_err(w_idx, "weight", format!("[N, {k}]"), w));
    }
    if let Some(b) = bias {
        same_dtype(b, x.dtype, w_idx + 1, "bias")?;
        if b.shape != [n] {
            return Err(shape_err(w_idx + 1, "bias", format!("[{n}]"), b));
        }
    }
    Ok(n)
}

/// The input `[..., K]` of a fused linear: `(M, K, leading dims)`.
fn linear_input<'a>(x: &TensorInfo<'a>) -> Result<(u64, u64, &'a [u64])> {
    let Some((&k, lead)) = x.shape.split_last() else {
        return Err(shape_err(0, "input", "rank >= 1".into(), x));
    };
    Ok((lead.iter().product(), k, lead))
}

/// How a fused float linear (QKV or SwiGLU) of `m` rows and `k` inputs
/// runs. Each writes the same uniforms, the columns a workgroup
/// ([`gemv_cols`]) last, which only the streaming kernels read.
#[derive(Clone, Copy)]
enum FloatRoute {
    /// The streaming GEMV (`_vec4`): at most [`GEMV_MAX_ROWS`] rows, K a
    /// multiple of 4.
    Stream,
    /// One workgroup an output element: few rows, any other K.
    Gemv,
    /// The tiled kernel: more rows.
    Tiled,
}

impl FloatRoute {
    fn of(m: u64, k: u64) -> Self {
        match (m <= GEMV_MAX_ROWS, k.is_multiple_of(4)) {
            (true, true) => Self::Stream,
            (true, false) => Self::Gemv,
            (false, _) => Self::Tiled,
        }
    }

    /// The family of this route among the three.
    fn pick(self, stream: Family, gemv: Family, tiled: Family) -> Family {
        match self {
            Self::Stream => stream,
            Self::Gemv => gemv,
            Self::Tiled => tiled,
        }
    }
}

/// The three outputs of a fused QKV call.
fn qkv_outputs<'a>(c: &Ctx<'a>, idx: usize, x: &TensorInfo<'_>) -> Result<Vec<TensorInfo<'a>>> {
    let outs = c.tensor_list(idx, "out")?;
    if outs.len() != 3 {
        return Err(Error::ArgValue {
            arg_idx: idx,
            name: "out",
            found: format!("{} tensors", outs.len()),
            reason: "expected 3 (q, k, v)",
        });
    }
    for o in &outs {
        same_dtype(o, x.dtype, idx, "out")?;
    }
    Ok(outs)
}

/// `etwgpu.linear_qkv.default(input [..., K], w_q [Nq, K], b_q? [Nq], w_k,
/// b_k?, w_v, b_v?, →[q [..., Nq], k, v])`.
pub fn linear_qkv(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(8)?;
    let x = c.tensor(0, "input")?;
    let outs = qkv_outputs(c, 7, &x)?;
    linear_qkv_into(c, &x, &outs)
}

/// [`linear_qkv`] of the input `x` into `outs` (q, k, v, checked by the
/// caller), its weights and biases (1 to 6) read from `c` (a fused op
/// hands its normed input here, `etwgpu.rms_norm_linear_qkv`).
pub(crate) fn linear_qkv_into(c: &Ctx<'_>, x: &TensorInfo<'_>, outs: &[TensorInfo<'_>]) -> Result<Lowered> {
    let x = *x;
    let (m, k, lead) = linear_input(&x)?;
    let mut ns = [0u64; 3];
    let mut weights = Vec::with_capacity(3);
    let mut biases = Vec::with_capacity(3);
    let mut has_bias = 0u32;
    for (j, n) in ns.iter_mut().enumerate() {
        let w = c.tensor(1 + 2 * j, "weight")?;
        let b = c.opt_tensor(2 + 2 * j, "bias")?;
        *n = check_weight(&x, k, &w, 1 + 2 * j, b.as_ref())?;
        if b.is_some() {
            has_bias |= 1 << j;
        }
        biases.push(b.map_or(w.id, |b| b.id));
        weights.push(w);
    }
    let route = FloatRoute::of(m, k);
    let family = route.pick(Family::GemvQkvVec4, Family::GemvQkv, Family::LinearQkv);
    let shader = float_shader(family, &x, 0, "input")?;
    let shapes: Vec<(Vid, Vec<u64>)> = outs
        .iter()
        .zip(ns)
        .map(|(o, n)| {
            let mut s = lead.to_vec();
            s.push(n);
            (o.id, s)
        })
        .collect();
    // Output columns of the three projections together, and elements.
    let columns: u64 = ns.iter().sum();
    let total = columns * m;
    let mut steps = Vec::new();
    if total > 0 {
        let u = |what, x| to_u32(what, x);
        let cols = gemv_cols(columns, k);
        let params = Uniform::new()
            .u32(u("M", m)?)
            .u32(u("K", k)?)
            .u32(u("N", ns[0])?)
            .u32(u("N", ns[1])?)
            .u32(u("N", ns[2])?)
            .u32(has_bias)
            .u32(u("columns a workgroup", cols)?)
            .finish();
        let workgroups = match route {
            FloatRoute::Stream => grid_groups(columns.div_ceil(cols))?,
            FloatRoute::Gemv => grid_groups(total)?,
            FloatRoute::Tiled => {
                let tile = u64::from(MATMUL_TILE);
                let n_max = ns.iter().copied().max().unwrap_or(0);
                [u("workgroups along N", n_max.div_ceil(tile))?, u("workgroups along M", m.div_ceil(tile))?, 3]
            }
        };
        let mut inputs = vec![x.id];
        inputs.extend(weights.iter().map(|w| w.id));
        inputs.extend(biases);
        steps.push(Step::Dispatch(Dispatch {
            shader: shader.into(),
            entry: "main",
            inputs,
            outputs: outs.iter().map(|o| o.id).collect(),
            params,
            workgroups,
        }));
    }
    Ok(Lowered { shapes, steps })
}

/// `etwgpu.linear_swiglu.default(input [..., K], w_gate [N, K], b_gate?,
/// w_up [N, K], b_up?, →out [..., N])`.
pub fn linear_swiglu(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(6)?;
    let x = c.tensor(0, "input")?;
    let out = c.tensor(5, "out")?;
    same_dtype(&out, x.dtype, 5, "out")?;
    linear_swiglu_into(c, &x, &out)
}

/// [`linear_swiglu`] of the input `x` into `out` (checked by the caller),
/// its weights and biases (1 to 4) read from `c` (a fused op hands its
/// normed input here, `etwgpu.rms_norm_linear_swiglu`).
pub(crate) fn linear_swiglu_into(c: &Ctx<'_>, x: &TensorInfo<'_>, out: &TensorInfo<'_>) -> Result<Lowered> {
    let (x, out) = (*x, *out);
    let (m, k, lead) = linear_input(&x)?;
    let wg = c.tensor(1, "w_gate")?;
    let bg = c.opt_tensor(2, "b_gate")?;
    let wu = c.tensor(3, "w_up")?;
    let bu = c.opt_tensor(4, "b_up")?;
    let n = check_weight(&x, k, &wg, 1, bg.as_ref())?;
    if check_weight(&x, k, &wu, 3, bu.as_ref())? != n {
        return Err(shape_err(3, "w_up", format!("[{n}, {k}] (the gate's shape)"), &wu));
    }
    let route = FloatRoute::of(m, k);
    let family = route.pick(Family::GemvSwigluVec4, Family::GemvSwiglu, Family::LinearSwiglu);
    let shader = float_shader(family, &x, 0, "input")?;
    let mut shape = lead.to_vec();
    shape.push(n);
    let mut steps = Vec::new();
    if m * n > 0 {
        let u = |what, x| to_u32(what, x);
        let has_bias = u32::from(bg.is_some()) | u32::from(bu.is_some()) << 1;
        let cols = gemv_cols(n, k);
        let params = Uniform::new()
            .u32(u("M", m)?)
            .u32(u("N", n)?)
            .u32(u("K", k)?)
            .u32(has_bias)
            .u32(u("columns a workgroup", cols)?)
            .finish();
        let workgroups = match route {
            FloatRoute::Stream => grid_groups(n.div_ceil(cols))?,
            FloatRoute::Gemv => grid_groups(m * n)?,
            FloatRoute::Tiled => {
                let tile = u64::from(MATMUL_TILE);
                [u("workgroups along N", n.div_ceil(tile))?, u("workgroups along M", m.div_ceil(tile))?, 1]
            }
        };
        steps.push(Step::Dispatch(Dispatch {
            shader: shader.into(),
            entry: "main",
            inputs: vec![x.id, wg.id, bg.map_or(wg.id, |b| b.id), wu.id, bu.map_or(wu.id, |b| b.id)],
            outputs: vec![out.id],
            params,
            workgroups,
        }));
    }
    Ok(Lowered { shapes: vec![(out.id, shape)], steps })
}

/// `etwgpu.linear_q4gsw_qkv.default(input [..., K], group_size, w_q u8
/// [Nq, K/2], s_q [G, Nq_pad], w_k, s_k, w_v, s_v, →[q [..., Nq], k, v])`.
pub fn linear_q4gsw_qkv(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(9)?;
    let x = c.tensor(0, "input")?;
    let outs = qkv_outputs(c, 8, &x)?;
    linear_q4gsw_qkv_into(c, &x, &outs)
}

/// [`linear_q4gsw_qkv`] of the input `x` into `outs` (q, k, v, checked by
/// the caller), its other arguments (group size, weights and scales: 1 to
/// 7) read from `c` (a fused op hands its normed input here,
/// `etwgpu.rms_norm_linear_q4gsw_qkv`).
pub(crate) fn linear_q4gsw_qkv_into(c: &Ctx<'_>, x: &TensorInfo<'_>, outs: &[TensorInfo<'_>]) -> Result<Lowered> {
    let x = *x;
    let group_size = c.int(1, "group_size")?;
    let shader = float_shader(Family::LinearQ4gswQkv, &x, 0, "input")?;
    let Some(&k) = x.shape.last() else { return Err(shape_err(0, "input", "[..., K]".into(), &x)) };
    let m = x.numel().checked_div(k).unwrap_or(0);
    let mut ns = [0u64; 3];
    let mut k_packed = [0u64; 3];
    let mut n_pads = [0u64; 3];
    let mut inputs = vec![x.id];
    for j in 0..3 {
        let w = c.tensor(2 + 2 * j, "weights")?;
        let s = c.tensor(3 + 2 * j, "weight_scales")?;
        same_dtype(&s, x.dtype, 3 + 2 * j, "weight_scales")?;
        (ns[j], n_pads[j]) = check_q4_weight(k, &w, 2 + 2 * j, &s, 3 + 2 * j, group_size, 1)?;
        k_packed[j] = w.shape[1];
        inputs.extend([w.id, s.id]);
    }
    let shapes: Vec<(Vid, Vec<u64>)> = outs
        .iter()
        .zip(ns)
        .map(|(o, n)| {
            let mut s = x.shape.to_vec();
            *s.last_mut().expect("rank >= 1") = n;
            (o.id, s)
        })
        .collect();
    let total: u64 = ns.iter().sum::<u64>() * m;
    let mut steps = Vec::new();
    let gs = group_size as u64;
    let fast = total > 0 && (0..3).all(|j| q4_fast(k, k_packed[j], gs));
    let out_ids: Vec<Vid> = outs.iter().map(|o| o.id).collect();
    let one = if fast {
        let q = Q4Qkv { m, k, group_size: gs, ns, n_pads };
        q4_qkv_dispatch(c, &x, &q, inputs.clone(), out_ids)?
    } else {
        None
    };
    if let Some(d) = one {
        steps.push(Step::Dispatch(d));
    } else if fast {
        // A projection without outputs: the fast 4-bit routes beat one
        // slow kernel for all three, one fast dispatch per projection.
        for j in 0..3 {
            let q = Q4Linear { m, n: ns[j], k, n_pad: n_pads[j], group_size: gs };
            let (w, sc) = (inputs[1 + 2 * j], inputs[2 + 2 * j]);
            let d = q4_fast_dispatch(
                c,
                &x,
                &q,
                Q4Route::Linear { has_bias: false },
                vec![x.id, w, sc, sc],
                vec![outs[j].id],
            )?;
            steps.push(Step::Dispatch(d));
        }
    } else if total > 0 {
        let u = |what, x| to_u32(what, x);
        let mut params = Uniform::new().u32(u("M", m)?).u32(u("K", k)?).u32(u("group_size", group_size as u64)?).u32(0);
        for xs in [ns, k_packed, n_pads] {
            for v in xs {
                params = params.u32(u("weight dims", v)?);
            }
            params = params.u32(0);
        }
        steps.push(Step::Dispatch(Dispatch {
            shader: shader.into(),
            entry: "main",
            inputs,
            outputs: outs.iter().map(|o| o.id).collect(),
            params: params.finish(),
            workgroups: grid_groups(total)?,
        }));
    }
    Ok(Lowered { shapes, steps })
}

/// `etwgpu.linear_q4gsw_swiglu.default(input [..., K], group_size, w_gate u8
/// [N, K/2], s_gate [G, N_pad], w_up, s_up, →out [..., N])`.
pub fn linear_q4gsw_swiglu(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(7)?;
    let x = c.tensor(0, "input")?;
    let out = c.tensor(6, "out")?;
    linear_q4gsw_swiglu_into(c, &x, &out)
}

/// [`linear_q4gsw_swiglu`] of the input `x` into `out`, its other
/// arguments (group size, gate and up weights and scales: 1 to 5) read
/// from `c` (a fused op hands its normed input here,
/// `etwgpu.rms_norm_linear_q4gsw_swiglu`).
pub(crate) fn linear_q4gsw_swiglu_into(c: &Ctx<'_>, x: &TensorInfo<'_>, out: &TensorInfo<'_>) -> Result<Lowered> {
    let (x, out) = (*x, *out);
    let group_size = c.int(1, "group_size")?;
    same_dtype(&out, x.dtype, 6, "out")?;
    let shader = float_shader(Family::LinearQ4gswSwiglu, &x, 0, "input")?;
    let Some(&k) = x.shape.last() else { return Err(shape_err(0, "input", "[..., K]".into(), &x)) };
    let m = x.numel().checked_div(k).unwrap_or(0);
    let (wg, sg) = (c.tensor(2, "w_gate")?, c.tensor(3, "s_gate")?);
    let (wu, su) = (c.tensor(4, "w_up")?, c.tensor(5, "s_up")?);
    same_dtype(&sg, x.dtype, 3, "s_gate")?;
    same_dtype(&su, x.dtype, 5, "s_up")?;
    let (n, n_pad) = check_q4_weight(k, &wg, 2, &sg, 3, group_size, 1)?;
    check_q4_weight(k, &wu, 4, &su, 5, group_size, 1)?;
    if wu.shape != wg.shape {
        return Err(shape_err(4, "w_up", format!("{:?} (the gate's shape)", wg.shape), &wu));
    }
    if su.shape != sg.shape {
        return Err(shape_err(5, "s_up", format!("{:?} (the gate's shape)", sg.shape), &su));
    }
    let mut shape = x.shape.to_vec();
    *shape.last_mut().expect("rank >= 1") = n;
    let mut steps = Vec::new();
    let gs = group_size as u64;
    if m * n > 0 && q4_fast(k, wg.shape[1], gs) {
        let q = Q4Linear { m, n, k, n_pad, group_size: gs };
        let inputs = vec![x.id, wg.id, sg.id, wu.id, su.id];
        steps.push(Step::Dispatch(q4_fast_dispatch(c, &x, &q, Q4Route::Swiglu, inputs, vec![out.id])?));
    } else if m * n > 0 {
        let u = |what, x| to_u32(what, x);
        let params = Uniform::new()
            .u32(u("M", m)?)
            .u32(u("N", n)?)
            .u32(u("K", k)?)
            .u32(u("packed K", wg.shape[1])?)
            .u32(u("padded N", n_pad)?)
            .u32(u("group_size", group_size as u64)?)
            .finish();
        steps.push(Step::Dispatch(Dispatch {
            shader: shader.into(),
            entry: "main",
            inputs: vec![x.id, wg.id, sg.id, wu.id, su.id],
            outputs: vec![out.id],
            params,
            workgroups: grid_groups(m * n)?,
        }));
    }
    Ok(Lowered { shapes: vec![(out.id, shape)], steps })
}
