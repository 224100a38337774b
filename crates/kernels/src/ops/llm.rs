//! LLM ops: `et_vk.rms_norm` (`rms_norm.wgsl`), the fused
//! `etwgpu.add_rms_norm` (`add_rms_norm.wgsl`) and
//! `etwgpu.add_select_rms_norm` (`add_select_rms_norm.wgsl`),
//! `et_vk.apply_rotary_emb` (`rope.wgsl`), `et_vk.apply_rotary_emb_hf`
//! (`rope_hf.wgsl`), `et_vk.apply_rotary_emb_interleaved`
//! (`rope_interleaved.wgsl`),
//! `sdpa_with_kv_cache` (for a few query rows with scratch the split-KV
//! pair `sdpa_split.wgsl` (`sdpa_split_sg.wgsl` on devices with
//! subgroups; `llm/split_kv.rs`), which also writes the new keys and
//! values into the caches, and `sdpa_split_combine.wgsl`; else
//! `kv_cache_update.wgsl` then `sdpa_prefill.wgsl` for prompts
//! (`sdpa_prefill_coop.wgsl` on cooperative matrices, `attention_coop.rs`),
//! `sdpa_online.wgsl` or `sdpa.wgsl`
//! for the rest), the cache-less
//! `et_vk.sdpa` (`attention.wgsl`) and `update_cache` (a `place.wgsl`
//! store). The KV caches are constants the ops update in place; the
//! runtime gives each its own buffer, kept across runs.

use crate::ElemType;
use crate::error::{Error, Result};
use crate::generated::shaders::{Family, ShaderId, Variant};
use crate::plan::{
    Ctx, Dispatch, Lowered, Step, TensorInfo, Uniform, Vid, WG_ELEMENTWISE, checked_numel, float_shader, grid_1d,
    grid_groups, norm_dim, same_dtype, to_u32,
};

mod split_kv;

pub use split_kv::GEMV_ATTN_AUTO_KEYS;
use split_kv::{SPLIT_MAX_ROWS, SPLIT_SCRATCH, SplitAttn, split_kv_attention};
#[cfg(test)]
pub(crate) use split_kv::{SUBGROUP_PLAN, SplitRoute, WORKGROUP_PLAN, split_plan};
pub(crate) use split_kv::{
    attend_in_gemv, combine_folds, fold_combine, gemv_attends, split_route, split_scratch_bytes,
};

fn shape_err(arg_idx: usize, name: &'static str, expected: String, t: &TensorInfo<'_>) -> Error {
    Error::Shape { arg_idx, name, expected, found: t.shape.to_vec() }
}

/// The variant of a kernel over a KV cache: the activations' float type
/// over a cache of the same type, or f32 activations over a float16 cache
/// (`f32_kvf16`, which the runtime makes when asked to store caches in
/// float16).
fn kv_variant(q: &TensorInfo<'_>, cache: &TensorInfo<'_>, arg_idx: usize, name: &'static str) -> Result<Variant> {
    match (q.dtype, cache.dtype) {
        (ElemType::F32, ElemType::F32) => Ok(Variant::F32),
        (ElemType::F16, ElemType::F16) => Ok(Variant::F16),
        (ElemType::F32, ElemType::F16) => Ok(Variant::F32Kvf16),
        (_, found) => {
            Err(Error::DType { arg_idx, name, expected: "the query's dtype (or float16 under float32)", found })
        }
    }
}

/// The KV-cache kernel of `family` for `variant` (every KV-cache family
/// has the three variants [`kv_variant`] gives).
fn kv_shader(family: Family, variant: Variant) -> ShaderId {
    ShaderId::find(family, variant).expect("KV-cache families have the f32, f16 and f32_kvf16 variants")
}

/// `et_vk.rms_norm.default(input, weight, eps, →out)`: row-wise over the
/// last dim.
pub fn rms_norm(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(4)?;
    let x = c.tensor(0, "input")?;
    let weight = c.tensor(1, "weight")?;
    let eps = c.num(2, "eps")?;
    let out = c.tensor(3, "out")?;
    let shader = float_shader(Family::RmsNorm, &x, 0, "input")?;
    same_dtype(&weight, x.dtype, 1, "weight")?;
    same_dtype(&out, x.dtype, 3, "out")?;
    let steps = norm_rows(shader, &x, (&weight, 1), eps, vec![x.id, weight.id], vec![out.id])?;
    Ok(Lowered { shapes: vec![(out.id, x.shape.to_vec())], steps })
}

