//! RoPE fused into the decode attention that reads the rotated query and
//! key: `etwgpu.sdpa_rope_with_kv_cache`.
//!
//! On the split-KV route (a few query rows: decode) the rotation costs no
//! dispatch of its own: the partials kernel's `_rope` form
//! (`sdpa_split_rope.wgsl`, or `sdpa_split_sg_rope.wgsl` on the subgroup
//! route) reads the query and the new keys un-rotated
//! with the tables and rotates them as it loads them, and stores the
//! rotated keys into the cache; the rotated query and key are not written.
//! Elsewhere (a prompt's routes, whose attention reads the new keys from
//! the cache) the rotation and the cache update are one dispatch
//! (`rope_kv_cache.wgsl`, the rotated keys written only into the cache),
//! then the rest of the attention's own lowering.
//!
//! `etwgpu.sdpa_rope_linear_q4gsw` is that op and the 4-bit linear (the O
//! projection) that reads its output: on the decode route, where the
//! split plan allows ([`combine_folds`]), the split attention's combine
//! and the linear's GEMV are one dispatch (`q4_gemv_attn.wgsl`, whose
//! workgroups merge the partials themselves), and the attention's output
//! is not written; elsewhere the attention's steps then the linear's.
//! At short caches the whole attention runs inside that GEMV instead
//! (`q4_gemv_sdpa.wgsl`). `etwgpu.sdpa_rope_linear` is the same with a
//! float linear (`aten.linear`: `linear_gemv_attn.wgsl`,
//! `linear_gemv_sdpa.wgsl`).

use crate::error::{Error, Result};
use crate::generated::shaders::{Family, ShaderId};
use crate::ops::fused::Epilogue;
use crate::ops::llm::{
    apply_rotary_emb_into, attend_in_gemv, combine_folds, fold_combine, gemv_attends, sdpa_with_kv_cache_into,
    split_route,
};
use crate::ops::matmul::linear_into;
use crate::ops::quant::linear_q4gsw_into;
use crate::plan::{Ctx, Dispatch, Lowered, Shader, Step, TensorInfo, Uniform, Vid, WG_ELEMENTWISE, grid_1d, to_u32};

/// `etwgpu.sdpa_rope_with_kv_cache.default(xq [1,S,Hq,D], xk [1,S,Hkv,D],
/// value, key_cache, value_cache, start_pos, seq_len, attn_mask?,
/// dropout_p, is_causal, scale?, freqs_cos [R, D/2], freqs_sin, table_row,
/// →[xq_out, xk_out, out])`: `et_vk.apply_rotary_emb(xq, xk, cos, sin)`
/// with `cos`, `sin` rows `table_row .. table_row + S` of the tables (the
/// graph's fusion takes the slices of the tables into the op), then
/// `sdpa_with_kv_cache` of the rotated query and key.
pub fn sdpa_rope_with_kv_cache(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(15)?;
    let outs = c.tensor_list(14, "out")?;
    let [q_rot, k_rot, out] = outs[..] else {
        return Err(Error::ArgValue {
            arg_idx: 14,
            name: "out",
            found: format!("{} tensors", outs.len()),
            reason: "expected the rotated query and key, then the attention's output",
        });
    };
    sdpa_rope_into(c, q_rot, k_rot, out)
}

/// `etwgpu.sdpa_rope_linear_q4gsw.default(<sdpa_rope_with_kv_cache's
/// arguments but its output list>, weights u8 [N, Hq * D / 2],
/// weight_scales, group_size, bias?, →[xq_out, xk_out, attn [1, S, Hq, D],
/// out [1, S, N]])`: `et_vk.linear_q4gsw` of the attention's output
/// viewed as `[1, S, Hq * D]`.
pub fn sdpa_rope_linear_q4gsw(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(19)?;
    let outs = c.tensor_list(18, "out")?;
    let [q_rot, k_rot, attn, out] = outs[..] else {
        return Err(Error::ArgValue {
            arg_idx: 18,
            name: "out",
            found: format!("{} tensors", outs.len()),
            reason: "expected the rotated query and key, the attention's output, then the linear's",
        });
    };
    let attention = sdpa_rope_into(c, q_rot, k_rot, attn)?;
    let (s, hq, hkv, d, cmax) = attention_dims(c)?;
    // The linear reads the attention's output at `[1, S, Hq * D]`.
    let x_shape = [1, s, hq * d];
    let x = TensorInfo { shape: &x_shape, ..attn };
    let linear_args = [attn.id, c.id(14), c.id(15), c.id(16), c.id(17)];
    let linear = linear_q4gsw_into(&c.with_args(&linear_args), &x, &out)?;
    let mut shapes = attention.shapes;
    shapes.extend(linear.shapes);
    let steps = fold_or_concat(c, attention.steps, linear.steps, (s, hq, hkv, d, cmax))?;
    Ok(Lowered { shapes, steps })
}

