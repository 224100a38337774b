//! The parameters, bindings and workgroup memory of the split-KV combine
//! folded into the O projection's 4-bit GEMV (`q4_gemv_attn.wgsl`) and
//! its int8 form (`q4_gemv_attn_i8.wgsl`). The including family declares
//! `Elem`, `WG`, `XS`, `ML` and `NEG`, and includes `split_plan.wgsl`
//! (and, after this, the merge prologue `attn_merge.wgsl`).

struct Params {
    /// Rows of x.
    m: u32,
    /// Output features.
    n: u32,
    /// Input features (`n_heads * head_dim`, a multiple of 32).
    k: u32,
    /// Row length of the scales (and bias): N padded.
    n_pad: u32,
    /// Inputs per scale group (a multiple of 32).
    group_size: u32,
    has_bias: u32,
    /// Columns per workgroup: 8, 16 or 32.
    cols: u32,
    /// Bit 0: the weights are word-major (16-byte word `w` of row `n` at
    /// word `w * N + n`; see `etwgpu_graph::layout`), else row-major.
    w_layout: u32,
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
@group(0) @binding(1) var<storage, read> part: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> weights: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> scales: array<Elem>;
@group(0) @binding(4) var<storage, read> bias: array<Elem>;
@group(0) @binding(5) var<storage, read_write> out: array<Elem>;

/// The merged attention output: row `r` of x from vec4 `r * k / 4`.
var<workgroup> x: array<vec4<f32>, XS>;
/// Per invocation, its slice's sums for the four rows.
var<workgroup> partial: array<vec4<f32>, WG>;
/// Per (row, head) and split: its `(max, sum)`, then `.x` its weight;
/// the first split's `.y` then holds the (row, head)'s sum.
var<workgroup> ml: array<vec2<f32>, ML>;