/// `etwgpu.add_rms_norm.default(a, b, weight, eps, →[sum, out])`: the
/// residual add `sum = a + b` (same shapes, no broadcasting) and the RMS
/// norm of `sum` over its last dim, one dispatch (`add_rms_norm.wgsl`; the
/// graph's fusion writes it for an `aten.add` whose output an
/// `et_vk.rms_norm` reads, and `sum` is still written for its other readers).
pub fn add_rms_norm(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(5)?;
    let a = c.tensor(0, "a")?;
    let b = c.tensor(1, "b")?;
    let weight = c.tensor(2, "weight")?;
    let eps = c.num(3, "eps")?;
    let outs = c.tensor_list(4, "out")?;
    let [sum, out] = outs[..] else {
        return Err(Error::ArgKind { arg_idx: 4, name: "out", expected: "ValueList of 2 tensors", found: "ValueList" });
    };
    let shader = float_shader(Family::AddRmsNorm, &a, 0, "a")?;
    for (t, idx, name) in [(&b, 1, "b"), (&weight, 2, "weight"), (&sum, 4, "out"), (&out, 4, "out")] {
        same_dtype(t, a.dtype, idx, name)?;
    }
    if b.shape != a.shape {
        return Err(shape_err(1, "b", format!("{:?} (the shape of a)", a.shape), &b));
    }
    let steps = norm_rows(shader, &a, (&weight, 2), eps, vec![a.id, b.id, weight.id], vec![sum.id, out.id])?;
    Ok(Lowered { shapes: vec![(sum.id, a.shape.to_vec()), (out.id, a.shape.to_vec())], steps })
}

/// `etwgpu.add_select_rms_norm.default(a, b, dim, index, weight, eps,
/// →out)`: `et_vk.rms_norm(select_copy(a + b, dim, index), weight, eps)`
/// (`a` and `b` of one shape, no broadcasting) in one dispatch
/// (`add_select_rms_norm.wgsl`) that reads only the selected rows of `a`
/// and `b` and writes only the normed ones. The graph's fusion writes it for
/// a decoder's last residual add, its last token and the final norm (`dim`
/// 1, `index` -1 of `[1, S, D]`). `index` is resolved against the live
/// size of `dim`, as `select_copy` does; the selected slice must be whole
/// rows of the last dim in one piece: `dim` is not the last dim and every
/// dim before it has size 1.
pub fn add_select_rms_norm(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(7)?;
    let a = c.tensor(0, "a")?;
    let b = c.tensor(1, "b")?;
    let dim = c.int(2, "dim")?;
    let index = c.int(3, "index")?;
    let weight = c.tensor(4, "weight")?;
    let eps = c.num(5, "eps")?;
    let out = c.tensor(6, "out")?;
    let shader = float_shader(Family::AddSelectRmsNorm, &a, 0, "a")?;
    for (t, idx, name) in [(&b, 1, "b"), (&weight, 4, "weight"), (&out, 6, "out")] {
        same_dtype(t, a.dtype, idx, name)?;
    }
    if b.shape != a.shape {
        return Err(shape_err(1, "b", format!("{:?} (the shape of a)", a.shape), &b));
    }
    let rank = a.shape.len();
    let d = norm_dim(dim, rank).filter(|&d| d + 1 < rank && a.shape[..d].iter().all(|&s| s == 1)).ok_or_else(|| {
        Error::ArgValue {
            arg_idx: 2,
            name: "dim",
            found: dim.to_string(),
            reason: "a dim before the last, after only dims of size 1",
        }
    })?;
    let size = a.shape[d] as i64;
    let i = if index < 0 { index + size } else { index };
    if !(0..size).contains(&i) {
        return Err(Error::ArgValue { arg_idx: 3, name: "index", found: index.to_string(), reason: "index in range" });
    }
    let mut shape = a.shape.to_vec();
    shape.remove(d);
    // The slice is `rows` whole rows of the last dim, from row `i * rows`.
    let n = a.shape[rank - 1];
    let rows = checked_numel(&shape)?.checked_div(n).unwrap_or(0);
    let inputs = vec![a.id, b.id, weight.id];
    let steps = norm_dispatch(shader, (n, rows, i as u64 * rows), (&weight, 4), eps, inputs, vec![out.id])?;
    Ok(Lowered { shapes: vec![(out.id, shape)], steps })
}

