//! Training ops (on-device fine-tuning of adapters over 4-bit base
//! weights): `et_vk.adamw_step` (`train_adamw.wgsl`), `et_vk.fused_ce`
//! (`train_ce.wgsl` then `train_ce_loss.wgsl`), `et_vk.linear_dW`
//! (`train_linear_dw.wgsl`), `et_vk.linear_q4gsw_backward`
//! (`train_q4_backward.wgsl`) and `et_vk.q4gsw_requant`
//! (`train_q4_requant.wgsl`). Every one is float32 only, as upstream's.
//!
//! `adamw_step` updates its parameter and both moments in place
//! ([`OpId::mutated_args`](crate::OpId::mutated_args) lists them): the
//! dispatch binds them as outputs, and the op's output list, when its
//! entries are other values than the inputs, aliases them.

use crate::error::{Error, Result};
use crate::generated::shaders::{Family, ShaderId, Variant};
use crate::ops::quant::check_q4_weight;
use crate::plan::{
    Ctx, Dispatch, ElemType, Lowered, Step, TensorInfo, Uniform, WG_ELEMENTWISE, grid_1d, grid_groups, to_u32,
};

fn shape_err(arg_idx: usize, name: &'static str, expected: String, t: &TensorInfo<'_>) -> Error {
    Error::Shape { arg_idx, name, expected, found: t.shape.to_vec() }
}

/// The f32 shader of `family` for tensor argument `t`, or a dtype error.
fn f32_shader(family: Family, t: &TensorInfo<'_>, arg_idx: usize, name: &'static str) -> Result<ShaderId> {
    f32_only(t, arg_idx, name)?;
    ShaderId::find(family, Variant::F32).ok_or(Error::DType { arg_idx, name, expected: "float32", found: t.dtype })
}

/// Checks that `t` is float32.
fn f32_only(t: &TensorInfo<'_>, arg_idx: usize, name: &'static str) -> Result<()> {
    if t.dtype == ElemType::F32 {
        Ok(())
    } else {
        Err(Error::DType { arg_idx, name, expected: "float32", found: t.dtype })
    }
}

/// `v` as an f32 uniform, or an error when it is not finite there.
fn finite_f32(v: f64, arg_idx: usize, name: &'static str) -> Result<f32> {
    let x = v as f32;
    if x.is_finite() {
        Ok(x)
    } else {
        Err(Error::ArgValue { arg_idx, name, found: v.to_string(), reason: "must be finite in float32" })
    }
}

