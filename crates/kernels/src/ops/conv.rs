//! Convolution and pooling: `aten.convolution` and `et_vk.conv_with_clamp`
//! (`conv.wgsl`), `aten.max_pool2d_with_indices` (`max_pool2d.wgsl`),
//! `aten.max_pool2d` (`max_pool2d_values.wgsl`) and
//! `aten.avg_pool2d` (`avg_pool2d.wgsl`), and the resampling
//! `aten.upsample_nearest2d.vec` / `aten.upsample_bilinear2d.vec`
//! (`upsample.wgsl`) and `aten.grid_sampler_2d` (`grid_sampler.wgsl`).
//! 1-D convolutions (rank-3 input) run as 2-D ones with
//! `H = 1`. Ungrouped convolutions may take an implicit GEMM instead, on
//! cooperative matrices where the device has them (`conv_routes.rs` holds
//! the kernels' dispatches and chooses).

use crate::error::{Error, Result};
use crate::generated::shaders::Family;
use crate::ops::conv_routes::{ConvEpilogue, ConvGeom, ConvRoute, conv_route, direct_dispatch, gemm_steps};
use crate::ops::fused::Epilogue;
use crate::plan::{
    Ctx, Dispatch, Lowered, Step, TensorInfo, Uniform, WG_ROWS, float_shader, grid_1d, same_dtype, to_u32,
};

/// Reads a per-spatial-dim list argument (`stride`, `padding`, ...) for
/// `n` spatial dims: one entry is repeated, anything but 1 or `n` entries
/// (or a value outside `min..`) is an error.
fn spatial(c: &Ctx<'_>, i: usize, name: &'static str, n: usize, min: i64) -> Result<Vec<u64>> {
    let xs = c.int_list(i, name)?;
    let bad = || Error::ArgValue {
        arg_idx: i,
        name,
        found: format!("{xs:?}"),
        reason: if min > 0 { "one positive value per spatial dim" } else { "one value >= 0 per spatial dim" },
    };
    if xs.iter().any(|&x| x < min) {
        return Err(bad());
    }
    match xs.len() {
        1 => Ok(vec![xs[0] as u64; n]),
        len if len == n => Ok(xs.iter().map(|&x| x as u64).collect()),
        _ => Err(bad()),
    }
}

/// Output length of a sliding window, PyTorch's rule (with `ceil_mode`, a
/// last window must start inside the input or its left padding).
fn out_len(size: u64, k: u64, stride: u64, pad: u64, dil: u64, ceil_mode: bool) -> Option<u64> {
    // In u128 so hostile sizes cannot overflow; `None` for an empty window
    // or a result past u64.
    let (size, k, stride, pad, dil) =
        (u128::from(size), u128::from(k), u128::from(stride), u128::from(pad), u128::from(dil));
    if stride == 0 || k == 0 {
        return None;
    }
    let span = dil * (k - 1) + 1;
    let padded = size + 2 * pad;
    if padded < span {
        return None;
    }
    let mut n = if ceil_mode { (padded - span).div_ceil(stride) } else { (padded - span) / stride } + 1;
    if ceil_mode && (n - 1) * stride >= size + pad {
        n -= 1;
    }
    u64::try_from(n).ok()
}

/// The input seen as `[N, C, H, W]` (rank 3: `[N, C, 1, L]`, the 1-D case).
fn as_nchw(x: &TensorInfo<'_>, arg_idx: usize, name: &'static str) -> Result<[u64; 4]> {
    match *x.shape {
        [n, c, l] => Ok([n, c, 1, l]),
        [n, c, h, w] => Ok([n, c, h, w]),
        _ => Err(Error::Shape {
            arg_idx,
            name,
            expected: "rank 3 (1-D) or rank 4 (2-D)".into(),
            found: x.shape.to_vec(),
        }),
    }
}

/// `aten.convolution.default(input, weight, bias?, stride, padding,
/// dilation, transposed, output_padding, groups, →out)` (transposed: weight
/// `[IC, OC / groups, KH, KW]`); with `clamp`,
/// `et_vk.conv_with_clamp.default`, which adds `output_min?` and
/// `output_max?` before the output.
pub fn convolution(c: &Ctx<'_>, clamp: bool) -> Result<Lowered> {
    convolution_with(c, clamp, Epilogue::NONE)
}

