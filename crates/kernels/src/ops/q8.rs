//! Static int8 ops of the PT2E flow (`XNNPACKQuantizer` symmetric
//! per-channel, then `VulkanPartitioner`): the boundary pair
//! `quantized_decomposed.quantize_per_tensor` (`q8_quantize.wgsl`) and
//! `dequantize_per_tensor` (`q8_dequantize.wgsl`), and the fused int8 ops
//! the partitioner writes between them: `et_vk.q8ta_linear` and
//! `q8ta_linear_gemv` (`q8_linear.wgsl`), `et_vk.linear_q8ta_q8csw` (the
//! same linear with a float output, `q8_linear_float.wgsl`),
//! `et_vk.q8ta_conv2d`, `_pw`, `_dw` and `_transposed` (`q8_conv2d.wgsl`),
//! `et_vk.q8ta_add` (`q8_add.wgsl`), `et_vk.q8ta_relu` (`q8_relu.wgsl`)
//! and `et_vk.q8ta_pixel_shuffle` (`q8_pixel_shuffle.wgsl`); and the
//! weight-only linears of VulkanQuantizer (`q8_weight_only.wgsl`).
//!
//! int8 tensors are int8 on the device: four to a `u32` word, in the
//! host's row-major element order (the `PACKED_INT8_*` memory layouts of
//! the VK00 graph name upstream's texel packings; they are hints here, as
//! every other layout). Products accumulate in exact int32; the float
//! steps (scales, bias, activation) run in float32 and requantize as
//! `quantize_per_tensor` does: `clamp(round(y * f32(1 / scale)) + zp,
//! -128, 127)`, `round` half-to-even.

use crate::error::{Error, Result};
use crate::generated::shaders::{Family, ShaderId};
use crate::plan::{Ctx, Dispatch, ElemType, Lowered, Step, TensorInfo, Uniform, Vid, float_shader, grid_1d, to_u32};

/// Invocations per workgroup of the elementwise int8 kernels.
const WG_Q8: u32 = 256;
/// Invocations per workgroup of `q8_linear.wgsl` and `q8_conv2d.wgsl`.
const WG_Q8_DOT: u32 = 64;

fn shape_err(arg_idx: usize, name: &'static str, expected: String, t: &TensorInfo<'_>) -> Error {
    Error::Shape { arg_idx, name, expected, found: t.shape.to_vec() }
}

fn dtype_err(arg_idx: usize, name: &'static str, expected: &'static str, t: &TensorInfo<'_>) -> Error {
    Error::DType { arg_idx, name, expected, found: t.dtype }
}

fn int8(t: &TensorInfo<'_>, arg_idx: usize, name: &'static str) -> Result<()> {
    if t.dtype == ElemType::I8 { Ok(()) } else { Err(dtype_err(arg_idx, name, "int8", t)) }
}

fn float32(t: &TensorInfo<'_>, arg_idx: usize, name: &'static str) -> Result<()> {
    if t.dtype == ElemType::F32 { Ok(()) } else { Err(dtype_err(arg_idx, name, "float32", t)) }
}

/// A per-tensor scale: positive and finite (its reciprocal is taken).
fn scale(c: &Ctx<'_>, i: usize, name: &'static str) -> Result<f64> {
    let s = c.num(i, name)?;
    if s.is_finite() && s > 0.0 && (1.0 / s).is_finite() {
        Ok(s)
    } else {
        Err(Error::ArgValue { arg_idx: i, name, found: s.to_string(), reason: "must be a positive finite scale" })
    }
}

/// An int8 zero point (or quantization bound): an integer in -128..=127.
fn int8_value(c: &Ctx<'_>, i: usize, name: &'static str) -> Result<i32> {
    let v = c.int(i, name)?;
    if (-128..=127).contains(&v) {
        Ok(v as i32)
    } else {
        Err(Error::ArgValue { arg_idx: i, name, found: v.to_string(), reason: "must lie within -128..127 (int8)" })
    }
}

/// `f32(1 / scale)`: the reciprocal `quantize_per_tensor` multiplies by.
fn inv(scale: f64) -> f32 {
    (1.0 / scale) as f32
}