/// The one dispatch of an RMS norm kernel over the rows of `x` (one
/// workgroup per row of its last dim), after checking that `weight`
/// (argument `w_idx`) has a row's elements; no dispatch for no rows.
pub(crate) fn norm_rows(
    shader: ShaderId,
    x: &TensorInfo<'_>,
    weight: (&TensorInfo<'_>, usize),
    eps: f64,
    inputs: Vec<Vid>,
    outputs: Vec<Vid>,
) -> Result<Vec<Step>> {
    let n = x.shape.last().copied().unwrap_or(1);
    let rows = x.numel().checked_div(n).unwrap_or(0);
    norm_dispatch(shader, (n, rows, 0), weight, eps, inputs, outputs)
}

/// The one dispatch of an RMS norm kernel over `rows` rows of `n` (one
/// workgroup per row), its input's rows starting at row `row0` (the
/// uniforms' last word), after checking that `weight` (argument `w_idx`)
/// has `n` elements; no dispatch for no rows.
fn norm_dispatch(
    shader: ShaderId,
    (n, rows, row0): (u64, u64, u64),
    (weight, w_idx): (&TensorInfo<'_>, usize),
    eps: f64,
    inputs: Vec<Vid>,
    outputs: Vec<Vid>,
) -> Result<Vec<Step>> {
    if weight.numel() != n {
        return Err(shape_err(w_idx, "weight", format!("{n} elements (the last dim of input)"), weight));
    }
    if rows == 0 {
        return Ok(Vec::new());
    }
    let params = Uniform::new()
        .u32(to_u32("rows", rows)?)
        .u32(to_u32("row size", n)?)
        .f32(eps as f32)
        .u32(to_u32("first row", row0)?)
        .finish();
    Ok(vec![Step::Dispatch(Dispatch {
        shader: shader.into(),
        entry: "main",
        inputs,
        outputs,
        params,
        // One workgroup per row, folded into x and y.
        workgroups: grid_groups(rows)?,
    })])
}

/// `et_vk.apply_rotary_emb.default(xq [B,S,Hq,D], xk [B,S,Hkv,D],
/// freqs_cos [S,D/2], freqs_sin [S,D/2], →[xq_out, xk_out])`.
pub fn apply_rotary_emb(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(5)?;
    let outs = c.tensor_list(4, "out")?;
    let [q_out, k_out] = outs[..] else {
        return Err(Error::ArgKind { arg_idx: 4, name: "out", expected: "ValueList of 2 tensors", found: "ValueList" });
    };
    apply_rotary_emb_into(c, q_out, k_out, None)
}

/// [`apply_rotary_emb`] into `q_out` and `k_out`, its inputs (arguments 0
/// to 3) read from `c` (a fused op hands its rotation here,
/// `etwgpu.sdpa_rope_with_kv_cache`). With `table_row`, the tables may be
/// longer and the chunk's rows start there; else they are `[S, D/2]`.
pub(crate) fn apply_rotary_emb_into(
    c: &Ctx<'_>,
    q_out: TensorInfo<'_>,
    k_out: TensorInfo<'_>,
    table_row: Option<u64>,
) -> Result<Lowered> {
    let xq = c.tensor(0, "xq")?;
    let xk = c.tensor(1, "xk")?;
    let cos = c.tensor(2, "freqs_cos")?;
    let sin = c.tensor(3, "freqs_sin")?;
    let shader = float_shader(Family::Rope, &xq, 0, "xq")?;
    // Per tensor: pairs, heads, half the head dim, tokens.
    let check = |x: &TensorInfo<'_>, out: &TensorInfo<'_>, idx: usize, name: &'static str| -> Result<[u64; 4]> {
        same_dtype(x, xq.dtype, idx, name)?;
        same_dtype(out, xq.dtype, 4, "out")?;
        let [_, s, h, d] = x.shape[..] else { return Err(shape_err(idx, name, "[B, S, H, D]".into(), x)) };
        if d % 2 != 0 {
            return Err(shape_err(idx, name, "an even head dim".into(), x));
        }
        for (t, t_idx, t_name) in [(&cos, 2, "freqs_cos"), (&sin, 3, "freqs_sin")] {
            same_dtype(t, xq.dtype, t_idx, t_name)?;
            let fits = match (table_row, t.shape) {
                (None, _) => t.shape == [s, d / 2],
                (Some(row), &[rows, half]) => half == d / 2 && row + s <= rows,
                _ => false,
            };
            if !fits {
                let rows = table_row.map_or(s.to_string(), |row| format!(">= {}", row + s));
                return Err(shape_err(t_idx, t_name, format!("[{rows}, {}]", d / 2), t));
            }
        }
        Ok([x.numel() / 2, h, d / 2, s])
    };
    // The tables fit both, so both have the same tokens and head dim.
    let [n_q, heads_q, half, seq] = check(&xq, &q_out, 0, "xq")?;
    let [n_k, heads_k, _, _] = check(&xk, &k_out, 1, "xk")?;
    let shapes = vec![(q_out.id, xq.shape.to_vec()), (k_out.id, xk.shape.to_vec())];
    let mut steps = Vec::new();
    if n_q + n_k > 0 {
        // Both in one dispatch: the query's pairs, then the key's.
        let params = Uniform::new()
            .u32(to_u32("query pairs", n_q)?)
            .u32(to_u32("key pairs", n_k)?)
            .u32(to_u32("query heads", heads_q)?)
            .u32(to_u32("key heads", heads_k)?)
            .u32(to_u32("head dim", half)?)
            .u32(to_u32("seq", seq)?)
            .u32(to_u32("table row", table_row.unwrap_or(0))?)
            .finish();
        steps.push(Step::Dispatch(Dispatch {
            shader: shader.into(),
            entry: "main",
            inputs: vec![xq.id, xk.id, cos.id, sin.id],
            outputs: vec![q_out.id, k_out.id],
            params,
            workgroups: grid_1d(n_q + n_k, WG_ELEMENTWISE)?,
        }));
    }
    Ok(Lowered { shapes, steps })
}

/// Query rows from which `sdpa_with_kv_cache` attends with the tiled
/// prefill kernel (`sdpa_prefill.wgsl`); fewer take the per-row kernels.
const PREFILL_MIN_SEQ: u64 = 9;
/// Query rows per workgroup of `sdpa_prefill.wgsl` (its `BQ`).
const PREFILL_ROWS: u64 = 16;
/// The largest head dim `sdpa_prefill.wgsl` holds (its `D4_MAX * 4`).
const PREFILL_MAX_HEAD_DIM: u64 = 128;

/// `sdpa_with_kv_cache.default(query [1,S,Hq,D], key [1,S,Hkv,D], value,
/// key_cache [1,Cmax,Hkv,D], value_cache, start_pos, seq_len, attn_mask?,
/// dropout_p, is_causal, scale?, →out [1,S,Hq,D])`: writes the new keys
/// and values at rows `start_pos..start_pos + S` of the caches, then causal
/// attention over rows `0..start_pos + S`. `S` comes from the query's live
/// shape (`seq_len` is baked at export).
pub fn sdpa_with_kv_cache(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(12)?;
    let q = c.tensor(0, "query")?;
    let k = c.tensor(1, "key")?;
    let out = c.tensor(11, "out")?;
    sdpa_with_kv_cache_into(c, q, k, out)
}

/// [`sdpa_with_kv_cache`] of the query `q` and key `k` into `out`, its
/// other arguments (2 to 10) read from `c` (a fused op hands its rotated
/// query and key here, `etwgpu.sdpa_rope_with_kv_cache`).
pub(crate) fn sdpa_with_kv_cache_into(
    c: &Ctx<'_>,
    q: TensorInfo<'_>,
    k: TensorInfo<'_>,
    out: TensorInfo<'_>,
) -> Result<Lowered> {
    let v = c.tensor(2, "value")?;
    let k_cache = c.tensor(3, "key_cache")?;
    let v_cache = c.tensor(4, "value_cache")?;
    let start_pos = c.int(5, "start_pos")?;
    c.int(6, "seq_len")?;
    let mask = c.opt_tensor(7, "attn_mask")?;
    let dropout = c.num(8, "dropout_p")?;
    let is_causal = c.bool(9, "is_causal")?;
    let scale = c.opt_num(10, "scale")?;
    float_shader(Family::Sdpa, &q, 0, "query")?;
    for (t, idx, name) in [(&k, 1, "key"), (&v, 2, "value"), (&out, 11, "out")] {
        same_dtype(t, q.dtype, idx, name)?;
    }
    let variant = kv_variant(&q, &k_cache, 3, "key_cache")?;
    same_dtype(&v_cache, k_cache.dtype, 4, "value_cache")?;
    let shader = kv_shader(Family::Sdpa, variant);
    let update = kv_shader(Family::KvCacheUpdate, variant);
    if mask.is_some() {
        return Err(Error::ArgValue {
            arg_idx: 7,
            name: "attn_mask",
            found: "a tensor".into(),
            reason: "must be None",
        });
    }
    if dropout != 0.0 {
        return Err(Error::ArgValue { arg_idx: 8, name: "dropout_p", found: dropout.to_string(), reason: "must be 0" });
    }
    if !is_causal {
        return Err(Error::ArgValue { arg_idx: 9, name: "is_causal", found: "false".into(), reason: "must be true" });
    }
    let [1, s, hq, d] = q.shape[..] else { return Err(shape_err(0, "query", "[1, S, Hq, D]".into(), &q)) };
    let [1, cmax, hkv, _] = k_cache.shape[..] else {
        return Err(shape_err(3, "key_cache", "[1, Cmax, Hkv, D]".into(), &k_cache));
    };
    if k_cache.shape[3] != d {
        return Err(shape_err(3, "key_cache", format!("[1, Cmax, Hkv, {d}]"), &k_cache));
    }
    if v_cache.shape != k_cache.shape {
        return Err(shape_err(4, "value_cache", format!("{:?} (the key cache's shape)", k_cache.shape), &v_cache));
    }
    for (t, idx, name) in [(&k, 1, "key"), (&v, 2, "value")] {
        if t.shape != [1, s, hkv, d] {
            return Err(shape_err(idx, name, format!("[1, {s}, {hkv}, {d}]"), t));
        }
    }
    if hkv == 0 || hq % hkv != 0 {
        return Err(shape_err(0, "query", format!("a head count that is a multiple of {hkv} (the kv heads)"), &q));
    }
    let start = u64::try_from(start_pos).ok().filter(|&p| p + s <= cmax).ok_or_else(|| Error::ArgValue {
        arg_idx: 5,
        name: "start_pos",
        found: start_pos.to_string(),
        reason: "start_pos + S must be within the cache length",
    })?;
    let scale = scale.unwrap_or(1.0 / (d as f64).sqrt());
    let mut steps = Vec::new();
    // The split kernels need vec4 rows of at most 256 dims; their scratch
    // is declared whichever kernel runs.
    let splittable = d.is_multiple_of(4) && d > 0 && d <= 256;
    let route = split_route(c.caps(), d);
    if splittable {
        steps.push(Step::Scratch { slot: SPLIT_SCRATCH, bytes: split_scratch_bytes(&route.plan(), hq, hkv, d, cmax) });
    }
    let rows = s * hq;
    let split = c.scratch(SPLIT_SCRATCH).filter(|_| splittable && rows > 0 && s <= SPLIT_MAX_ROWS);
    let n_new = s * hkv * d;
    // The split kernel writes the new rows itself.
    if n_new > 0 && split.is_none() {
        let params = Uniform::new()
            .u32(to_u32("new cache elements", n_new)?)
            .u32(to_u32("cache offset", start * hkv * d)?)
            .finish();
        steps.push(Step::Dispatch(Dispatch {
            shader: update.into(),
            entry: "main",
            inputs: vec![k.id, v.id],
            outputs: vec![k_cache.id, v_cache.id],
            params,
            workgroups: grid_1d(n_new, WG_ELEMENTWISE)?,
        }));
    }
    if let Some(scratch) = split {
        // The partials read the caches (maybe float16); the combine does not.
        let combine = float_shader(Family::SdpaSplitCombine, &q, 0, "query")?;
        let a = SplitAttn { s, hq, hkv, d, start, scale, route, variant, combine };
        steps.extend(split_kv_attention(&a, cmax, [q.id, k.id, v.id, k_cache.id, v_cache.id, out.id], scratch)?);
    } else if rows > 0 && d > 0 {
        let params = Uniform::new()
            .u32(to_u32("seq", s)?)
            .u32(to_u32("heads", hq)?)
            .u32(to_u32("kv heads", hkv)?)
            .u32(to_u32("head dim", d)?)
            .u32(to_u32("start_pos", start)?)
            .f32(scale as f32)
            .finish();
        // The one-pass kernel reads `vec4`s and gives each dim an invocation.
        let shader = if d.is_multiple_of(4) && d <= 256 { kv_shader(Family::SdpaOnline, variant) } else { shader };
        let mut attend = (shader, grid_groups(rows)?);
        // Prompts: tiles of query rows share each K/V tile and stop at the diagonal.
        if s >= PREFILL_MIN_SEQ && d.is_multiple_of(4) && d <= PREFILL_MAX_HEAD_DIM {
            // On the matrix units where the device and the precision allow it.
            attend = match crate::ops::attention_coop::prefill_coop(c.caps(), variant, s, hq, d)? {
                Some(coop) => coop,
                None => (kv_shader(Family::SdpaPrefill, variant), grid_groups(s.div_ceil(PREFILL_ROWS) * hq)?),
            };
        }
        let (shader, workgroups) = attend;
        steps.push(Step::Dispatch(Dispatch {
            shader: shader.into(),
            entry: "main",
            inputs: vec![q.id, k_cache.id, v_cache.id],
            outputs: vec![out.id],
            params,
            workgroups,
        }));
    }
    Ok(Lowered { shapes: vec![(out.id, q.shape.to_vec())], steps })
}

/// `et_vk.apply_rotary_emb_hf.default(xq [B,S,Hq,D], xk [B,S,Hkv,D],
/// freqs_cos [max_seq, R], freqs_sin [max_seq, R], start_pos, →[xq_out,
/// xk_out])`: HF rotate-half over the first `R <= D` dims (the rest pass
/// through), table rows `start_pos..start_pos + S`.
pub fn apply_rotary_emb_hf(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(6)?;
    let xq = c.tensor(0, "xq")?;
    let xk = c.tensor(1, "xk")?;
    let cos = c.tensor(2, "freqs_cos")?;
    let sin = c.tensor(3, "freqs_sin")?;
    let start_pos = c.int(4, "start_pos")?;
    let outs = c.tensor_list(5, "out")?;
    let [q_out, k_out] = outs[..] else {
        return Err(Error::ArgKind { arg_idx: 5, name: "out", expected: "ValueList of 2 tensors", found: "ValueList" });
    };
    let shader = float_shader(Family::RopeHf, &xq, 0, "xq")?;
    let [rows, rot] = cos.shape[..] else { return Err(shape_err(2, "freqs_cos", "[max_seq, R]".into(), &cos)) };
    if sin.shape != cos.shape {
        return Err(shape_err(3, "freqs_sin", format!("{:?} (freqs_cos's shape)", cos.shape), &sin));
    }
    // Per tensor: elements, tokens, heads, head dim; and the table row.
    let check = |x: &TensorInfo<'_>, out: &TensorInfo<'_>, idx: usize, name: &'static str| -> Result<[u64; 5]> {
        same_dtype(x, xq.dtype, idx, name)?;
        same_dtype(out, xq.dtype, 5, "out")?;
        let [_, s, h, d] = x.shape[..] else { return Err(shape_err(idx, name, "[B, S, H, D]".into(), x)) };
        if rot % 2 != 0 || rot > d {
            return Err(shape_err(2, "freqs_cos", format!("[max_seq, R] with R even and <= {d}"), &cos));
        }
        let start = u64::try_from(start_pos).ok().filter(|&p| p + s <= rows).ok_or_else(|| Error::ArgValue {
            arg_idx: 4,
            name: "start_pos",
            found: start_pos.to_string(),
            reason: "start_pos + S must be within the tables' rows",
        })?;
        Ok([x.numel(), s, h, d, start])
    };
    let [numel_q, seq, heads_q, d, start] = check(&xq, &q_out, 0, "xq")?;
    let [numel_k, seq_k, heads_k, d_k, _] = check(&xk, &k_out, 1, "xk")?;
    let shapes = vec![(q_out.id, xq.shape.to_vec()), (k_out.id, xk.shape.to_vec())];
    if (seq_k, d_k) != (seq, d) {
        return Err(shape_err(1, "xk", format!("[B, {seq}, Hkv, {d}] (the query's tokens and head dim)"), &xk));
    }
    let mut steps = Vec::new();
    if numel_q + numel_k > 0 {
        // Both in one dispatch: the query's elements, then the key's.
        let params = Uniform::new()
            .u32(to_u32("query elements", numel_q)?)
            .u32(to_u32("key elements", numel_k)?)
            .u32(to_u32("head dim", d)?)
            .u32(to_u32("rotary dim", rot)?)
            .u32(to_u32("seq", seq)?)
            .u32(to_u32("query heads", heads_q)?)
            .u32(to_u32("key heads", heads_k)?)
            .u32(to_u32("start_pos", start)?)
            .finish();
        steps.push(Step::Dispatch(Dispatch {
            shader: shader.into(),
            entry: "main",
            inputs: vec![xq.id, xk.id, cos.id, sin.id],
            outputs: vec![q_out.id, k_out.id],
            params,
            workgroups: grid_1d(numel_q + numel_k, WG_ELEMENTWISE)?,
        }));
    }
    Ok(Lowered { shapes, steps })
}