/// [`convolution`] with an activation epilogue after the clamp
/// (`etwgpu.convolution_act`, `etwgpu.conv_with_clamp_act`).
pub fn convolution_with(c: &Ctx<'_>, clamp: bool, epilogue: Epilogue) -> Result<Lowered> {
    let n_args = if clamp { 12 } else { 10 };
    c.expect_args(n_args)?;
    let x = c.tensor(0, "input")?;
    let w = c.tensor(1, "weight")?;
    let bias = c.opt_tensor(2, "bias")?;
    let out_idx = n_args - 1;
    let out = c.tensor(out_idx, "out")?;
    float_shader(Family::Conv, &x, 0, "input")?;
    same_dtype(&w, x.dtype, 1, "weight")?;
    same_dtype(&out, x.dtype, out_idx, "out")?;
    let transposed = c.bool(6, "transposed")?;
    let [n, c_in, h, wd] = as_nchw(&x, 0, "input")?;
    let one_d = x.shape.len() == 3;
    let n_spatial = if one_d { 1 } else { 2 };
    let pad_front = |v: Vec<u64>, fill: u64| if one_d { vec![fill, v[0]] } else { v };
    let stride = pad_front(spatial(c, 3, "stride", n_spatial, 1)?, 1);
    let padding = pad_front(spatial(c, 4, "padding", n_spatial, 0)?, 0);
    let dilation = pad_front(spatial(c, 5, "dilation", n_spatial, 1)?, 1);
    let output_padding =
        if transposed { pad_front(spatial(c, 7, "output_padding", n_spatial, 0)?, 0) } else { vec![0, 0] };
    if output_padding.iter().zip(stride.iter().zip(&dilation)).any(|(&op, (&s, &d))| op >= s.max(d)) {
        return Err(Error::ArgValue {
            arg_idx: 7,
            name: "output_padding",
            found: format!("{output_padding:?}"),
            reason: "smaller than the stride or the dilation",
        });
    }
    let groups = c.int(8, "groups")?;
    let groups_ok = groups > 0 && c_in % groups as u64 == 0;
    if !groups_ok {
        return Err(Error::ArgValue {
            arg_idx: 8,
            name: "groups",
            found: groups.to_string(),
            reason: "groups > 0 dividing the input channels",
        });
    }
    let groups = groups as u64;
    let w_shape: Vec<u64> =
        if one_d && w.shape.len() == 3 { vec![w.shape[0], w.shape[1], 1, w.shape[2]] } else { w.shape.to_vec() };
    let [w0, w1, kh, kw] = w_shape[..] else {
        return Err(Error::Shape {
            arg_idx: 1,
            name: "weight",
            expected: format!("rank {}", x.shape.len()),
            found: w.shape.to_vec(),
        });
    };
    let (c_out, weight_ok) =
        if transposed { (w1 * groups, w0 == c_in) } else { (w0, w1 * groups == c_in && w0 % groups == 0) };
    if !weight_ok || kh == 0 || kw == 0 {
        let expected = if transposed {
            format!("[{c_in} (= C), OC / groups, KH, KW]")
        } else {
            format!("[OC, {} (= C / groups), KH, KW] with OC divisible by {groups}", c_in / groups)
        };
        return Err(Error::Shape { arg_idx: 1, name: "weight", expected, found: w.shape.to_vec() });
    }
    if let Some(b) = &bias {
        same_dtype(b, x.dtype, 2, "bias")?;
        if b.numel() != c_out {
            return Err(Error::Shape {
                arg_idx: 2,
                name: "bias",
                expected: format!("{c_out} elements"),
                found: b.shape.to_vec(),
            });
        }
    }
    let window_err = || Error::Shape {
        arg_idx: 0,
        name: "input",
        expected: "spatial dims at least the (dilated) kernel after padding".into(),
        found: x.shape.to_vec(),
    };
    let (oh, ow) = if transposed {
        let len = |i: usize, size: u64, k: u64| {
            // In i128 so hostile strides and paddings cannot overflow.
            let w = |x: u64| i128::from(x);
            let n = (w(size) - 1) * w(stride[i]) - 2 * w(padding[i])
                + w(dilation[i]) * (w(k) - 1)
                + w(output_padding[i])
                + 1;
            u64::try_from(n).ok().filter(|&n| n > 0)
        };
        (len(0, h, kh).ok_or_else(window_err)?, len(1, wd, kw).ok_or_else(window_err)?)
    } else {
        (
            out_len(h, kh, stride[0], padding[0], dilation[0], false).ok_or_else(window_err)?,
            out_len(wd, kw, stride[1], padding[1], dilation[1], false).ok_or_else(window_err)?,
        )
    };
    let (out_min, out_max) =
        if clamp { (c.opt_num(9, "output_min")?, c.opt_num(10, "output_max")?) } else { (None, None) };
    let shape = if one_d { vec![n, c_out, ow] } else { vec![n, c_out, oh, ow] };
    let numel = crate::plan::checked_numel(&shape)?;
    let mut steps = Vec::new();
    // Bounds beyond f32 (e.g. 1.797e308 for "no max") saturate.
    let bound = |v: Option<f64>| v.map(|v| v.clamp(f64::from(f32::MIN), f64::from(f32::MAX)) as f32);
    let geom = ConvGeom {
        n,
        c_in,
        h,
        w: wd,
        c_out,
        oh,
        ow,
        kh,
        kw,
        stride: [stride[0], stride[1]],
        padding: [padding[0], padding[1]],
        dilation: [dilation[0], dilation[1]],
        groups,
        transposed,
    };
    let ep = ConvEpilogue { has_bias: bias.is_some(), out_min: bound(out_min), out_max: bound(out_max), act: epilogue };
    let inputs = vec![x.id, w.id, bias.map_or(w.id, |b| b.id)];
    if numel > 0 && h * wd > 0 {
        to_u32("output elements", numel)?;
        match conv_route(&c.caps(), &geom, x.dtype == crate::ElemType::F16) {
            ConvRoute::Gemm => steps.extend(gemm_steps(c, &x, &geom, &ep, inputs, out.id, false)?),
            ConvRoute::Coop => steps.extend(gemm_steps(c, &x, &geom, &ep, inputs, out.id, true)?),
            ConvRoute::Direct => steps.push(Step::Dispatch(direct_dispatch(&x, &geom, &ep, inputs, out.id, numel)?)),
        }
    }
    Ok(Lowered { shapes: vec![(out.id, shape)], steps })
}