/// The `activation` argument of the fused ops: `"none"` or `"relu"`.
fn relu_flag(c: &Ctx<'_>, i: usize) -> Result<bool> {
    match c.opt_str(i, "activation")? {
        None | Some("none") => Ok(false),
        Some("relu") => Ok(true),
        Some(other) => Err(Error::ArgValue {
            arg_idx: i,
            name: "activation",
            found: other.to_string(),
            reason: "only \"none\" and \"relu\" are supported",
        }),
    }
}

/// A per-output-channel float32 vector (`weight_scales`, `bias`) with at
/// least `n` elements (the exporter pads them to a multiple of 4).
fn per_channel(t: &TensorInfo<'_>, n: u64, arg_idx: usize, name: &'static str) -> Result<()> {
    float32(t, arg_idx, name)?;
    if t.numel() < n {
        return Err(shape_err(arg_idx, name, format!("at least {n} elements (one per output channel)"), t));
    }
    Ok(())
}

/// A dispatch of `shader` (entry `main`) over `threads` invocations in
/// workgroups of `wg`, reading `inputs` and writing `out`.
fn dispatch(shader: ShaderId, inputs: Vec<Vid>, out: Vid, params: Vec<u8>, threads: u64, wg: u32) -> Result<Dispatch> {
    Ok(Dispatch {
        shader: shader.into(),
        entry: "main",
        inputs,
        outputs: vec![out],
        params,
        workgroups: grid_1d(threads, wg)?,
    })
}

fn one_dispatch(numel: u64, make: impl FnOnce() -> Result<Dispatch>) -> Result<Vec<Step>> {
    if numel == 0 { Ok(Vec::new()) } else { Ok(vec![Step::Dispatch(make()?)]) }
}

/// `quantized_decomposed.quantize_per_tensor.default(input, scale,
/// zero_point, quant_min, quant_max, dtype, →out int8)`.
pub fn quantize_per_tensor(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(7)?;
    let x = c.tensor(0, "input")?;
    let s = scale(c, 1, "scale")?;
    let zp = int8_value(c, 2, "zero_point")?;
    let qmin = int8_value(c, 3, "quant_min")?;
    let qmax = int8_value(c, 4, "quant_max")?;
    let out = c.tensor(6, "out")?;
    let shader = float_shader(Family::Q8Quantize, &x, 0, "input")?;
    int8(&out, 6, "out")?;
    if qmin > qmax {
        return Err(Error::ArgValue {
            arg_idx: 3,
            name: "quant_min",
            found: format!("{qmin}..{qmax}"),
            reason: "quant_min must not exceed quant_max",
        });
    }
    let numel = x.numel();
    let steps = one_dispatch(numel, || {
        let params = Uniform::new().u32(to_u32("elements", numel)?).f32(inv(s)).i32(zp).i32(qmin).i32(qmax).finish();
        dispatch(shader, vec![x.id], out.id, params, numel.div_ceil(4), WG_Q8)
    })?;
    Ok(Lowered { shapes: vec![(out.id, x.shape.to_vec())], steps })
}

/// `quantized_decomposed.dequantize_per_tensor.default(input int8, scale,
/// zero_point, quant_min, quant_max, dtype, out_dtype, →out)`; `out` is
/// float32 (or float16 where the graph says so).
pub fn dequantize_per_tensor(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(8)?;
    let q = c.tensor(0, "input")?;
    let s = scale(c, 1, "scale")?;
    let zp = int8_value(c, 2, "zero_point")?;
    let out = c.tensor(7, "out")?;
    int8(&q, 0, "input")?;
    let shader = float_shader(Family::Q8Dequantize, &out, 7, "out")?;
    let numel = q.numel();
    let steps = one_dispatch(numel, || {
        let params = Uniform::new().u32(to_u32("elements", numel)?).f32(s as f32).i32(zp).finish();
        dispatch(shader, vec![q.id], out.id, params, numel, WG_Q8)
    })?;
    Ok(Lowered { shapes: vec![(out.id, q.shape.to_vec())], steps })
}