/// `et_vk.adamw_step.default(param, m, v, grad, lr, beta1, beta2, eps,
/// weight_decay, bias_correction1, bias_correction2, →(param, m, v))`:
/// one AdamW step in place. The bias corrections (`1 - beta^t`) come in
/// as arguments, so the step count is the caller's.
pub fn adamw_step(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(12)?;
    let param = c.tensor(0, "param")?;
    let m = c.tensor(1, "m")?;
    let v = c.tensor(2, "v")?;
    let grad = c.tensor(3, "grad")?;
    let shader = f32_shader(Family::TrainAdamw, &param, 0, "param")?;
    let numel = param.numel();
    for (t, idx, name) in [(&m, 1, "m"), (&v, 2, "v"), (&grad, 3, "grad")] {
        f32_only(t, idx, name)?;
        if t.numel() != numel {
            return Err(shape_err(idx, name, format!("{numel} elements (param's)"), t));
        }
    }
    let names = ["lr", "beta1", "beta2", "eps", "weight_decay", "bias_correction1", "bias_correction2"];
    let mut s = [0f64; 7];
    for (k, name) in names.into_iter().enumerate() {
        s[k] = c.num(4 + k, name)?;
    }
    let [lr, beta1, beta2, eps, wd, bc1, bc2] = s;
    for (x, idx, name) in [(bc1, 9, "bias_correction1"), (bc2, 10, "bias_correction2")] {
        if x == 0.0 {
            return Err(Error::ArgValue { arg_idx: idx, name, found: x.to_string(), reason: "must be nonzero" });
        }
    }
    let outs = c.tensor_list(11, "out")?;
    let [o_param, o_m, o_v] = outs[..] else {
        return Err(Error::ArgKind {
            arg_idx: 11,
            name: "out",
            expected: "ValueList of 3 tensors",
            found: "ValueList",
        });
    };
    let mut steps = Vec::new();
    if numel > 0 {
        let params = Uniform::new()
            .u32(to_u32("numel", numel)?)
            .f32(finite_f32(1.0 - lr * wd, 8, "weight_decay")?)
            .f32(finite_f32(beta1, 5, "beta1")?)
            .f32(finite_f32(1.0 - beta1, 5, "beta1")?)
            .f32(finite_f32(beta2, 6, "beta2")?)
            .f32(finite_f32(1.0 - beta2, 6, "beta2")?)
            .f32(finite_f32(bc1, 9, "bias_correction1")?)
            .f32(finite_f32(bc2, 10, "bias_correction2")?)
            .f32(finite_f32(eps, 7, "eps")?)
            .f32(finite_f32(lr, 4, "lr")?)
            .finish();
        steps.push(Step::Dispatch(Dispatch {
            shader: shader.into(),
            entry: "main",
            inputs: vec![grad.id],
            outputs: vec![param.id, m.id, v.id],
            params,
            workgroups: grid_1d(numel, WG_ELEMENTWISE)?,
        }));
    }
    let mut shapes = Vec::new();
    for (out, src, name) in [(o_param, param, "param"), (o_m, m, "m"), (o_v, v, "v")] {
        if out.id == src.id {
            continue;
        }
        if out.numel() != src.numel() || out.dtype != src.dtype {
            return Err(shape_err(11, "out", format!("{name}'s {} float32 elements", src.numel()), &out));
        }
        shapes.push((out.id, src.shape.to_vec()));
        steps.push(Step::Alias { out: out.id, src: src.id });
    }
    Ok(Lowered { shapes, steps })
}

/// `et_vk.fused_ce.default(logits [R, V], labels int32 [R], n_valid,
/// →(loss [], dlogits [R, V]))`: the mean-style cross-entropy (each row's
/// term divided by `n_valid`, rows with a negative label left out) and its
/// gradient with respect to the logits.
pub fn fused_ce(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(4)?;
    let logits = c.tensor(0, "logits")?;
    let labels = c.tensor(1, "labels")?;
    let n_valid = c.num(2, "n_valid")?;
    let outs = c.tensor_list(3, "out")?;
    let [loss, dlogits] = outs[..] else {
        return Err(Error::ArgKind { arg_idx: 3, name: "out", expected: "ValueList of 2 tensors", found: "ValueList" });
    };
    let rows_shader = f32_shader(Family::TrainCe, &logits, 0, "logits")?;
    let loss_shader = f32_shader(Family::TrainCeLoss, &logits, 0, "logits")?;
    let [rows, vocab] = logits.shape[..] else {
        return Err(shape_err(0, "logits", "[rows, vocab]".into(), &logits));
    };
    if labels.dtype != ElemType::I32 {
        return Err(Error::DType { arg_idx: 1, name: "labels", expected: "int32", found: labels.dtype });
    }
    if labels.shape != [rows] {
        return Err(shape_err(1, "labels", format!("[{rows}] (one per logits row)"), &labels));
    }
    f32_only(&loss, 3, "out")?;
    f32_only(&dlogits, 3, "out")?;
    if loss.numel() != 1 {
        return Err(shape_err(3, "out", "a one-element loss".into(), &loss));
    }
    if dlogits.numel() != rows * vocab {
        return Err(shape_err(3, "out", format!("dlogits of {} elements (logits')", rows * vocab), &dlogits));
    }
    let n = finite_f32(n_valid, 2, "n_valid")?;
    if n == 0.0 {
        return Err(Error::ArgValue {
            arg_idx: 2,
            name: "n_valid",
            found: n_valid.to_string(),
            reason: "must be nonzero",
        });
    }
    let params = Uniform::new().u32(to_u32("rows", rows)?).u32(to_u32("vocab", vocab)?).f32(n).finish();
    let mut steps = Vec::new();
    if rows * vocab > 0 {
        steps.push(Step::Dispatch(Dispatch {
            shader: rows_shader.into(),
            entry: "main",
            inputs: vec![logits.id, labels.id],
            outputs: vec![dlogits.id],
            params: params.clone(),
            workgroups: grid_groups(rows)?,
        }));
    }
    // The loss kernel writes 0 for no rows, so it runs whatever the sizes.
    steps.push(Step::Dispatch(Dispatch {
        shader: loss_shader.into(),
        entry: "main",
        inputs: vec![logits.id, labels.id],
        outputs: vec![loss.id],
        params,
        workgroups: [1, 1, 1],
    }));
    Ok(Lowered { shapes: vec![(loss.id, Vec::new()), (dlogits.id, logits.shape.to_vec())], steps })
}