/// The window geometry of a 2-D pooling call.
struct Pool {
    planes: u64,
    h: u64,
    w: u64,
    oh: u64,
    ow: u64,
    kernel: Vec<u64>,
    stride: Vec<u64>,
    padding: Vec<u64>,
    dilation: Vec<u64>,
}

impl Pool {
    fn out_shape(&self, x: &TensorInfo<'_>) -> Vec<u64> {
        let mut s = x.shape.to_vec();
        let r = s.len();
        s[r - 2] = self.oh;
        s[r - 1] = self.ow;
        s
    }

    fn params(&self, count_include_pad: bool, divisor: u32) -> Result<Vec<u8>> {
        let u = to_u32;
        Ok(Uniform::new()
            .u32(u("output elements", self.planes * self.oh * self.ow)?)
            .u32(u("height", self.h)?)
            .u32(u("width", self.w)?)
            .u32(u("output height", self.oh)?)
            .u32(u("output width", self.ow)?)
            .u32(u("kernel", self.kernel[0])?)
            .u32(u("kernel", self.kernel[1])?)
            .u32(u("stride", self.stride[0])?)
            .u32(u("stride", self.stride[1])?)
            .u32(u("padding", self.padding[0])?)
            .u32(u("padding", self.padding[1])?)
            .u32(u("dilation", self.dilation[0])?)
            .u32(u("dilation", self.dilation[1])?)
            .u32(0)
            .u32(u32::from(count_include_pad))
            .u32(divisor)
            .finish())
    }
}

