//! The parameters, bindings, workgroup memory and merge prologue of the
//! split-KV combine folded into the O projection's GEMV
//! (`q4_gemv_attn.wgsl`) and its int8 form (`q4_gemv_attn_i8.wgsl`). The
//! including family declares `Elem`, `WG`, `XS`, `ML` and `NEG`, and
//! includes `split_plan.wgsl`.

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