/// `et_vk.q8ta_add.default(input_a int8, input_b int8, a_scale, a_zp,
/// b_scale, b_zp, output_scale, output_zp, alpha, →out int8)`; both inputs
/// of one shape (the exporter fuses only such adds).
pub fn q8ta_add(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(10)?;
    let a = c.tensor(0, "input_a")?;
    let b = c.tensor(1, "input_b")?;
    let a_scale = scale(c, 2, "input_a_scale")?;
    let a_zp = int8_value(c, 3, "input_a_zero_point")?;
    let b_scale = scale(c, 4, "input_b_scale")?;
    let b_zp = int8_value(c, 5, "input_b_zero_point")?;
    let out_scale = scale(c, 6, "output_scale")?;
    let out_zp = int8_value(c, 7, "output_zero_point")?;
    let alpha = c.num(8, "alpha")?;
    let out = c.tensor(9, "out")?;
    int8(&a, 0, "input_a")?;
    int8(&b, 1, "input_b")?;
    int8(&out, 9, "out")?;
    if b.shape != a.shape {
        return Err(shape_err(1, "input_b", format!("{:?} (the shape of input_a)", a.shape), &b));
    }
    let shader = crate::generated::shaders::ShaderId::find(Family::Q8Add, crate::generated::shaders::Variant::F32)
        .expect("q8_add.wgsl has an f32 variant");
    let numel = a.numel();
    let steps = one_dispatch(numel, || {
        let params = Uniform::new()
            .u32(to_u32("elements", numel)?)
            .f32(a_scale as f32)
            .i32(a_zp)
            .f32(b_scale as f32)
            .i32(b_zp)
            .f32(inv(out_scale))
            .i32(out_zp)
            .f32(alpha as f32)
            .finish();
        dispatch(shader, vec![a.id, b.id], out.id, params, numel.div_ceil(4), WG_Q8)
    })?;
    Ok(Lowered { shapes: vec![(out.id, a.shape.to_vec())], steps })
}

/// `et_vk.q8ta_relu.default(input int8, input_scale, input_zp,
/// output_scale, output_zp, →out int8)`.
pub fn q8ta_relu(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(6)?;
    let x = c.tensor(0, "input")?;
    let in_scale = scale(c, 1, "input_scale")?;
    let in_zp = int8_value(c, 2, "input_zero_point")?;
    let out_scale = scale(c, 3, "output_scale")?;
    let out_zp = int8_value(c, 4, "output_zero_point")?;
    let out = c.tensor(5, "out")?;
    int8(&x, 0, "input")?;
    int8(&out, 5, "out")?;
    let shader = crate::generated::shaders::ShaderId::find(Family::Q8Relu, crate::generated::shaders::Variant::F32)
        .expect("q8_relu.wgsl has an f32 variant");
    let numel = x.numel();
    let steps = one_dispatch(numel, || {
        let params = Uniform::new()
            .u32(to_u32("elements", numel)?)
            .f32(in_scale as f32)
            .i32(in_zp)
            .f32(inv(out_scale))
            .i32(out_zp)
            .finish();
        dispatch(shader, vec![x.id], out.id, params, numel.div_ceil(4), WG_Q8)
    })?;
    Ok(Lowered { shapes: vec![(out.id, x.shape.to_vec())], steps })
}

/// The quantization arguments every fused int8 op shares (schema
/// positions 1, 2, 6, 7): input scale and zero point, output scale and
/// zero point.
struct Requant {
    in_scale: f64,
    in_zp: i32,
    out_scale: f64,
    out_zp: i32,
}

impl Requant {
    /// The dispatch of an int8 kernel over `numel` outputs (four an
    /// invocation) that ends its uniforms with the requantization: `params`
    /// so far, then the zero points and the input and inverse output
    /// scales; `inputs` are `[x, weights, weight scales, bias or the
    /// weight scales]`.
    fn dispatch(&self, shader: ShaderId, params: Uniform, inputs: [Vid; 4], out: Vid, numel: u64) -> Result<Dispatch> {
        let params =
            params.i32(self.in_zp).i32(self.out_zp).f32(self.in_scale as f32).f32(inv(self.out_scale)).finish();
        dispatch(shader, inputs.to_vec(), out, params, numel.div_ceil(4), WG_Q8_DOT)
    }
}