/// `et_vk.apply_rotary_emb_interleaved.default(x [B,N,C], freqs_cis
/// (any rank, N*C elements: (cos, sin) pairs), →out [B,N,C])`.
pub fn apply_rotary_emb_interleaved(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(3)?;
    let x = c.tensor(0, "x")?;
    let freqs = c.tensor(1, "freqs_cis")?;
    let out = c.tensor(2, "out")?;
    let shader = float_shader(Family::RopeInterleaved, &x, 0, "x")?;
    same_dtype(&freqs, x.dtype, 1, "freqs_cis")?;
    same_dtype(&out, x.dtype, 2, "out")?;
    let [_, n, ch] = x.shape[..] else { return Err(shape_err(0, "x", "[B, N, C]".into(), &x)) };
    if ch % 2 != 0 {
        return Err(shape_err(0, "x", "[B, N, C] with C even".into(), &x));
    }
    if freqs.numel() != n * ch {
        return Err(shape_err(1, "freqs_cis", format!("{} elements ([{n}, {ch}])", n * ch), &freqs));
    }
    let n_pairs = x.numel() / 2;
    let mut steps = Vec::new();
    if n_pairs > 0 {
        let params = Uniform::new()
            .u32(to_u32("pairs", n_pairs)?)
            .u32(to_u32("channels", ch / 2)?)
            .u32(to_u32("rows", n)?)
            .finish();
        steps.push(Step::Dispatch(Dispatch {
            shader: shader.into(),
            entry: "main",
            inputs: vec![x.id, freqs.id],
            outputs: vec![out.id],
            params,
            workgroups: grid_1d(n_pairs, WG_ELEMENTWISE)?,
        }));
    }
    Ok(Lowered { shapes: vec![(out.id, x.shape.to_vec())], steps })
}

