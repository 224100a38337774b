//! Decode route of `etwgpu.sdpa_rope_linear_q4gsw` with int8 activations
//! (opt-in: `DeviceCaps::int8_activations`), one query row:
//! `q4_gemv_attn.wgsl` (the split-KV partials merged into the attention's
//! output row in each workgroup's memory, then the O projection's 4-bit
//! GEMV), with the merged row rounded to int8 per 32-input block
//! (`q8_x.wgsl`) and each 16-byte word's dot taken by `dot4I8Packed` (see
//! `q4_gemv_i8.wgsl`).
//!
//! Bounds: as `q4_gemv_attn.wgsl` (`x` by `m * k / 4 <= XS`, `ml` by the
//! pairs of the longest context, `partial` below `WG`); `xq` and `omax`
//! by octets below `K / 8 <= XQ`, `xscale` and `xsum` by blocks below `XQ
//! / 4` (`8 * XQ = 4 * XS`).
// variants: f32 f16
// bounds: host-checked

alias Elem = f32;

/// Invocations per workgroup.
const WG: u32 = 256u;
/// Most rows of x (the attention's query rows).
const MAX_ROWS: u32 = 4u;
/// vec4s of merged attention output held in workgroup memory: `m * k / 4`
/// at most (the host checks).
const XS: u32 = 512u;
/// Octets of the row held rounded (`K / 8` at most: `4 * XS / 8`).
const XQ: u32 = 256u;
/// (row, head, split) entries of the merge: `seq * n_heads * splits` at
/// most (the host checks at the longest context).
const ML: u32 = 512u;
/// Score of a masked key (`sdpa_split.wgsl`'s).
const NEG: f32 = -3.402823e38;

// include: split_plan.wgsl
// include: q4_gemv_attn_decl.wgsl
// include: attn_merge.wgsl

/// vec4 `i` of the merged row (`q8_x.wgsl`).
fn x_at(i: u32) -> vec4<f32> {
    return x[i];
}

// include: q4_dot.wgsl
// include: q4_gemv_columns.wgsl
// include: q8_x.wgsl
// include: q4_gemv_columns_i8.wgsl

@compute @workgroup_size(WG)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    // The first two words and their scales, in flight through the prologue.
    let c = column_start(lid, wid, groups);
    merge_prologue(lid);
    round_x(lid, p.k);
    column_finish_i8(lid, c);
}
