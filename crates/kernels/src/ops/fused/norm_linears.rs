//! The RMS norm, after a residual add or alone, fused into the linear
//! that reads it: the 4-bit `etwgpu.rms_norm_linear_q4gsw`,
//! `etwgpu.rms_norm_linear_q4gsw_qkv` and
//! `etwgpu.rms_norm_linear_q4gsw_swiglu`, and the float
//! `etwgpu.rms_norm_linear_qkv` and `etwgpu.rms_norm_linear_swiglu`, each
//! the norm's arguments then the linear's (its input left out), writing
//! the sum (with an add), the normed input and the linear's outputs.
//!
//! On the decode route (the linear's GEMV: at most
//! [`Q4_GEMV_MAX_ROWS`](crate::ops::quant::Q4_GEMV_MAX_ROWS) rows for the
//! 4-bit forms, [`GEMV_MAX_ROWS`](crate::ops::matmul::GEMV_MAX_ROWS) and K
//! a multiple of 4 for the float ones, and at most
//! [`Q4_GEMV_NORM_MAX_ELEMS`] input elements) it is one dispatch: the
//! GEMV's `_norm` form (`q4_gemv_norm.wgsl`, `q4_gemv_qkv_norm.wgsl`,
//! `q4_gemv_swiglu_norm.wgsl`, `gemv_qkv_norm_vec4.wgsl`,
//! `gemv_swiglu_norm_vec4.wgsl`), whose every workgroup normalizes the
//! input rows itself (`rms_prologue.wgsl`) and whose workgroup 0 stores
//! the sum; the normed input is not written. Elsewhere (prompts, other
//! shapes) it is the norm's dispatch (`add_rms_norm.wgsl` or
//! `rms_norm.wgsl`) writing the normed input, then the linear's own
//! lowering of it.

use crate::error::{Error, Result};
use crate::generated::shaders::{Family, ShaderId};
use crate::ops::fused::linears::{
    linear_q4gsw_qkv_into, linear_q4gsw_swiglu_into, linear_qkv_into, linear_swiglu_into,
};
use crate::ops::llm::norm_rows;
use crate::ops::quant::linear_q4gsw_into;
use crate::plan::{Ctx, Dispatch, Lowered, Shader, Step, TensorInfo, Uniform, Vid, float_shader, same_dtype};

/// Most input elements (rows times K) of the normed decode kernels, 4-bit
/// and float: their workgroup memory holds the normed rows (`XS` vec4s in
/// the WGSL).
pub const Q4_GEMV_NORM_MAX_ELEMS: u64 = 3072;

/// Most inputs (K) for which the normed QKV GEMV takes its int8 form
/// with int8 activations on. Past it the rounding in front of the loop
/// costs more than the integer dots save: on the 1B shape (K = 2,048, two
/// words an invocation) the QKV's int8 form cost 1-3% of a decode step in
/// three paired runs on an H100, while at SmolLM2's K = 576 it gained
/// ~0.6% (`tools/device/NOTES.md`, run ap, third and fourth calls).
pub const Q4_GEMV_QKV_I8_MAX_K: u64 = 1024;

/// `etwgpu.rms_norm_linear_q4gsw.default(a [..., K], b? [..., K],
/// norm_weight [K], eps, weights u8 [N, K/2], weight_scales [G, N_pad],
/// group_size, bias? [N_pad], →[sum?, normed, out [..., N]])`: `out =
/// linear_q4gsw(rms_norm(a + b))` (`rms_norm(a)` without `b`, and no `sum`).
pub fn rms_norm_linear_q4gsw(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(9)?;
    with_norm(c, 1, |lc, x, outs| linear_q4gsw_into(lc, x, &outs[0]))
}

/// `etwgpu.rms_norm_linear_q4gsw_qkv.default(a, b?, norm_weight, eps,
/// group_size, w_q, s_q, w_k, s_k, w_v, s_v, →[sum?, normed, q, k, v])`:
/// `etwgpu.linear_q4gsw_qkv` of the RMS norm.
pub fn rms_norm_linear_q4gsw_qkv(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(12)?;
    with_norm(c, 3, linear_q4gsw_qkv_into)
}