/// `etwgpu.sdpa_rope_linear.default(<sdpa_rope_with_kv_cache's arguments
/// but its output list>, weight [N, Hq * D], bias? [N], →[xq_out, xk_out,
/// attn [1, S, Hq, D], out [S, N] or [1, S, N]])`: `aten.linear` of the
/// attention's output viewed as `[S, Hq * D]` (an fp32 export's view
/// before its linears) or `[1, S, Hq * D]`, as `out`'s rank says.
pub fn sdpa_rope_linear(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(17)?;
    let outs = c.tensor_list(16, "out")?;
    let [q_rot, k_rot, attn, out] = outs[..] else {
        return Err(Error::ArgValue {
            arg_idx: 16,
            name: "out",
            found: format!("{} tensors", outs.len()),
            reason: "expected the rotated query and key, the attention's output, then the linear's",
        });
    };
    let attention = sdpa_rope_into(c, q_rot, k_rot, attn)?;
    let (s, hq, hkv, d, cmax) = attention_dims(c)?;
    let x_shape: Vec<u64> = match out.shape.len() {
        2 => vec![s, hq * d],
        3 => vec![1, s, hq * d],
        r => {
            return Err(Error::ArgValue {
                arg_idx: 16,
                name: "out",
                found: format!("a linear output of rank {r}"),
                reason: "expected [S, N] or [1, S, N]",
            });
        }
    };
    let x = TensorInfo { shape: &x_shape, ..attn };
    let linear_args = [attn.id, c.id(14), c.id(15), out.id];
    let linear = linear_into(&c.with_args(&linear_args), &x, &out, Epilogue::NONE)?;
    let mut shapes = attention.shapes;
    shapes.extend(linear.shapes);
    let steps = fold_or_concat(c, attention.steps, linear.steps, (s, hq, hkv, d, cmax))?;
    Ok(Lowered { shapes, steps })
}

/// `(S, Hq, Hkv, D, Cmax)` of the attention of a fused attention and
/// linear (checked by the attention's rule: `[1, S, Hq, D]`, and the
/// caches `[1, Cmax, Hkv, D]`).
fn attention_dims(c: &Ctx<'_>) -> Result<(u64, u64, u64, u64, u64)> {
    let xq = c.tensor(0, "xq")?;
    let k_cache = c.tensor(3, "key_cache")?;
    let (&[_, s, hq, d], &[_, cmax, hkv, _]) = (xq.shape, k_cache.shape) else {
        return Err(Error::Shape {
            arg_idx: 0,
            name: "xq",
            expected: "[1, S, Hq, D]".into(),
            found: xq.shape.to_vec(),
        });
    };
    Ok((s, hq, hkv, d, cmax))
}

/// The attention's steps then the linear's GEMV, as few dispatches as the
/// device and the shapes allow: at short caches the whole attention in the
/// GEMV (the partials and the combine replaced; by default only while the
/// context is short: [`gemv_attends`]); else the split combine folded into
/// the GEMV where the split plan allows ([`combine_folds`]); else the
/// steps one after the other.
fn fold_or_concat(
    c: &Ctx<'_>,
    mut attention: Vec<Step>,
    linear: Vec<Step>,
    (s, hq, hkv, d, cmax): (u64, u64, u64, u64, u64),
) -> Result<Vec<Step>> {
    // The live context (checked by the attention's rule).
    let live = u64::try_from(c.int(5, "start_pos")?).unwrap_or(0) + s;
    let in_gemv = match (&attention[..], &linear[..]) {
        ([.., partials, _combine], [gemv]) if gemv_attends(c.caps(), s, hq, hkv, d, cmax, live) => {
            attend_in_gemv(partials, gemv)
        }
        _ => None,
    };
    if let Some(d) = in_gemv {
        attention.truncate(attention.len() - 2);
        attention.push(Step::Dispatch(d));
        return Ok(attention);
    }
    let folded = match (&attention[..], &linear[..]) {
        ([.., combine], [gemv]) if combine_folds(split_route(c.caps(), d), s, hq, hkv, d, cmax) => {
            fold_combine(combine, gemv)
        }
        _ => None,
    };
    Ok(match folded {
        Some(d) => {
            *attention.last_mut().expect("matched a last step") = Step::Dispatch(d);
            attention
        }
        None => [attention, linear].concat(),
    })
}