fn requant_args(c: &Ctx<'_>) -> Result<Requant> {
    Ok(Requant {
        in_scale: scale(c, 1, "input_scale")?,
        in_zp: int8_value(c, 2, "input_zero_point")?,
        out_scale: scale(c, 6, "output_scale")?,
        out_zp: int8_value(c, 7, "output_zero_point")?,
    })
}

/// `et_vk.q8ta_linear.default` and `et_vk.q8ta_linear_gemv.default`
/// `(x int8 [..., K], input_scale, input_zp, weights int8 [N, K],
/// weight_sums int32, weight_scales [>= N], output_scale, output_zp,
/// bias? [>= N], activation, →out int8 [..., N])`. The weight sums are
/// recomputed in the kernel from the weights it reads.
pub fn q8ta_linear(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(11)?;
    let x = c.tensor(0, "x")?;
    let w = c.tensor(3, "weights")?;
    c.tensor(4, "weight_sums")?;
    let w_scales = c.tensor(5, "weight_scales")?;
    let bias = c.opt_tensor(8, "bias")?;
    let relu = relu_flag(c, 9)?;
    let out = c.tensor(10, "out")?;
    let q = requant_args(c)?;
    int8(&x, 0, "x")?;
    int8(&w, 3, "weights")?;
    int8(&out, 10, "out")?;
    let Some(&k) = x.shape.last() else { return Err(shape_err(0, "x", "[..., K]".into(), &x)) };
    if !k.is_multiple_of(4) {
        return Err(shape_err(0, "x", "[..., K] with K a multiple of 4".into(), &x));
    }
    let [n, wk] = w.shape[..] else { return Err(shape_err(3, "weights", "[N, K]".into(), &w)) };
    if wk != k {
        return Err(shape_err(3, "weights", format!("[N, {k}]"), &w));
    }
    per_channel(&w_scales, n, 5, "weight_scales")?;
    if let Some(b) = &bias {
        per_channel(b, n, 8, "bias")?;
    }
    let m = x.numel().checked_div(k).unwrap_or(0);
    let mut out_shape = x.shape.to_vec();
    *out_shape.last_mut().expect("rank >= 1") = n;
    let numel = m * n;
    let shader = float_shader(Family::Q8Linear, &w_scales, 5, "weight_scales")?;
    let steps = one_dispatch(numel, || {
        to_u32("output elements", numel)?;
        let params = Uniform::new()
            .u32(to_u32("M", m)?)
            .u32(to_u32("N", n)?)
            .u32(to_u32("K / 4", k / 4)?)
            .u32(u32::from(bias.is_some()))
            .u32(u32::from(relu));
        q.dispatch(shader, params, [x.id, w.id, w_scales.id, bias.map_or(w_scales.id, |b| b.id)], out.id, numel)
    })?;
    Ok(Lowered { shapes: vec![(out.id, out_shape)], steps })
}

