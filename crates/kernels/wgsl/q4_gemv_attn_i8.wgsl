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
// include: split_plan.wgsl
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

/// vec4 `i` of the merged row (`q8_x.wgsl`).
fn x_at(i: u32) -> vec4<f32> {
    return x[i];
}

// include: q4_dot.wgsl
// include: q4_gemv_columns.wgsl
// include: q8_x.wgsl
// include: q4_gemv_columns_i8.wgsl

/// Fills `x` with the attention's output rows merged from the partials.
/// Ends with a barrier, so `x` is ready.
fn merge_prologue(lid: u32) {
    let d4 = p.head_dim / 4u;
    let rows = p.seq * p.n_heads;
    let n_splits = split_plan(p.start_pos + p.seq).x;
    let stride = d4 + 1u;
    // Partial `e = (row, head) * n_splits + split` starts at `e * stride`.
    for (var e = lid; e < rows * n_splits; e += WG) {
        ml[e] = part[e * stride].xy;
    }
    workgroupBarrier();
    for (var r = lid; r < rows; r += WG) {
        let b = r * n_splits;
        var mx = NEG;
        for (var s = 0u; s < n_splits; s++) {
            mx = max(mx, ml[b + s].x);
        }
        var l = 0.0;
        for (var s = 0u; s < n_splits; s++) {
            let w = exp(ml[b + s].x - mx);
            l += ml[b + s].y * w;
            ml[b + s].x = w;
        }
        ml[b].y = l;
    }
    workgroupBarrier();
    for (var j = lid; j < rows * d4; j += WG) {
        let r = j / d4;
        let b = r * n_splits;
        let at = b * stride + 1u + j % d4;
        var acc = vec4<f32>();
        var s = 0u;
        for (; s + 4u <= n_splits; s += 4u) {
            let o0 = part[at + s * stride];
            let o1 = part[at + (s + 1u) * stride];
            let o2 = part[at + (s + 2u) * stride];
            let o3 = part[at + (s + 3u) * stride];
            acc += o0 * ml[b + s].x + o1 * ml[b + s + 1u].x + o2 * ml[b + s + 2u].x + o3 * ml[b + s + 3u].x;
        }
        for (; s < n_splits; s++) {
            acc += part[at + s * stride] * ml[b + s].x;
        }
        x[j] = vec4<f32>(vec4<Elem>(acc / ml[b].y));
    }
    workgroupBarrier();
}

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
