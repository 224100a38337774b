//! Creation ops (`fill.wgsl`): `aten.full`, `aten.zeros`, `aten.ones`, their
//! `_like` forms, `aten.scalar_tensor` and `aten.arange.start_step`. The
//! dtype, layout and device args arrive as `Null`; the output tensor's
//! dtype is the one to fill. `et_vk.grid_priors` (`grid_priors.wgsl`)
//! writes the anchor points of a feature map.

use crate::error::{Error, Result};
use crate::generated::shaders::{Family, ShaderId, Variant};
use crate::plan::{
    Ctx, Dispatch, ElemType, Lowered, Step, TensorInfo, Uniform, Value, WG_ELEMENTWISE, grid_1d, to_u32,
};

/// `out[i] = start + i * step` in the output's dtype.
fn fill(out: &TensorInfo<'_>, out_idx: usize, shape: Vec<u64>, start: f64, step: f64) -> Result<Lowered> {
    let (variant, is_int) = match out.dtype {
        ElemType::F32 => (Variant::F32, false),
        ElemType::F16 => (Variant::F16, false),
        ElemType::I32 | ElemType::Bool => (Variant::I32, true),
        found => {
            return Err(Error::DType {
                arg_idx: out_idx,
                name: "out",
                expected: "float32, float16, int32 or bool",
                found,
            });
        }
    };
    let shader = ShaderId::find(Family::Fill, variant).expect("fill.wgsl has f32, f16 and i32 variants");
    let (start, step) =
        if out.dtype == ElemType::Bool { (f64::from(u8::from(start != 0.0)), 0.0) } else { (start, step) };
    let numel = crate::plan::checked_numel(&shape)?;
    let as_i32 = |v: f64, name: &'static str| {
        if v.fract() == 0.0 && v >= f64::from(i32::MIN) && v <= f64::from(i32::MAX) {
            Ok(v as i32)
        } else {
            Err(Error::ArgValue { arg_idx: 0, name, found: v.to_string(), reason: "an int32 for an int32 tensor" })
        }
    };
    let (start_i, step_i) = if is_int { (as_i32(start, "value")?, as_i32(step, "step")?) } else { (0, 0) };
    if is_int && numel > 0 {
        let last = start + step * (numel - 1) as f64;
        as_i32(last, "end")?;
    }
    let mut steps = Vec::new();
    if numel > 0 {
        let params = Uniform::new()
            .u32(to_u32("numel", numel)?)
            .u32(u32::from(is_int))
            .i32(start_i)
            .i32(step_i)
            .f32(start as f32)
            .f32(step as f32)
            .finish();
        steps.push(Step::Dispatch(Dispatch {
            shader: shader.into(),
            entry: "main",
            inputs: Vec::new(),
            outputs: vec![out.id],
            params,
            workgroups: grid_1d(numel, WG_ELEMENTWISE)?,
        }));
    }
    Ok(Lowered { shapes: vec![(out.id, shape)], steps })
}

fn size_arg(c: &Ctx<'_>, i: usize) -> Result<Vec<u64>> {
    let size = c.int_list(i, "size")?;
    size.iter().map(|&d| u64::try_from(d)).collect::<std::result::Result<_, _>>().map_err(|_| Error::ArgValue {
        arg_idx: i,
        name: "size",
        found: format!("{size:?}"),
        reason: "sizes >= 0",
    })
}

/// A Scalar argument: a number, or a bool as 0 or 1 (HF attention masks
/// fill with `True`).
fn scalar(c: &Ctx<'_>, i: usize, name: &'static str) -> Result<f64> {
    match c.value(i) {
        Value::Bool(b) => Ok(f64::from(u8::from(b))),
        _ => c.num(i, name),
    }
}

/// `aten.full.default(size, fill_value, dtype, layout, device, pin_memory,
/// →out)`.
pub fn full(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(7)?;
    let value = scalar(c, 1, "fill_value")?;
    fill(&c.tensor(6, "out")?, 6, size_arg(c, 0)?, value, 0.0)
}

/// `aten.{zeros,ones}.default(size, dtype, layout, device, pin_memory,
/// →out)`.
pub fn constant(c: &Ctx<'_>, value: f64) -> Result<Lowered> {
    c.expect_args(6)?;
    fill(&c.tensor(5, "out")?, 5, size_arg(c, 0)?, value, 0.0)
}

/// `aten.full_like.default(self, fill_value, dtype, layout, device,
/// pin_memory, memory_format, →out)`.
pub fn full_like(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(8)?;
    let x = c.tensor(0, "self")?;
    let value = scalar(c, 1, "fill_value")?;
    fill(&c.tensor(7, "out")?, 7, x.shape.to_vec(), value, 0.0)
}

/// `aten.{zeros,ones}_like.default(self, dtype, layout, device,
/// pin_memory, memory_format, →out)`.
pub fn constant_like(c: &Ctx<'_>, value: f64) -> Result<Lowered> {
    c.expect_args(7)?;
    let x = c.tensor(0, "self")?;
    fill(&c.tensor(6, "out")?, 6, x.shape.to_vec(), value, 0.0)
}

/// `aten.scalar_tensor.default(s, dtype, layout, device, pin_memory,
/// →out [])`.
pub fn scalar_tensor(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(6)?;
    let value = scalar(c, 0, "s")?;
    fill(&c.tensor(5, "out")?, 5, Vec::new(), value, 0.0)
}

/// `aten.arange.start_step(start, end, step, dtype, layout, device,
/// pin_memory, →out)`: `ceil((end - start) / step)` values.
pub fn arange(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(8)?;
    let start = c.num(0, "start")?;
    let end = c.num(1, "end")?;
    let step = c.num(2, "step")?;
    let n = (end - start) / step;
    if step == 0.0 || !n.is_finite() || n < 0.0 {
        return Err(Error::ArgValue {
            arg_idx: 2,
            name: "step",
            found: format!("start {start}, end {end}, step {step}"),
            reason: "a nonzero step that walks from start toward end",
        });
    }
    fill(&c.tensor(7, "out")?, 7, vec![n.ceil() as u64], start, step)
}

/// `et_vk.grid_priors.default(self, stride, offset, →out)`: `[H * W, 2]`
/// points `((w + offset) * stride, (h + offset) * stride)` of the input's
/// last two dims `[H, W]`; only the input's shape is read.
pub fn grid_priors(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(4)?;
    let x = c.tensor(0, "self")?;
    let stride = c.num(1, "stride")?;
    let offset = c.num(2, "offset")?;
    let out = c.tensor(3, "out")?;
    let shader = crate::plan::float_shader(Family::GridPriors, &out, 3, "out")?;
    let [.., h, w] = *x.shape else {
        return Err(Error::Shape { arg_idx: 0, name: "self", expected: "rank >= 2".into(), found: x.shape.to_vec() });
    };
    let n_points = crate::plan::checked_numel(&[h, w])?;
    let mut steps = Vec::new();
    if n_points > 0 {
        steps.push(Step::Dispatch(Dispatch {
            shader: shader.into(),
            entry: "main",
            inputs: Vec::new(),
            outputs: vec![out.id],
            params: Uniform::new()
                .u32(to_u32("points", n_points)?)
                .u32(to_u32("width", w)?)
                .f32(stride as f32)
                .f32(offset as f32)
                .finish(),
            workgroups: grid_1d(n_points, WG_ELEMENTWISE)?,
        }));
    }
    Ok(Lowered { shapes: vec![(out.id, vec![n_points, 2])], steps })
}