/// `et_vk.linear_dW.default(d_out [.., N], x [.., K], →dW [N, K])`:
/// `d_out^T @ x` over the flattened leading dims, the weight gradient of
/// a linear.
pub fn linear_dw(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(3)?;
    let d_out = c.tensor(0, "d_out")?;
    let x = c.tensor(1, "x")?;
    let out = c.tensor(2, "out")?;
    let shader = f32_shader(Family::TrainLinearDw, &d_out, 0, "d_out")?;
    f32_only(&x, 1, "x")?;
    f32_only(&out, 2, "out")?;
    let (Some(&n), Some(&k)) = (d_out.shape.last(), x.shape.last()) else {
        let (i, name, t) = if d_out.shape.is_empty() { (0, "d_out", &d_out) } else { (1, "x", &x) };
        return Err(shape_err(i, name, "[..., features]".into(), t));
    };
    let m = d_out.numel().checked_div(n).unwrap_or(0);
    let mx = x.numel().checked_div(k).unwrap_or(0);
    if n > 0 && k > 0 && m != mx {
        return Err(shape_err(1, "x", format!("{m} rows (d_out's) of {k}"), &x));
    }
    let mut steps = Vec::new();
    if n * k > 0 {
        let params = Uniform::new().u32(to_u32("rows", m)?).u32(to_u32("N", n)?).u32(to_u32("K", k)?).finish();
        steps.push(Step::Dispatch(Dispatch {
            shader: shader.into(),
            entry: "main",
            inputs: vec![d_out.id, x.id],
            outputs: vec![out.id],
            params,
            workgroups: grid_1d(n * k, WG_ELEMENTWISE)?,
        }));
    }
    Ok(Lowered { shapes: vec![(out.id, vec![n, k])], steps })
}

/// `et_vk.linear_q4gsw_backward.default(d_out [.., N], weights u8
/// [N, K/2], weight_scales [G, N_pad], group_size, →d_x [.., K])`: the
/// input gradient through a frozen `linear_q4gsw`, `K` twice the row
/// bytes as upstream's shape rule has it.
pub fn linear_q4gsw_backward(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(5)?;
    let d_out = c.tensor(0, "d_out")?;
    let weights = c.tensor(1, "weights")?;
    let scales = c.tensor(2, "weight_scales")?;
    let group_size = c.int(3, "group_size")?;
    let out = c.tensor(4, "out")?;
    let shader = f32_shader(Family::TrainQ4Backward, &d_out, 0, "d_out")?;
    f32_only(&scales, 2, "weight_scales")?;
    f32_only(&out, 4, "out")?;
    let [_, k_packed] = weights.shape[..] else {
        return Err(shape_err(1, "weights", "[N, K/2]".into(), &weights));
    };
    let k = k_packed * 2;
    let (n, n_pad) = check_q4_weight(k, &weights, 1, &scales, 2, group_size, 3)?;
    let Some(&dn) = d_out.shape.last() else { return Err(shape_err(0, "d_out", "[..., N]".into(), &d_out)) };
    if dn != n {
        return Err(shape_err(0, "d_out", format!("[..., {n}] (the weight's rows)"), &d_out));
    }
    let word_major = c.q4_word_major(weights.id);
    if word_major && !k_packed.is_multiple_of(16) {
        return Err(shape_err(1, "weights", "rows of whole 16-byte words (word-major)".into(), &weights));
    }
    let m = d_out.numel().checked_div(n).unwrap_or(0);
    let mut out_shape = d_out.shape.to_vec();
    *out_shape.last_mut().expect("rank >= 1") = k;
    let mut steps = Vec::new();
    if m * k > 0 {
        let params = Uniform::new()
            .u32(to_u32("rows", m)?)
            .u32(to_u32("N", n)?)
            .u32(to_u32("K", k)?)
            .u32(to_u32("packed K", k_packed)?)
            .u32(to_u32("padded N", n_pad)?)
            .u32(to_u32("group_size", group_size as u64)?)
            .u32(u32::from(word_major))
            .finish();
        steps.push(Step::Dispatch(Dispatch {
            shader: shader.into(),
            entry: "main",
            inputs: vec![d_out.id, weights.id, scales.id],
            outputs: vec![out.id],
            params,
            workgroups: grid_1d(m * k, WG_ELEMENTWISE)?,
        }));
    }
    Ok(Lowered { shapes: vec![(out.id, out_shape)], steps })
}

