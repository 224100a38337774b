//! RoPE fused into the decode attention that reads the rotated query and
//! key: `etwgpu.sdpa_rope_with_kv_cache`.
//!
//! On the split-KV route (a few query rows: decode) the rotation costs no
//! dispatch of its own: the partials kernel's `_rope` form
//! (`sdpa_split_rope.wgsl`, or `sdpa_split_sg_rope.wgsl` on the subgroup
//! route) reads the query and the new keys un-rotated
//! with the tables and rotates them as it loads them, and stores the
//! rotated keys into the cache; the rotated query and key are not written.
//! Elsewhere it is the rotation's dispatch (`rope.wgsl`) then the
//! attention's own lowering.

use crate::error::{Error, Result};
use crate::generated::shaders::{Family, ShaderId};
use crate::ops::llm::{apply_rotary_emb_into, sdpa_with_kv_cache_into};
use crate::plan::{Ctx, Lowered, Shader, Step, TensorInfo, Uniform, Vid, to_u32};

/// `etwgpu.sdpa_rope_with_kv_cache.default(xq [1,S,Hq,D], xk [1,S,Hkv,D],
/// value, key_cache, value_cache, start_pos, seq_len, attn_mask?,
/// dropout_p, is_causal, scale?, freqs_cos [R, D/2], freqs_sin, table_row,
/// →[xq_out, xk_out, out])`: `et_vk.apply_rotary_emb(xq, xk, cos, sin)`
/// with `cos`, `sin` rows `table_row .. table_row + S` of the tables (the
/// graph's fusion takes the slices of the tables into the op), then
/// `sdpa_with_kv_cache` of the rotated query and key.
pub fn sdpa_rope_with_kv_cache(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(15)?;
    let table_row = crate::ops::index::non_negative(c, 13, "table_row")?;
    let outs = c.tensor_list(14, "out")?;
    let [q_rot, k_rot, out] = outs[..] else {
        return Err(Error::ArgValue {
            arg_idx: 14,
            name: "out",
            found: format!("{} tensors", outs.len()),
            reason: "expected the rotated query and key, then the attention's output",
        });
    };
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
        Family::SdpaSplitSg => Some(Family::SdpaSplitSgRope),
        _ => None,
    };
    let split_at = attn.steps.iter().position(
        |s| matches!(s, Step::Dispatch(d) if matches!(&d.shader, Shader::Static(id) if rope_form(id).is_some())),
    );
    let steps = match split_at {
        Some(i) => {
            let mut steps = attn.steps;
            let Step::Dispatch(d) = &mut steps[i] else { unreachable!("found a dispatch") };
            let Shader::Static(id) = d.shader else { unreachable!("found a static shader") };
            let family = rope_form(&id).expect("found a split partials kernel");
            let shader =
                ShaderId::find(family, id.variant()).expect("the `_rope` forms have the variants of the split kernels");
            d.shader = shader.into();
            // [query, new keys, new values] un-rotated, with the tables.
            debug_assert_eq!(d.inputs[..2], [q_rot.id, k_rot.id]);
            d.inputs = vec![xq.id, xk.id, d.inputs[2], c.id(11), c.id(12)];
            d.params.extend(Uniform::new().u32(to_u32("table row", table_row)?).finish());
            steps
        }
        None => [rope.steps, attn.steps].concat(),
    };
    Ok(Lowered { shapes, steps })
}