/// `etwgpu.rms_norm_linear_q4gsw_swiglu.default(a, b?, norm_weight, eps,
/// group_size, w_gate, s_gate, w_up, s_up, →[sum?, normed, out])`:
/// `etwgpu.linear_q4gsw_swiglu` of the RMS norm.
pub fn rms_norm_linear_q4gsw_swiglu(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(10)?;
    with_norm(c, 1, |lc, x, outs| linear_q4gsw_swiglu_into(lc, x, &outs[0]))
}

/// `etwgpu.rms_norm_linear_qkv.default(a, b?, norm_weight, eps, w_q, b_q?,
/// w_k, b_k?, w_v, b_v?, →[sum?, normed, q, k, v])`: `etwgpu.linear_qkv`
/// of the RMS norm.
pub fn rms_norm_linear_qkv(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(11)?;
    with_norm(c, 3, linear_qkv_into)
}

/// `etwgpu.rms_norm_linear_swiglu.default(a, b?, norm_weight, eps, w_gate,
/// b_gate?, w_up, b_up?, →[sum?, normed, out])`: `etwgpu.linear_swiglu`
/// of the RMS norm.
pub fn rms_norm_linear_swiglu(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(9)?;
    with_norm(c, 1, |lc, x, outs| linear_swiglu_into(lc, x, &outs[0]))
}