/// `et_vk.linear_q8ta_q8csw.default(x int8 [..., K], input_scale,
/// input_zp, weights int8 [N, K], weight_sums int32, weight_scales
/// [>= N], bias? [>= N], →out float [..., N])`: the int8 linear of
/// [`q8ta_linear`] whose output the exporter leaves unquantized (a static
/// int8 input, no quantize after the linear). The weight sums are
/// recomputed in the kernel from the weights it reads.
pub fn linear_q8ta_q8csw(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(8)?;
    let x = c.tensor(0, "x")?;
    let in_scale = scale(c, 1, "input_scale")?;
    let in_zp = int8_value(c, 2, "input_zero_point")?;
    let w = c.tensor(3, "weights")?;
    c.tensor(4, "weight_sums")?;
    let w_scales = c.tensor(5, "weight_scales")?;
    let bias = c.opt_tensor(6, "bias")?;
    let out = c.tensor(7, "out")?;
    int8(&x, 0, "x")?;
    int8(&w, 3, "weights")?;
    let shader = float_shader(Family::Q8LinearFloat, &out, 7, "out")?;
    crate::plan::same_dtype(&w_scales, out.dtype, 5, "weight_scales")?;
    let Some(&k) = x.shape.last() else { return Err(shape_err(0, "x", "[..., K]".into(), &x)) };
    if !k.is_multiple_of(4) {
        return Err(shape_err(0, "x", "[..., K] with K a multiple of 4".into(), &x));
    }
    let [n, wk] = w.shape[..] else { return Err(shape_err(3, "weights", "[N, K]".into(), &w)) };
    if wk != k {
        return Err(shape_err(3, "weights", format!("[N, {k}]"), &w));
    }
    if w_scales.numel() < n {
        return Err(shape_err(
            5,
            "weight_scales",
            format!("at least {n} elements (one per output channel)"),
            &w_scales,
        ));
    }
    if let Some(b) = &bias {
        crate::plan::same_dtype(b, out.dtype, 6, "bias")?;
        if b.numel() < n {
            return Err(shape_err(6, "bias", format!("at least {n} elements (one per output channel)"), b));
        }
    }
    let m = x.numel().checked_div(k).unwrap_or(0);
    let mut out_shape = x.shape.to_vec();
    *out_shape.last_mut().expect("rank >= 1") = n;
    let numel = m * n;
    let steps = one_dispatch(numel, || {
        to_u32("output elements", numel)?;
        let params = Uniform::new()
            .u32(to_u32("M", m)?)
            .u32(to_u32("N", n)?)
            .u32(to_u32("K / 4", k / 4)?)
            .u32(u32::from(bias.is_some()))
            .i32(in_zp)
            .f32(in_scale as f32)
            .finish();
        dispatch(
            shader,
            vec![x.id, w.id, w_scales.id, bias.map_or(w_scales.id, |b| b.id)],
            out.id,
            params,
            numel,
            WG_Q8_DOT,
        )
    })?;
    Ok(Lowered { shapes: vec![(out.id, out_shape)], steps })
}

/// `et_vk.q8ta_pixel_shuffle.default(input int8 [N, C*r*r, H, W],
/// input_scale, input_zp, output_inv_scale, output_zp, upscale_factor r,
/// →out int8 [N, C, H*r, W*r])`: note the output's *inverse* scale, as the
/// exporter writes it.
pub fn q8ta_pixel_shuffle(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(7)?;
    let x = c.tensor(0, "input")?;
    let in_scale = scale(c, 1, "input_scale")?;
    let in_zp = int8_value(c, 2, "input_zero_point")?;
    // A positive finite inverse scale is a positive finite scale's reciprocal.
    let out_inv_scale = scale(c, 3, "output_inv_scale")?;
    let out_zp = int8_value(c, 4, "output_zero_point")?;
    let r = c.int(5, "upscale_factor")?;
    let out = c.tensor(6, "out")?;
    int8(&x, 0, "input")?;
    int8(&out, 6, "out")?;
    let r = u64::try_from(r).ok().filter(|&r| r > 0).ok_or_else(|| Error::ArgValue {
        arg_idx: 5,
        name: "upscale_factor",
        found: r.to_string(),
        reason: "must be positive",
    })?;
    let rr = r.checked_mul(r).ok_or(Error::TooLarge { what: "upscale_factor squared", found: r })?;
    let [batch, ch, h, wd] = x.shape[..] else { return Err(shape_err(0, "input", "[N, C, H, W]".into(), &x)) };
    if !ch.is_multiple_of(rr) {
        return Err(shape_err(
            0,
            "input",
            format!("[N, C, H, W] with C a multiple of {rr} (upscale_factor squared)"),
            &x,
        ));
    }
    let (oh, ow) = match (h.checked_mul(r), wd.checked_mul(r)) {
        (Some(oh), Some(ow)) => (oh, ow),
        _ => return Err(Error::TooLarge { what: "pixel_shuffle output", found: u64::MAX }),
    };
    let out_shape = vec![batch, ch / rr, oh, ow];
    let numel = crate::plan::checked_numel(&out_shape)?;
    let shader =
        crate::generated::shaders::ShaderId::find(Family::Q8PixelShuffle, crate::generated::shaders::Variant::F32)
            .expect("q8_pixel_shuffle.wgsl has an f32 variant");
    let steps = one_dispatch(numel, || {
        let params = Uniform::new()
            .u32(to_u32("elements", numel)?)
            .u32(to_u32("output channels", ch / rr)?)
            .u32(to_u32("output height", oh)?)
            .u32(to_u32("output width", ow)?)
            .u32(to_u32("upscale_factor", r)?)
            .f32(in_scale as f32)
            .i32(in_zp)
            .f32(out_inv_scale as f32)
            .i32(out_zp)
            .finish();
        dispatch(shader, vec![x.id], out.id, params, numel.div_ceil(4), WG_Q8)
    })?;
    Ok(Lowered { shapes: vec![(out.id, out_shape)], steps })
}