/// Decodes `self, kernel_size, stride, padding, [dilation,] ceil_mode`
/// (argument `ceil_idx`); an empty stride means the kernel size.
fn pool_geometry(c: &Ctx<'_>, x: &TensorInfo<'_>, dilation_idx: Option<usize>, ceil_idx: usize) -> Result<Pool> {
    let r = x.shape.len();
    if !(3..=4).contains(&r) {
        return Err(Error::Shape { arg_idx: 0, name: "self", expected: "rank 3 or 4".into(), found: x.shape.to_vec() });
    }
    let kernel = spatial(c, 1, "kernel_size", 2, 1)?;
    let stride = if c.int_list(2, "stride")?.is_empty() { kernel.clone() } else { spatial(c, 2, "stride", 2, 1)? };
    let padding = spatial(c, 3, "padding", 2, 0)?;
    let dilation = match dilation_idx {
        Some(i) => spatial(c, i, "dilation", 2, 1)?,
        None => vec![1, 1],
    };
    if padding.iter().zip(&kernel).any(|(&p, &k)| 2 * p > k) {
        return Err(Error::ArgValue {
            arg_idx: 3,
            name: "padding",
            found: format!("{padding:?}"),
            reason: "at most half the kernel size",
        });
    }
    let ceil_mode = c.bool(ceil_idx, "ceil_mode")?;
    let (h, w) = (x.shape[r - 2], x.shape[r - 1]);
    let window_err = || Error::Shape {
        arg_idx: 0,
        name: "self",
        expected: "spatial dims at least the (dilated) kernel after padding".into(),
        found: x.shape.to_vec(),
    };
    let oh = out_len(h, kernel[0], stride[0], padding[0], dilation[0], ceil_mode).ok_or_else(window_err)?;
    let ow = out_len(w, kernel[1], stride[1], padding[1], dilation[1], ceil_mode).ok_or_else(window_err)?;
    let planes = x.shape[..r - 2].iter().product();
    Ok(Pool { planes, h, w, oh, ow, kernel, stride, padding, dilation })
}

/// `aten.max_pool2d_with_indices.default(self, kernel_size, stride,
/// padding, dilation, ceil_mode, →[out, indices])`. Indices are int32 on
/// the device (int64 in PyTorch), flat over each `H * W` plane.
pub fn max_pool2d_with_indices(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(7)?;
    let x = c.tensor(0, "self")?;
    let outs = c.tensor_list(6, "out")?;
    let [out, indices] = outs[..] else {
        return Err(Error::ArgKind { arg_idx: 6, name: "out", expected: "ValueList of 2 tensors", found: "ValueList" });
    };
    let shader = float_shader(Family::MaxPool2d, &x, 0, "self")?;
    same_dtype(&out, x.dtype, 6, "out")?;
    if indices.dtype != crate::ElemType::I32 {
        return Err(Error::DType { arg_idx: 6, name: "indices", expected: "int32", found: indices.dtype });
    }
    let pool = pool_geometry(c, &x, Some(4), 5)?;
    let numel = pool.planes * pool.oh * pool.ow;
    let mut steps = Vec::new();
    if numel > 0 {
        steps.push(Step::Dispatch(Dispatch {
            shader: shader.into(),
            entry: "main",
            inputs: vec![x.id],
            outputs: vec![out.id, indices.id],
            params: pool.params(false, 0)?,
            workgroups: grid_1d(numel, WG_ROWS)?,
        }));
    }
    let shape = pool.out_shape(&x);
    Ok(Lowered { shapes: vec![(out.id, shape.clone()), (indices.id, shape)], steps })
}

/// `aten.max_pool2d.default(self, kernel_size, stride, padding, dilation,
/// ceil_mode, →out)`: the values of `max_pool2d_with_indices`.
pub fn max_pool2d(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(7)?;
    let x = c.tensor(0, "self")?;
    let out = c.tensor(6, "out")?;
    let shader = float_shader(Family::MaxPool2dValues, &x, 0, "self")?;
    same_dtype(&out, x.dtype, 6, "out")?;
    let pool = pool_geometry(c, &x, Some(4), 5)?;
    let numel = pool.planes * pool.oh * pool.ow;
    let mut steps = Vec::new();
    if numel > 0 {
        steps.push(Step::Dispatch(Dispatch {
            shader: shader.into(),
            entry: "main",
            inputs: vec![x.id],
            outputs: vec![out.id],
            params: pool.params(false, 0)?,
            workgroups: grid_1d(numel, WG_ROWS)?,
        }));
    }
    Ok(Lowered { shapes: vec![(out.id, pool.out_shape(&x))], steps })
}