/// The shared rule: checks the norm's arguments, lowers the linear (its
/// rule `linear` sees the arguments from 4 on, after the normed input, and
/// the linear's `n_outs` outputs), then takes the norm into its GEMV where
/// the linear lowered to one.
fn with_norm(
    c: &Ctx<'_>,
    n_outs: usize,
    linear: impl Fn(&Ctx<'_>, &TensorInfo<'_>, &[TensorInfo<'_>]) -> Result<Lowered>,
) -> Result<Lowered> {
    let last = c.n_args() - 1;
    let a = c.tensor(0, "a")?;
    let b = c.opt_tensor(1, "b")?;
    let weight = c.tensor(2, "norm_weight")?;
    let eps = c.num(3, "eps")?;
    let outs = c.tensor_list(last, "out")?;
    let n_norm = 1 + usize::from(b.is_some());
    if outs.len() != n_norm + n_outs {
        return Err(Error::ArgValue {
            arg_idx: last,
            name: "out",
            found: format!("{} tensors", outs.len()),
            reason: if b.is_some() {
                "expected the sum, the normed input, then the linear's outputs"
            } else {
                "expected the normed input, then the linear's outputs"
            },
        });
    }
    let family = if b.is_some() { Family::AddRmsNorm } else { Family::RmsNorm };
    let norm_shader = float_shader(family, &a, 0, "a")?;
    if let Some(b) = &b {
        same_dtype(b, a.dtype, 1, "b")?;
        if b.shape != a.shape {
            return Err(Error::Shape {
                arg_idx: 1,
                name: "b",
                expected: format!("{:?}", a.shape),
                found: b.shape.to_vec(),
            });
        }
    }
    same_dtype(&weight, a.dtype, 2, "norm_weight")?;
    for o in &outs {
        same_dtype(o, a.dtype, last, "out")?;
    }
    let normed = outs[n_norm - 1];
    // The linear reads the normed input at a's live shape, its leading
    // dims flattened to the normed output's rank where that is lower (the
    // view of an fp32 export, `[1, S, K]` to `[S, K]`, taken in by fusion).
    let (rank, normed_rank) = (a.shape.len(), normed.shape.len());
    if normed_rank == 0 || normed_rank > rank {
        return Err(Error::ArgValue {
            arg_idx: last,
            name: "out",
            found: format!("a normed input of rank {normed_rank}"),
            reason: "expected rank 1 up to the input's rank",
        });
    }
    let merged = rank - normed_rank + 1;
    let x_shape: Vec<u64> =
        std::iter::once(a.shape[..merged].iter().product()).chain(a.shape[merged..].iter().copied()).collect();
    let x = TensorInfo { shape: &x_shape, ..normed };
    let mut linear_args: Vec<Vid> = vec![normed.id];
    linear_args.extend((4..last).map(|i| c.id(i)));
    let inner = linear(&c.with_args(&linear_args), &x, &outs[n_norm..])?;
    // The norm's own dispatch (this checks the weight against K too).
    let (inputs, outputs) = match &b {
        Some(b) => (vec![a.id, b.id, weight.id], vec![outs[0].id, normed.id]),
        None => (vec![a.id, weight.id], vec![normed.id]),
    };
    let norm_steps = norm_rows(norm_shader, &a, (&weight, 2), eps, inputs, outputs)?;
    let mut shapes: Vec<(Vid, Vec<u64>)> = vec![(normed.id, x_shape.clone())];
    if b.is_some() {
        shapes.insert(0, (outs[0].id, a.shape.to_vec()));
    }
    shapes.extend(inner.shapes);
    let k = a.shape.last().copied().unwrap_or(1);
    let elems = a.numel();
    let steps = match &inner.steps[..] {
        [Step::Dispatch(d)] if elems <= Q4_GEMV_NORM_MAX_ELEMS && k.is_multiple_of(4) => {
            let i8 = crate::ops::quant::q4_gemv_i8(c.caps(), elems / k.max(1), k);
            match normed_gemv(d, &a, (b.as_ref().map_or(a.id, |b| b.id), b.is_some()), &weight, eps, outs[0].id, i8)? {
                Some(d) => vec![Step::Dispatch(d)],
                None => [norm_steps, inner.steps].concat(),
            }
        }
        _ => [norm_steps, inner.steps].concat(),
    };
    Ok(Lowered { shapes, steps })
}

/// The `_norm` form of a GEMV dispatch `d` (4-bit, or a streaming float
/// QKV or SwiGLU), whose input 0 is the normed input: reads `a`, `b` (`a`
/// again without an add) and the norm weight instead, writes `sum` too
/// (the normed input, unwritten, without an add), with the norm's epsilon
/// and whether to add after the GEMV's uniforms; the 4-bit SwiGLU's and
/// QKV's int8-activation forms where `i8` (the load asked for it, one
/// row: `q4_gemv_swiglu_norm_i8.wgsl`, and `q4_gemv_qkv_norm_i8.wgsl` up
/// to [`Q4_GEMV_QKV_I8_MAX_K`] inputs). `None` for a dispatch of another
/// kernel.
fn normed_gemv(
    d: &Dispatch,
    a: &TensorInfo<'_>,
    (b, add): (Vid, bool),
    weight: &TensorInfo<'_>,
    eps: f64,
    sum: Vid,
    i8: bool,
) -> Result<Option<Dispatch>> {
    let Shader::Static(id) = &d.shader else { return Ok(None) };
    let family = match id.family() {
        Family::Q4Gemv => Family::Q4GemvNorm,
        Family::Q4GemvQkv if i8 && a.shape.last().is_some_and(|&k| k <= Q4_GEMV_QKV_I8_MAX_K) => {
            Family::Q4GemvQkvNormI8
        }
        Family::Q4GemvQkv => Family::Q4GemvQkvNorm,
        Family::Q4GemvSwiglu if i8 => Family::Q4GemvSwigluNormI8,
        Family::Q4GemvSwiglu => Family::Q4GemvSwigluNorm,
        Family::GemvQkvVec4 => Family::GemvQkvNormVec4,
        Family::GemvSwigluVec4 => Family::GemvSwigluNormVec4,
        // `q4_gemv_i8.wgsl` has no `_norm` form: the norm's own dispatch,
        // then it.
        _ => return Ok(None),
    };
    let shader: ShaderId = float_shader(family, a, 0, "a")?;
    let mut inputs = vec![a.id, b, weight.id];
    inputs.extend(&d.inputs[1..]);
    let mut outputs = d.outputs.clone();
    outputs.push(sum);
    let mut params = d.params.clone();
    params.extend(Uniform::new().f32(eps as f32).u32(u32::from(add)).finish());
    Ok(Some(Dispatch { shader: shader.into(), entry: d.entry, inputs, outputs, params, workgroups: d.workgroups }))
}