/// `et_vk.sdpa.default(q, k, v, attn_mask?, scale?, out)`: non-causal
/// attention without a cache; q `[B, Hq, Sq, D]`, k and v `[B, Hkv, Skv,
/// D]` with Hkv 1 (broadcast) or Hq, the mask additive, `[Sq, Skv]` or
/// `B * Hq` of them, out `[B, Hq, Sq, D]`.
pub fn sdpa(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(6)?;
    let q = c.tensor(0, "q")?;
    let k = c.tensor(1, "k")?;
    let v = c.tensor(2, "v")?;
    let mask = c.opt_tensor(3, "attn_mask")?;
    let scale = c.opt_num(4, "scale")?;
    let out = c.tensor(5, "out")?;
    let shader = float_shader(Family::Attention, &q, 0, "q")?;
    for (t, idx, name) in [(&k, 1, "k"), (&v, 2, "v"), (&out, 5, "out")] {
        same_dtype(t, q.dtype, idx, name)?;
    }
    let [b, hq, sq, d] = q.shape[..] else { return Err(shape_err(0, "q", "[B, H, S, D]".into(), &q)) };
    let [_, hkv, skv, _] = k.shape[..] else { return Err(shape_err(1, "k", "[B, H, S, D]".into(), &k)) };
    if k.shape[0] != b || k.shape[3] != d {
        return Err(shape_err(1, "k", format!("[{b}, Hkv, Skv, {d}]"), &k));
    }
    if v.shape != k.shape {
        return Err(shape_err(2, "v", format!("{:?} (k's shape)", k.shape), &v));
    }
    if hkv != 1 && hkv != hq {
        return Err(shape_err(1, "k", format!("[{b}, 1 or {hq}, Skv, {d}] (heads broadcast as in matmul)"), &k));
    }
    let mask_mode = match &mask {
        None => 0,
        Some(m) => {
            same_dtype(m, q.dtype, 3, "attn_mask")?;
            if m.numel() == sq * skv {
                1
            } else if m.numel() == b * hq * sq * skv {
                2
            } else {
                return Err(shape_err(3, "attn_mask", format!("[{sq}, {skv}] or [{b}, {hq}, {sq}, {skv}]"), m));
            }
        }
    };
    let scale = scale.unwrap_or(1.0 / (d as f64).sqrt());
    let rows = b * hq * sq;
    let mut steps = Vec::new();
    if rows > 0 && d > 0 {
        let params = Uniform::new()
            .u32(to_u32("batch", b)?)
            .u32(to_u32("heads", hq)?)
            .u32(to_u32("kv heads", hkv)?)
            .u32(to_u32("query length", sq)?)
            .u32(to_u32("key length", skv)?)
            .u32(to_u32("head dim", d)?)
            .u32(mask_mode)
            .f32(scale as f32)
            .finish();
        steps.push(Step::Dispatch(Dispatch {
            shader: shader.into(),
            entry: "main",
            inputs: vec![q.id, k.id, v.id, mask.map_or(q.id, |m| m.id)],
            outputs: vec![out.id],
            params,
            workgroups: grid_groups(rows)?,
        }));
    }
    Ok(Lowered { shapes: vec![(out.id, q.shape.to_vec())], steps })
}

