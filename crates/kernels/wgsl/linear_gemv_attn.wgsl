//! Decode route of `etwgpu.sdpa_rope_linear` (float weights): the second
//! pass of split-KV attention (`sdpa_split_combine.wgsl`) folded into the
//! float GEMV that reads the attention's output (the O projection), one
//! dispatch. Each workgroup merges the partials of every split into the
//! attention's output rows in workgroup memory (`attn_merge.wgsl`; every
//! workgroup reads the whole input anyway), rounded to `Elem` as the
//! combine stores them; then, as `linear_gemv.wgsl`,
//! `out[m, n] = sum_k x[m, k] * w[n, k] + bias[n]` with x read from
//! workgroup memory. The host routes here only when the rows fit `XS` and
//! the (row, head, split) entries of the longest context fit `ML`, with
//! few splits (the merge walks them serially).
//!
//! Bounds: `partial` by `lid` and `lid + stride` below `WG`, `ml` by `e < seq
//! * n_heads * n_splits`, and `x` by `j < seq * n_heads * head_dim / 4 =
//! m * k / 4` (as are the GEMV's reads of it): `combine_folds`
//! (`ops/llm/split_kv.rs`) routes here only when `S * Hq * splits <= ML`
//! at the longest context and `S * Hq * D / 4 <= XS`.
// variants: f32 f16

alias Elem = f32;

// include: gemv_lanes.wgsl
/// vec4s of merged attention output held in workgroup memory: `m * k / 4`
/// at most (the host checks).
const XS: u32 = 512u;
/// (row, head, split) entries of the merge: `seq * n_heads * splits` at
/// most (the host checks at the longest context).
const ML: u32 = 512u;
/// Score of a masked key (`sdpa_split.wgsl`'s).
const NEG: f32 = -3.402823e38;

struct Params {
    /// Rows of x.
    m: u32,
    /// Output features.
    n: u32,
    /// Input features (`n_heads * head_dim`, a multiple of 4).
    k: u32,
    has_bias: u32,
    /// Output columns a workgroup (8, 4 or 2).
    cols: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
    /// The combine's: query rows (`S`, the same as `m`).
    seq: u32,
    /// Query heads.
    n_heads: u32,
    /// Head dim (a multiple of 4, at most 256).
    head_dim: u32,
    /// Position of the first query row (the context is `start_pos + seq`).
    start_pos: u32,
    /// Split plan constants (`common/split_plan.wgsl`).
    split_target: u32,
    split_min_keys: u32,
    split_tile: u32,
    split_max: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
// include: split_plan.wgsl
@group(0) @binding(1) var<storage, read> part: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> w: array<vec4<Elem>>;
@group(0) @binding(3) var<storage, read> bias: array<Elem>;
@group(0) @binding(4) var<storage, read_write> out: array<Elem>;

/// The merged attention output: row `r` of x from vec4 `r * k / 4`.
var<workgroup> x: array<vec4<f32>, XS>;
/// Per (row, head) and split: its `(max, sum)`, then `.x` its weight;
/// the first split's `.y` then holds the (row, head)'s sum.
var<workgroup> ml: array<vec2<f32>, ML>;
/// Per invocation, its sums for the four rows.
var<workgroup> partial: array<vec4<f32>, WG>;

// include: attn_merge.wgsl

/// The attention's output rows merged into `x` (`attn_merge.wgsl`).
fn prologue(lid: u32) {
    merge_prologue(lid);
}

fn x_at(i: u32) -> vec4<f32> {
    return x[i];
}

// include: linear_gemv_body.wgsl
