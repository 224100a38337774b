//! Row-wise normalizations: `aten._softmax`, `aten._log_softmax`
//! (`softmax.wgsl`) and `aten.native_layer_norm` (`layer_norm.wgsl`).

use crate::error::{Error, Result};
use crate::generated::shaders::Family;
use crate::plan::{
    Ctx, Dispatch, Lowered, Step, Uniform, WG_ROWS, float_shader, grid_1d, norm_dim, same_dtype, to_u32,
};

/// `aten._softmax.default(self, dim, half_to_float, →out)`, and
/// `aten._log_softmax.default` with `log`.
pub fn softmax(c: &Ctx<'_>, log: bool) -> Result<Lowered> {
    c.expect_args(4)?;
    let x = c.tensor(0, "self")?;
    let dim = c.int(1, "dim")?;
    let out = c.tensor(3, "out")?;
    let shader = float_shader(Family::Softmax, &x, 0, "self")?;
    same_dtype(&out, x.dtype, 3, "out")?;
    let rank = x.shape.len().max(1);
    let d = norm_dim(dim, rank).ok_or_else(|| Error::ArgValue {
        arg_idx: 1,
        name: "dim",
        found: dim.to_string(),
        reason: "dim out of range",
    })?;
    let shape: Vec<u64> = if x.shape.is_empty() { vec![1] } else { x.shape.to_vec() };
    let dim_size = shape[d];
    let inner: u64 = shape[d + 1..].iter().product();
    let rows = x.numel() / dim_size.max(1);
    let mut steps = Vec::new();
    if x.numel() > 0 {
        let params = Uniform::new()
            .u32(to_u32("rows", rows)?)
            .u32(to_u32("dim size", dim_size)?)
            .u32(to_u32("inner size", inner)?)
            .u32(u32::from(log))
            .finish();
        steps.push(Step::Dispatch(Dispatch {
            shader,
            entry: "main",
            inputs: vec![x.id],
            outputs: vec![out.id],
            params,
            workgroups: grid_1d(rows, WG_ROWS)?,
        }));
    }
    Ok(Lowered { shapes: vec![(out.id, x.shape.to_vec())], steps })
}

/// `aten.native_layer_norm.default(input, normalized_shape, weight?, bias?,
/// eps, →[out, mean, rstd])`. `mean` and `rstd` keep the leading dims and
/// have size 1 along the normalized ones.
pub fn native_layer_norm(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(6)?;
    let x = c.tensor(0, "input")?;
    let norm_shape = c.int_list(1, "normalized_shape")?;
    let weight = c.opt_tensor(2, "weight")?;
    let bias = c.opt_tensor(3, "bias")?;
    let eps = c.num(4, "eps")?;
    let outs = c.tensor_list(5, "out")?;
    let [out, mean, rstd] = outs[..] else {
        return Err(Error::ArgKind { arg_idx: 5, name: "out", expected: "ValueList of 3 tensors", found: "ValueList" });
    };
    let shader = float_shader(Family::LayerNorm, &x, 0, "input")?;
    for t in [&out, &mean, &rstd] {
        same_dtype(t, x.dtype, 5, "out")?;
    }
    let nd = norm_shape.len();
    let fits = nd <= x.shape.len()
        && x.shape[x.shape.len() - nd..].iter().zip(&norm_shape).all(|(&a, &b)| i64::try_from(a) == Ok(b));
    if !fits {
        return Err(Error::Shape {
            arg_idx: 0,
            name: "input",
            expected: format!("ending in normalized_shape {norm_shape:?}"),
            found: x.shape.to_vec(),
        });
    }
    let n: u64 = x.shape[x.shape.len() - nd..].iter().product();
    for (t, idx, name) in [(&weight, 2, "weight"), (&bias, 3, "bias")] {
        if let Some(t) = t {
            same_dtype(t, x.dtype, idx, name)?;
            if t.numel() != n {
                return Err(Error::Shape {
                    arg_idx: idx,
                    name,
                    expected: format!("{n} elements"),
                    found: t.shape.to_vec(),
                });
            }
        }
    }
    let rows = x.numel().checked_div(n).unwrap_or(0);
    let mut stat_shape = x.shape.to_vec();
    let lead = stat_shape.len() - nd;
    stat_shape[lead..].iter_mut().for_each(|d| *d = 1);
    let mut steps = Vec::new();
    if rows > 0 {
        let params = Uniform::new()
            .u32(to_u32("rows", rows)?)
            .u32(to_u32("normalized size", n)?)
            .u32(u32::from(weight.is_some()))
            .u32(u32::from(bias.is_some()))
            .f32(eps as f32)
            .finish();
        steps.push(Step::Dispatch(Dispatch {
            shader,
            entry: "main",
            inputs: vec![x.id, weight.map_or(x.id, |t| t.id), bias.map_or(x.id, |t| t.id)],
            outputs: vec![out.id, mean.id, rstd.id],
            params,
            workgroups: grid_1d(rows, WG_ROWS)?,
        }));
    }
    Ok(Lowered {
        shapes: vec![(out.id, x.shape.to_vec()), (mean.id, stat_shape.clone()), (rstd.id, stat_shape)],
        steps,
    })
}