/// Which packing of the weights a q8ta convolution reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConvKind {
    /// `q8ta_conv2d` and `q8ta_conv2d_pw`: `[OC, >= KH*KW*IC_g]`, rows in
    /// `(kh, kw, ic)` order.
    General,
    /// `q8ta_conv2d_dw`: `[KH, KW, >= OC]`, one input channel per output.
    Depthwise,
    /// `q8ta_conv2d_transposed`: as `General` (`[OC, >= KH*KW*IC_g]`, the
    /// exporter's relayout of `(IC, OC_g, KH, KW)`), with an
    /// `output_padding` argument after `padding`.
    Transposed,
}

/// Two entries of a `[h, w]` list argument, each at least `min`.
fn pair(c: &Ctx<'_>, i: usize, name: &'static str, min: i64) -> Result<[u64; 2]> {
    let v = c.int_list(i, name)?;
    match v[..] {
        [a, b] if a >= min && b >= min => Ok([a as u64, b as u64]),
        _ => Err(Error::ArgValue {
            arg_idx: i,
            name,
            found: format!("{v:?}"),
            reason: if min > 0 { "must be two positive integers" } else { "must be two non-negative integers" },
        }),
    }
}

/// `et_vk.q8ta_conv2d{,_pw,_dw}.default(x int8 [N, C, H, W], input_scale,
/// input_zp, weights int8, weight_sums int32, weight_scales [>= OC],
/// output_scale, output_zp, bias? [>= OC], kernel_size, stride, padding,
/// dilation, groups, activation, →out int8 [N, OC, OH, OW])`;
/// `et_vk.q8ta_conv2d_transposed.default` takes `output_padding` after
/// `padding` and has `OH = (H - 1) * stride - 2 * padding + dilation *
/// (KH - 1) + output_padding + 1`.
pub fn q8ta_conv2d(c: &Ctx<'_>, kind: ConvKind) -> Result<Lowered> {
    let transposed = kind == ConvKind::Transposed;
    // Positions after `padding` shift by one where `output_padding` sits.
    let t = usize::from(transposed);
    c.expect_args(16 + t)?;
    let x = c.tensor(0, "x")?;
    let w = c.tensor(3, "weights")?;
    c.tensor(4, "weight_sums")?;
    let w_scales = c.tensor(5, "weight_scales")?;
    let bias = c.opt_tensor(8, "bias")?;
    let [kh, kw] = pair(c, 9, "kernel_size", 1)?;
    let [sh, sw] = pair(c, 10, "stride", 1)?;
    let [ph, pw] = pair(c, 11, "padding", 0)?;
    let [oph, opw] = if transposed { pair(c, 12, "output_padding", 0)? } else { [0, 0] };
    let [dh, dw] = pair(c, 12 + t, "dilation", 1)?;
    let groups = c.int(13 + t, "groups")?;
    let relu = relu_flag(c, 14 + t)?;
    let out = c.tensor(15 + t, "out")?;
    let q = requant_args(c)?;
    int8(&x, 0, "x")?;
    int8(&w, 3, "weights")?;
    int8(&out, 15 + t, "out")?;
    let [batch, ch, h, wd] = x.shape[..] else { return Err(shape_err(0, "x", "[N, C, H, W]".into(), &x)) };
    let groups =
        u64::try_from(groups).ok().filter(|&g| g > 0 && ch.is_multiple_of(g)).ok_or_else(|| Error::ArgValue {
            arg_idx: 13 + t,
            name: "groups",
            found: groups.to_string(),
            reason: "must be positive and divide the input channels",
        })?;
    let ic_g = ch / groups;
    let taps = kh
        .checked_mul(kw)
        .and_then(|t| t.checked_mul(ic_g))
        .ok_or(Error::TooLarge { what: "kernel taps", found: u64::MAX })?;
    let (oc, w_row) = match kind {
        ConvKind::General | ConvKind::Transposed => {
            let [oc, row] = w.shape[..] else {
                return Err(shape_err(3, "weights", "[OC, KH*KW*IC/groups (padded)]".into(), &w));
            };
            if row < taps || !oc.is_multiple_of(groups) {
                return Err(shape_err(3, "weights", format!("[OC (a multiple of {groups}), >= {taps}]"), &w));
            }
            (oc, row)
        }
        ConvKind::Depthwise => {
            let [wkh, wkw, row] = w.shape[..] else {
                return Err(shape_err(3, "weights", "[KH, KW, OC (padded)]".into(), &w));
            };
            if wkh != kh || wkw != kw || ic_g != 1 || row < ch {
                return Err(shape_err(3, "weights", format!("[{kh}, {kw}, >= {ch}] with groups == channels"), &w));
            }
            (ch, row)
        }
    };
    per_channel(&w_scales, oc, 5, "weight_scales")?;
    if let Some(b) = &bias {
        per_channel(b, oc, 8, "bias")?;
    }
    let out_dim = |size: u64, k: u64, s: u64, p: u64, d: u64, idx: usize| -> Result<u64> {
        let span = d.checked_mul(k - 1).and_then(|x| x.checked_add(1));
        let padded = size.saturating_add(p.saturating_mul(2));
        match span {
            Some(span) if padded >= span => Ok((padded - span) / s + 1),
            _ => Err(Error::ArgValue {
                arg_idx: idx,
                name: "kernel_size",
                found: format!("{k} (dilation {d}) over {size} + 2 * {p}"),
                reason: "the dilated kernel must fit the padded input",
            }),
        }
    };
    let out_dim_transposed = |size: u64, k: u64, s: u64, p: u64, op: u64, d: u64| -> Result<u64> {
        if op >= s.max(d) {
            return Err(Error::ArgValue {
                arg_idx: 12,
                name: "output_padding",
                found: format!("{op} (stride {s}, dilation {d})"),
                reason: "must be smaller than the stride or the dilation",
            });
        }
        let full = size
            .checked_sub(1)
            .and_then(|n| n.checked_mul(s))
            .and_then(|n| n.checked_add(d.checked_mul(k - 1)?))
            .and_then(|n| n.checked_add(op + 1));
        match full.and_then(|n| n.checked_sub(p.checked_mul(2)?)) {
            Some(n) if n > 0 => Ok(n),
            _ => Err(Error::ArgValue {
                arg_idx: 11,
                name: "padding",
                found: format!("{p} over {size} (kernel {k}, stride {s})"),
                reason: "the transposed convolution's output must not be empty",
            }),
        }
    };
    let (oh, ow) = if transposed {
        (out_dim_transposed(h, kh, sh, ph, oph, dh)?, out_dim_transposed(wd, kw, sw, pw, opw, dw)?)
    } else {
        (out_dim(h, kh, sh, ph, dh, 9)?, out_dim(wd, kw, sw, pw, dw, 9)?)
    };
    let out_shape = vec![batch, oc, oh, ow];
    let numel = crate::plan::checked_numel(&out_shape)?;
    let shader = float_shader(Family::Q8Conv2d, &w_scales, 5, "weight_scales")?;
    let steps = one_dispatch(numel, || {
        crate::plan::checked_numel(x.shape).and_then(|n| to_u32("input elements", n))?;
        let params = Uniform::new()
            .u32(to_u32("output elements", numel)?)
            .u32(to_u32("channels", ch)?)
            .u32(to_u32("height", h)?)
            .u32(to_u32("width", wd)?)
            .u32(to_u32("output channels", oc)?)
            .u32(to_u32("output height", oh)?)
            .u32(to_u32("output width", ow)?)
            .u32(to_u32("kernel height", kh)?)
            .u32(to_u32("kernel width", kw)?)
            .u32(to_u32("stride", sh)?)
            .u32(to_u32("stride", sw)?)
            .u32(to_u32("padding", ph)?)
            .u32(to_u32("padding", pw)?)
            .u32(to_u32("dilation", dh)?)
            .u32(to_u32("dilation", dw)?)
            .u32(to_u32("input channels per group", ic_g)?)
            .u32(to_u32("output channels per group", oc / groups)?)
            .u32(to_u32("weight row", w_row)?)
            .u32(match kind {
                ConvKind::General => 0,
                ConvKind::Depthwise => 1,
                ConvKind::Transposed => 2,
            })
            .u32(u32::from(bias.is_some()))
            .u32(u32::from(relu));
        q.dispatch(shader, params, [x.id, w.id, w_scales.id, bias.map_or(w_scales.id, |b| b.id)], out.id, numel)
    })?;
    Ok(Lowered { shapes: vec![(out.id, out_shape)], steps })
}