/// `aten.avg_pool2d.default(self, kernel_size, stride, padding, ceil_mode,
/// count_include_pad, divisor_override?, →out)`.
pub fn avg_pool2d(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(8)?;
    let x = c.tensor(0, "self")?;
    let out = c.tensor(7, "out")?;
    let shader = float_shader(Family::AvgPool2d, &x, 0, "self")?;
    same_dtype(&out, x.dtype, 7, "out")?;
    let pool = pool_geometry(c, &x, None, 4)?;
    let count_include_pad = c.bool(5, "count_include_pad")?;
    let divisor = match c.opt_num(6, "divisor_override")? {
        None => 0,
        Some(d) if d >= 1.0 && d.fract() == 0.0 && d <= f64::from(u32::MAX) => d as u32,
        Some(d) => {
            return Err(Error::ArgValue {
                arg_idx: 6,
                name: "divisor_override",
                found: d.to_string(),
                reason: "a positive integer",
            });
        }
    };
    let numel = pool.planes * pool.oh * pool.ow;
    let mut steps = Vec::new();
    if numel > 0 {
        steps.push(Step::Dispatch(Dispatch {
            shader: shader.into(),
            entry: "main",
            inputs: vec![x.id],
            outputs: vec![out.id],
            params: pool.params(count_include_pad, divisor)?,
            workgroups: grid_1d(numel, WG_ROWS)?,
        }));
    }
    Ok(Lowered { shapes: vec![(out.id, pool.out_shape(&x))], steps })
}

/// The output size of a `.vec` upsample and each axis's scale as the
/// kernels use it: `output_size` wins; else `floor(in * scale_factor)`,
/// and the kernel scale is `1 / scale_factor` (PyTorch's rule when the
/// scale is given), else `in / out`.
fn upsample_geometry(
    c: &Ctx<'_>,
    x: &TensorInfo<'_>,
    size_idx: usize,
    scales_idx: usize,
) -> Result<([u64; 2], [Option<f64>; 2])> {
    let r = x.shape.len();
    if r < 2 {
        return Err(Error::Shape { arg_idx: 0, name: "input", expected: "rank >= 2".into(), found: x.shape.to_vec() });
    }
    let (h, w) = (x.shape[r - 2], x.shape[r - 1]);
    let scales = match c.value(scales_idx) {
        crate::plan::Value::Null => None,
        crate::plan::Value::DoubleList(s) if s.len() == 2 && s.iter().all(|&v| v > 0.0) => Some([s[0], s[1]]),
        v => {
            return Err(Error::ArgValue {
                arg_idx: scales_idx,
                name: "scale_factors",
                found: format!("{v:?}"),
                reason: "Null or two positive factors",
            });
        }
    };
    match (c.value(size_idx), scales) {
        (crate::plan::Value::Null, Some([sh, sw])) => {
            Ok(([(h as f64 * sh).floor() as u64, (w as f64 * sw).floor() as u64], [Some(sh), Some(sw)]))
        }
        (crate::plan::Value::Null, None) => Err(Error::ArgValue {
            arg_idx: size_idx,
            name: "output_size",
            found: "Null".into(),
            reason: "output_size or scale_factors is given",
        }),
        _ => {
            let size = c.int_list(size_idx, "output_size")?;
            match size[..] {
                [oh, ow] if oh > 0 && ow > 0 => Ok(([oh as u64, ow as u64], [None, None])),
                _ => Err(Error::ArgValue {
                    arg_idx: size_idx,
                    name: "output_size",
                    found: format!("{size:?}"),
                    reason: "two positive sizes",
                }),
            }
        }
    }
}