/// [`sdpa_rope_with_kv_cache`] with its outputs given: `c`'s arguments 0
/// to 13 are the op's.
fn sdpa_rope_into(c: &Ctx<'_>, q_rot: TensorInfo<'_>, k_rot: TensorInfo<'_>, out: TensorInfo<'_>) -> Result<Lowered> {
    let table_row = crate::ops::index::non_negative(c, 13, "table_row")?;
    let (xq, xk) = (c.tensor(0, "xq")?, c.tensor(1, "xk")?);
    let rope_args = [c.id(0), c.id(1), c.id(11), c.id(12)];
    let rope = apply_rotary_emb_into(&c.with_args(&rope_args), q_rot, k_rot, Some(table_row))?;
    // The attention reads the rotated tensors at the inputs' live shapes.
    let (q, k) = (TensorInfo { shape: xq.shape, ..q_rot }, TensorInfo { shape: xk.shape, ..k_rot });
    let mut attn_args: Vec<Vid> = vec![q_rot.id, k_rot.id];
    attn_args.extend((2..11).map(|i| c.id(i)));
    let attn = sdpa_with_kv_cache_into(&c.with_args(&attn_args), q, k, out)?;
    let mut shapes = rope.shapes;
    shapes.extend(attn.shapes);
    // The split partials kernel (either route) and its `_rope` form.
    let rope_form = |id: &ShaderId| match id.family() {
        Family::SdpaSplit => Some(Family::SdpaSplitRope),
        Family::SdpaSplitShort => Some(Family::SdpaSplitShortRope),
        Family::SdpaSplitSg => Some(Family::SdpaSplitSgRope),
        _ => None,
    };
    let mut steps = attn.steps;
    let steps = if let Some((d, id, family)) = find_dispatch(&mut steps, rope_form) {
        let shader =
            ShaderId::find(family, id.variant()).expect("the `_rope` forms have the variants of the split kernels");
        d.shader = shader.into();
        // [query, new keys, new values] un-rotated, with the tables.
        debug_assert_eq!(d.inputs[..2], [q_rot.id, k_rot.id]);
        d.inputs = vec![xq.id, xk.id, d.inputs[2], c.id(11), c.id(12)];
        d.params.extend(Uniform::new().u32(to_u32("table row", table_row)?).finish());
        steps
    } else if rope_into_cache_update(c, &rope.steps, &mut steps, q_rot.id, k_rot.id, table_row)? {
        steps
    } else {
        [rope.steps, steps].concat()
    };
    Ok(Lowered { shapes, steps })
}

/// The first of `steps` that dispatches a static shader `pick` takes:
/// that dispatch, its shader and what `pick` made of it.
fn find_dispatch<T>(steps: &mut [Step], pick: impl Fn(&ShaderId) -> Option<T>) -> Option<(&mut Dispatch, ShaderId, T)> {
    steps.iter_mut().find_map(|s| match s {
        Step::Dispatch(d) => match d.shader {
            Shader::Static(id) => pick(&id).map(|t| (d, id, t)),
            _ => None,
        },
        _ => None,
    })
}

/// The rotation's one dispatch (`rope`) and the KV-cache update among the
/// attention's steps (`attn`: a prompt's route, where the attention then
/// reads the new keys from the cache) as one dispatch of
/// `rope_kv_cache.wgsl` in the update's place: the rotated keys go
/// straight into the cache and are not written as `k_rot` (nothing else
/// reads them: the split route does not write them either). Whether it
/// merged them (`attn` is left as it was where the steps are not that
/// pair).
fn rope_into_cache_update(
    c: &Ctx<'_>,
    rope: &[Step],
    attn: &mut [Step],
    q_rot: Vid,
    k_rot: Vid,
    table_row: u64,
) -> Result<bool> {
    let [Step::Dispatch(r)] = rope else { return Ok(false) };
    let is_update = |id: &ShaderId| (id.family() == Family::KvCacheUpdate).then_some(());
    let Some((u, update, ())) = find_dispatch(attn, is_update) else { return Ok(false) };
    let Some(shader) = ShaderId::find(Family::RopeKvCache, update.variant()) else { return Ok(false) };
    if u.inputs.len() != 2 || u.inputs[0] != k_rot || r.outputs != [q_rot, k_rot] {
        return Ok(false);
    }
    // Checked by the rules: `[1, S, Hq, D]`, `[1, S, Hkv, D]`, D even,
    // `start_pos + S` within the cache.
    let (xq, xk) = (c.tensor(0, "xq")?, c.tensor(1, "xk")?);
    let (&[_, s, hq, d], &[_, _, hkv, _]) = (xq.shape, xk.shape) else { return Ok(false) };
    let start = u64::try_from(c.int(5, "start_pos")?).unwrap_or(0);
    let n_q = s * hq * d / 2;
    let n_k = s * hkv * d / 2;
    // The kernel's invocation index runs to this in u32.
    to_u32("query, key and value pairs", n_q + 2 * n_k)?;
    let params = Uniform::new()
        .u32(to_u32("query pairs", n_q)?)
        .u32(to_u32("key pairs", n_k)?)
        .u32(to_u32("query heads", hq)?)
        .u32(to_u32("key heads", hkv)?)
        .u32(to_u32("head dim", d / 2)?)
        .u32(to_u32("seq", s)?)
        .u32(to_u32("table row", table_row)?)
        .u32(to_u32("cache offset", start * hkv * d)?)
        .finish();
    let merged = Dispatch {
        shader: shader.into(),
        entry: "main",
        // xq, xk, the new values, cos, sin.
        inputs: vec![r.inputs[0], r.inputs[1], u.inputs[1], r.inputs[2], r.inputs[3]],
        // The rotated query, then the caches.
        outputs: vec![q_rot, u.outputs[0], u.outputs[1]],
        params,
        workgroups: grid_1d(n_q + 2 * n_k, WG_ELEMENTWISE)?,
    };
    *u = merged;
    Ok(true)
}