/// `et_vk.q4gsw_requant.default(latent [N, K], scales [G, N_pad],
/// group_size, →packed u8 [N, ceil(K/2)])`: the latent weights rounded
/// into `linear_q4gsw`'s 4-bit codes at the frozen scales, in the layout
/// `linear_q4gsw` reads (upstream's reference output; its Vulkan runtime
/// writes its own prepacked int32 layout instead).
pub fn q4gsw_requant(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(4)?;
    let latent = c.tensor(0, "latent")?;
    let scales = c.tensor(1, "scales")?;
    let group_size = c.int(2, "group_size")?;
    let out = c.tensor(3, "out")?;
    let shader = f32_shader(Family::TrainQ4Requant, &latent, 0, "latent")?;
    f32_only(&scales, 1, "scales")?;
    let [n, k] = latent.shape[..] else { return Err(shape_err(0, "latent", "[N, K]".into(), &latent)) };
    let gs = u64::try_from(group_size).ok().filter(|&g| g > 0).ok_or_else(|| Error::ArgValue {
        arg_idx: 2,
        name: "group_size",
        found: group_size.to_string(),
        reason: "must be positive",
    })?;
    let [g, n_pad] = scales.shape[..] else { return Err(shape_err(1, "scales", "[G, N_pad]".into(), &scales)) };
    if g < k.div_ceil(gs) || n_pad < n {
        return Err(shape_err(1, "scales", format!("[{}, >= {n}]", k.div_ceil(gs)), &scales));
    }
    if out.dtype != ElemType::U8 {
        return Err(Error::DType { arg_idx: 3, name: "out", expected: "uint8 (packed 4-bit)", found: out.dtype });
    }
    let k_packed = k.div_ceil(2);
    if out.numel() != n * k_packed {
        return Err(shape_err(3, "out", format!("[{n}, {k_packed}]"), &out));
    }
    let bytes = n * k_packed;
    let mut steps = Vec::new();
    if bytes > 0 {
        let params = Uniform::new()
            .u32(to_u32("N", n)?)
            .u32(to_u32("K", k)?)
            .u32(to_u32("packed K", k_packed)?)
            .u32(to_u32("padded N", n_pad)?)
            .u32(to_u32("group_size", gs)?)
            .u32(to_u32("packed bytes", bytes)?)
            .finish();
        steps.push(Step::Dispatch(Dispatch {
            shader: shader.into(),
            entry: "main",
            inputs: vec![latent.id, scales.id],
            outputs: vec![out.id],
            params,
            workgroups: grid_1d(bytes.div_ceil(4), WG_ELEMENTWISE)?,
        }));
    }
    Ok(Lowered { shapes: vec![(out.id, vec![n, k_packed])], steps })
}