/// `aten.upsample_nearest2d.vec(input, output_size?, scale_factors?, →out)`
/// and, with `bilinear`, `aten.upsample_bilinear2d.vec(input,
/// output_size?, align_corners, scale_factors?, →out)`.
pub fn upsample2d(c: &Ctx<'_>, bilinear: bool) -> Result<Lowered> {
    let n_args = if bilinear { 5 } else { 4 };
    c.expect_args(n_args)?;
    let x = c.tensor(0, "input")?;
    let out = c.tensor(n_args - 1, "out")?;
    let shader = float_shader(Family::Upsample, &x, 0, "input")?;
    same_dtype(&out, x.dtype, n_args - 1, "out")?;
    let align_corners = bilinear && c.bool(2, "align_corners")?;
    let ([oh, ow], factors) = upsample_geometry(c, &x, 1, n_args - 2)?;
    let r = x.shape.len();
    let (h, w) = (x.shape[r - 2], x.shape[r - 1]);
    let scale = |i: usize, n_in: u64, n_out: u64| -> f32 {
        if align_corners {
            if n_out > 1 { (n_in as f64 - 1.0) as f32 / (n_out as f64 - 1.0) as f32 } else { 0.0 }
        } else {
            match factors[i] {
                Some(f) => (1.0 / f) as f32,
                None => n_in as f32 / n_out as f32,
            }
        }
    };
    let mut shape = x.shape.to_vec();
    shape[r - 2] = oh;
    shape[r - 1] = ow;
    let numel = crate::plan::checked_numel(&shape)?;
    let mut steps = Vec::new();
    if numel > 0 && h * w > 0 {
        let params = Uniform::new()
            .u32(to_u32("output elements", numel)?)
            .u32(to_u32("height", h)?)
            .u32(to_u32("width", w)?)
            .u32(to_u32("output height", oh)?)
            .u32(to_u32("output width", ow)?)
            .u32(u32::from(bilinear))
            .u32(u32::from(align_corners))
            .u32(0)
            .f32(scale(0, h, oh))
            .f32(scale(1, w, ow))
            .finish();
        steps.push(Step::Dispatch(Dispatch {
            shader: shader.into(),
            entry: "main",
            inputs: vec![x.id],
            outputs: vec![out.id],
            params,
            workgroups: grid_1d(numel, crate::plan::WG_ELEMENTWISE)?,
        }));
    }
    Ok(Lowered { shapes: vec![(out.id, shape)], steps })
}

/// `aten.grid_sampler_2d.default(input, grid, interpolation_mode,
/// padding_mode, align_corners, →out)`: `input [N, C, H, W]` sampled at
/// `grid [N, Ho, Wo, 2]` into `[N, C, Ho, Wo]`. Modes: bilinear (0) and
/// nearest (1); padding: zeros (0) and border (1).
pub fn grid_sampler_2d(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(6)?;
    let x = c.tensor(0, "input")?;
    let grid = c.tensor(1, "grid")?;
    let out = c.tensor(5, "out")?;
    let shader = float_shader(Family::GridSampler, &x, 0, "input")?;
    same_dtype(&grid, x.dtype, 1, "grid")?;
    same_dtype(&out, x.dtype, 5, "out")?;
    let mode = c.int(2, "interpolation_mode")?;
    if !(0..=1).contains(&mode) {
        return Err(Error::ArgValue {
            arg_idx: 2,
            name: "interpolation_mode",
            found: mode.to_string(),
            reason: "0 (bilinear) or 1 (nearest)",
        });
    }
    let padding = c.int(3, "padding_mode")?;
    if !(0..=1).contains(&padding) {
        return Err(Error::ArgValue {
            arg_idx: 3,
            name: "padding_mode",
            found: padding.to_string(),
            reason: "0 (zeros) or 1 (border)",
        });
    }
    let align_corners = c.bool(4, "align_corners")?;
    let [n, ch, h, w] = *x.shape else {
        return Err(Error::Shape { arg_idx: 0, name: "input", expected: "rank 4".into(), found: x.shape.to_vec() });
    };
    let [gn, oh, ow, 2] = *grid.shape else {
        return Err(Error::Shape {
            arg_idx: 1,
            name: "grid",
            expected: "[N, H, W, 2]".into(),
            found: grid.shape.to_vec(),
        });
    };
    if gn != n {
        return Err(Error::Shape {
            arg_idx: 1,
            name: "grid",
            expected: format!("batch {n} as the input"),
            found: grid.shape.to_vec(),
        });
    }
    let shape = vec![n, ch, oh, ow];
    let numel = crate::plan::checked_numel(&shape)?;
    let mut steps = Vec::new();
    if numel > 0 {
        let u = to_u32;
        steps.push(Step::Dispatch(Dispatch {
            shader: shader.into(),
            entry: "main",
            inputs: vec![x.id, grid.id],
            outputs: vec![out.id],
            params: Uniform::new()
                .u32(u("output elements", numel)?)
                .u32(u("channels", ch)?)
                .u32(u("height", h)?)
                .u32(u("width", w)?)
                .u32(u("grid height", oh)?)
                .u32(u("grid width", ow)?)
                .u32(mode as u32)
                .u32(padding as u32)
                .u32(u32::from(align_corners))
                .finish(),
            workgroups: grid_1d(numel, WG_ROWS)?,
        }));
    }
    Ok(Lowered { shapes: vec![(out.id, shape)], steps })
}