/// The weight-only linears of VulkanQuantizer: `aten._weight_int8pack_mm
/// .default(x [M, K], w int8 [N, K], scales [N], →out [M, N])` (`bits` 8)
/// and `et_vk.linear_qcs4w.default(x, w u8 [N, ceil(K/2)], scales, →out)`
/// (`bits` 4), on `q8_weight_only.wgsl`.
pub fn weight_only_linear(c: &Ctx<'_>, bits: u32) -> Result<Lowered> {
    c.expect_args(4)?;
    let x = c.tensor(0, "input")?;
    let w = c.tensor(1, "weight")?;
    let scales = c.tensor(2, "scales")?;
    let out = c.tensor(3, "out")?;
    let shader = float_shader(Family::Q8WeightOnly, &x, 0, "input")?;
    crate::plan::same_dtype(&scales, x.dtype, 2, "scales")?;
    crate::plan::same_dtype(&out, x.dtype, 3, "out")?;
    let Some(&k) = x.shape.last() else { return Err(shape_err(0, "input", "[..., K]".into(), &x)) };
    let (w_dtype, w_name, row_bytes) = match bits {
        8 => (ElemType::I8, "int8", k),
        _ => (ElemType::U8, "uint8 (two 4-bit values per byte)", k.div_ceil(2)),
    };
    if w.dtype != w_dtype {
        return Err(dtype_err(1, "weight", w_name, &w));
    }
    let [n, wk] = w.shape[..] else { return Err(shape_err(1, "weight", "[N, K]".into(), &w)) };
    if wk != row_bytes {
        return Err(shape_err(1, "weight", format!("[N, {row_bytes}] (K = {k})"), &w));
    }
    if scales.numel() < n {
        return Err(shape_err(2, "scales", format!("at least {n} elements (one per output channel)"), &scales));
    }
    let m = x.numel().checked_div(k).unwrap_or(0);
    let mut out_shape = x.shape.to_vec();
    *out_shape.last_mut().expect("rank >= 1") = n;
    let numel = m * n;
    let steps = one_dispatch(numel, || {
        let params = Uniform::new()
            .u32(to_u32("M", m)?)
            .u32(to_u32("N", n)?)
            .u32(to_u32("K", k)?)
            .u32(to_u32("weight row bytes", row_bytes)?)
            .u32(bits)
            .finish();
        dispatch(shader, vec![x.id, w.id, scales.id], out.id, params, numel, WG_Q8_DOT)
    })?;
    Ok(Lowered { shapes: vec![(out.id, out_shape)], steps })
}
