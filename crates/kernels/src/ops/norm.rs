//! Normalizations: `aten._softmax`, `aten._log_softmax` (`softmax.wgsl`),
//! `aten.native_layer_norm` (`layer_norm.wgsl`), inference batch norm
//! (`batch_norm.wgsl`) and `aten.native_group_norm` (`group_norm.wgsl`).

use crate::error::{Error, Result};
use crate::generated::shaders::Family;
use crate::plan::{
    Ctx, Dispatch, Lowered, Step, Uniform, WG_ELEMENTWISE, WG_ROWS, float_shader, grid_1d, grid_groups, norm_dim,
    same_dtype, to_u32,
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
        // Contiguous rows: one workgroup each; strided rows: one
        // invocation each (neighbouring invocations, neighbouring addresses).
        let (shader, workgroups) = if inner == 1 {
            (float_shader(Family::SoftmaxRows, &x, 0, "self")?, grid_groups(rows)?)
        } else {
            (shader, grid_1d(rows, WG_ROWS)?)
        };
        steps.push(Step::Dispatch(Dispatch {
            shader: shader.into(),
            entry: "main",
            inputs: vec![x.id],
            outputs: vec![out.id],
            params,
            workgroups,
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
            shader: shader.into(),
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

/// `aten._native_batch_norm_legit_no_training.default(input, weight?,
/// bias?, running_mean, running_var, momentum, eps, →[out, save_mean,
/// save_invstd])`: inference batch norm over dim 1. The two saved stats
/// are the exporter's empty `[0]` tensors and are not written.
pub fn batch_norm_no_training(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(8)?;
    let x = c.tensor(0, "input")?;
    let weight = c.opt_tensor(1, "weight")?;
    let bias = c.opt_tensor(2, "bias")?;
    let mean = c.tensor(3, "running_mean")?;
    let var = c.tensor(4, "running_var")?;
    c.num(5, "momentum")?;
    let eps = c.num(6, "eps")?;
    let outs = c.tensor_list(7, "out")?;
    let [out, save_mean, save_invstd] = outs[..] else {
        return Err(Error::ArgKind { arg_idx: 7, name: "out", expected: "ValueList of 3 tensors", found: "ValueList" });
    };
    let shader = float_shader(Family::BatchNorm, &x, 0, "input")?;
    same_dtype(&out, x.dtype, 7, "out")?;
    if x.shape.len() < 2 {
        return Err(Error::Shape { arg_idx: 0, name: "input", expected: "rank >= 2".into(), found: x.shape.to_vec() });
    }
    let ch = x.shape[1];
    for (t, idx, name) in
        [(weight, 1, "weight"), (bias, 2, "bias"), (Some(mean), 3, "running_mean"), (Some(var), 4, "running_var")]
    {
        if let Some(t) = t {
            same_dtype(&t, x.dtype, idx, name)?;
            if t.numel() != ch {
                return Err(Error::Shape {
                    arg_idx: idx,
                    name,
                    expected: format!("{ch} elements"),
                    found: t.shape.to_vec(),
                });
            }
        }
    }
    let numel = x.numel();
    let mut steps = Vec::new();
    if numel > 0 {
        let params = Uniform::new()
            .u32(to_u32("numel", numel)?)
            .u32(to_u32("channels", ch)?)
            .u32(to_u32("inner size", x.shape[2..].iter().product())?)
            .u32(u32::from(weight.is_some()))
            .u32(u32::from(bias.is_some()))
            .f32(eps as f32)
            .finish();
        steps.push(Step::Dispatch(Dispatch {
            shader: shader.into(),
            entry: "main",
            inputs: vec![x.id, weight.map_or(mean.id, |t| t.id), bias.map_or(mean.id, |t| t.id), mean.id, var.id],
            outputs: vec![out.id],
            params,
            workgroups: grid_1d(numel, WG_ELEMENTWISE)?,
        }));
    }
    Ok(Lowered {
        shapes: vec![
            (out.id, x.shape.to_vec()),
            (save_mean.id, save_mean.shape.to_vec()),
            (save_invstd.id, save_invstd.shape.to_vec()),
        ],
        steps,
    })
}

/// `aten.native_group_norm.default(input, weight?, bias?, N, C, HxW, group,
/// eps, →[out, mean[N, group], rstd[N, group]])`.
pub fn native_group_norm(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(9)?;
    let x = c.tensor(0, "input")?;
    let weight = c.opt_tensor(1, "weight")?;
    let bias = c.opt_tensor(2, "bias")?;
    let groups = c.int(6, "group")?;
    let eps = c.num(7, "eps")?;
    let outs = c.tensor_list(8, "out")?;
    let [out, mean, rstd] = outs[..] else {
        return Err(Error::ArgKind { arg_idx: 8, name: "out", expected: "ValueList of 3 tensors", found: "ValueList" });
    };
    let shader = float_shader(Family::GroupNorm, &x, 0, "input")?;
    for t in [&out, &mean, &rstd] {
        same_dtype(t, x.dtype, 8, "out")?;
    }
    // N, C and HxW are baked at export; the live shape is the truth.
    for i in 3..6 {
        c.int(i, ["N", "C", "HxW"][i - 3])?;
    }
    if x.shape.len() < 2 {
        return Err(Error::Shape { arg_idx: 0, name: "input", expected: "rank >= 2".into(), found: x.shape.to_vec() });
    }
    let (n, ch) = (x.shape[0], x.shape[1]);
    if groups <= 0 || ch % groups as u64 != 0 {
        return Err(Error::ArgValue {
            arg_idx: 6,
            name: "group",
            found: groups.to_string(),
            reason: "groups > 0 dividing the channels",
        });
    }
    let groups = groups as u64;
    for (t, idx, name) in [(weight, 1, "weight"), (bias, 2, "bias")] {
        if let Some(t) = t {
            same_dtype(&t, x.dtype, idx, name)?;
            if t.numel() != ch {
                return Err(Error::Shape {
                    arg_idx: idx,
                    name,
                    expected: format!("{ch} elements"),
                    found: t.shape.to_vec(),
                });
            }
        }
    }
    let inner: u64 = x.shape[2..].iter().product();
    let rows = n * groups;
    let mut steps = Vec::new();
    if x.numel() > 0 {
        let params = Uniform::new()
            .u32(to_u32("rows", rows)?)
            .u32(to_u32("groups", groups)?)
            .u32(to_u32("channels per group", ch / groups)?)
            .u32(to_u32("inner size", inner)?)
            .u32(u32::from(weight.is_some()))
            .u32(u32::from(bias.is_some()))
            .f32(eps as f32)
            .finish();
        steps.push(Step::Dispatch(Dispatch {
            shader: shader.into(),
            entry: "main",
            inputs: vec![x.id, weight.map_or(x.id, |t| t.id), bias.map_or(x.id, |t| t.id)],
            outputs: vec![out.id, mean.id, rstd.id],
            params,
            workgroups: grid_1d(rows, WG_ROWS)?,
        }));
    }
    Ok(Lowered {
        shapes: vec![(out.id, x.shape.to_vec()), (mean.id, vec![n, groups]), (rstd.id, vec![n, groups])],
        steps,
    })
}