/// `update_cache.default(value [1,S,H,D], cache [1,Cmax,H,D], start_pos,
/// →out [1])` (`llama::update_cache`): writes `value` at rows
/// `start_pos..start_pos + S` of the cache, in place, with one contiguous
/// `place.wgsl` store (rows are contiguous in both). `out` is a dummy that
/// nothing writes or reads. `S` comes from the value's live shape.
pub fn update_cache(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(4)?;
    let value = c.tensor(0, "value")?;
    let cache = c.tensor(1, "cache")?;
    let start_pos = c.int(2, "start_pos")?;
    let out = c.tensor(3, "out")?;
    let shader = float_shader(Family::Place, &value, 0, "value")?;
    same_dtype(&cache, value.dtype, 1, "cache")?;
    let [1, s, h, d] = value.shape[..] else { return Err(shape_err(0, "value", "[1, S, H, D]".into(), &value)) };
    let [1, cmax, ch, cd] = cache.shape[..] else {
        return Err(shape_err(1, "cache", "[1, Cmax, H, D]".into(), &cache));
    };
    if (ch, cd) != (h, d) {
        return Err(shape_err(1, "cache", format!("[1, Cmax, {h}, {d}] (the value's heads and head dim)"), &cache));
    }
    let start = u64::try_from(start_pos).ok().filter(|&p| p + s <= cmax).ok_or_else(|| Error::ArgValue {
        arg_idx: 2,
        name: "start_pos",
        found: start_pos.to_string(),
        reason: "start_pos + S must be within the cache length",
    })?;
    let numel = value.numel();
    let mut steps = Vec::new();
    if numel > 0 {
        let params = Uniform::new()
            .u32(to_u32("numel", numel)?)
            .u32(1)
            .u32(to_u32("cache offset", start * h * d)?)
            .u32(0)
            .dims_u32(&[to_u32("numel", numel)?])
            .dims_u32(&[1])
            .finish();
        steps.push(Step::Dispatch(Dispatch {
            shader: shader.into(),
            entry: "main",
            inputs: vec![value.id],
            outputs: vec![cache.id],
            params,
            workgroups: grid_1d(numel, WG_ELEMENTWISE)?,
        }));
    }
    Ok(Lowered { shapes: vec![(out.id, out.shape.to_vec())], steps })
}
