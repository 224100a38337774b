//! Decode route of `etwgpu.sdpa_rope_linear_q4gsw`: the second pass of
//! split-KV attention (`sdpa_split_combine.wgsl`) folded into the 4-bit
//! GEMV that reads the attention's output (the O projection), one
//! dispatch. Each workgroup merges the partials of every split
//! (`sdpa_split.wgsl`'s `(m, l)` and unnormalized output per query row,
//! head and split) into the attention's output rows in workgroup memory
//! (every workgroup reads the whole input anyway): the splits' `(max,
//! sum)` pairs loaded at once, an invocation each; per (row, head) the
//! global max, the rescaled sum and each split's weight `exp(m - max)`;
//! then each invocation sums a `vec4` of the head dim over the splits (four
//! loads in flight) and divides by the sum, rounded to `Elem` as the
//! combine stores it. The invocation's first two weight words are loaded
//! before the merge (they do not depend on it). Then, as `q4_gemv.wgsl`,
//! `out[m, n] = sum_k x[m, k] * (nibble(n, k) - 8) * scales[k / group, n] + bias[n]`
//! with x read from workgroup memory. The host routes here only when the
//! rows fit `XS` and the (row, head, split) pairs of the longest context
//! fit `ML`, with few splits (the merge walks them serially).
//!
//! Bounds: `partial` and the vector of row sums as in `q4_gemv.wgsl`
//! (`cols` from `q4_gemv_cols`, `m = S <= MAX_ROWS`); `ml` by `e < seq *
//! n_heads * n_splits`, and `x` by `j < seq * n_heads * head_dim / 4 = m *
//! k / 4` (as are the GEMV's reads of it): `combine_folds`
//! (`ops/llm/split_kv.rs`) routes here only when `S * Hq * splits <= ML`
//! at the longest context, which bounds the live plan's splits
//! (`sdpa_with_kv_cache_into` checks `start_pos + S <= Cmax`, and
//! `split_bound` is non-decreasing), and `S * Hq * D / 4 <= XS`.
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
/// (row, head, split) entries of the merge: `seq * n_heads * splits` at
/// most (the host checks at the longest context).
const ML: u32 = 512u;
/// Score of a masked key (`sdpa_split.wgsl`'s).
const NEG: f32 = -3.402823e38;

// include: split_plan.wgsl
// include: q4_gemv_attn_decl.wgsl
// include: attn_merge.wgsl
// include: q4_dot.wgsl
// include: q4_gemv_columns.wgsl

@compute @workgroup_size(WG)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    // The first two words and their scales, in flight through the prologue.
    let c = column_start(lid, wid, groups);
    merge_prologue(lid);
    column_finish(lid, c, p.m);
}
