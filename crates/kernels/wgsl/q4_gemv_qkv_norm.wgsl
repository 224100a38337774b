//! Decode route of `etwgpu.rms_norm_linear_q4gsw_qkv` (at most `MAX_ROWS`
//! rows of x): the RMS norm of `a + b` (or of `a`) and the three 4-bit
//! projections Q, K and V that read it, one dispatch. Each workgroup
//! computes the normed rows itself into workgroup memory
//! (`rms_prologue.wgsl`) and workgroup 0 stores the residual sum; then,
//! as `q4_gemv_qkv.wgsl`,
//! `out_j[m, n] = sum_k x[m, k] * (nibble_j(n, k) - 8) * scales_j[k / group, n]`.
//!
//! The workgroups are taken in order by Q's columns, then K's, then V's
//! (`cols` adjacent columns each; the host gives every projection whole
//! workgroups), so which projection a workgroup computes is uniform across
//! it and the branches that pick its buffers do not diverge. Each weight
//! is row-major or word-major (bit j of `w_layout`). One dispatch instead
//! of three: on a GPU, a small dispatch costs a few microseconds whatever
//! it computes.
//!
//! Bounds: `x` by `j < m * k / 4 <= XS` in the prologue and by `r * k / 4
//! + 8w + i < m * k / 4` in the dots (`w < k / 32`, `i < 8`, `r < m`), the
//! host taking this route only for `m * k <= Q4_GEMV_NORM_MAX_ELEMS = 4 *
//! XS` (`ops/fused/norm_linears.rs`) and `m <= MAX_ROWS`
//! (`Q4_GEMV_MAX_ROWS`); `partial` by `lid` and `lid + stride * cols`
//! below `WG` (`cols` divides `WG`: 8, 16 or 32, `q4_gemv_cols` in
//! `ops/quant.rs`); the vectors of row sums by `r < m <= 4`.
// variants: f32 f16
// bounds: host-checked

alias Elem = f32;

/// Invocations per workgroup.
const WG: u32 = 256u;
/// Most rows of x (the host routes larger M to the norm and three GEMMs).
const MAX_ROWS: u32 = 4u;
/// vec4s of normed input held in workgroup memory: `m * k` at most
/// `4 * XS` (the host checks).
const XS: u32 = 768u;

struct Params {
    /// Rows of x.
    m: u32,
    /// Input features (a multiple of 32).
    k: u32,
    /// Inputs per scale group (a multiple of 32).
    group_size: u32,
    /// Columns per workgroup: 8, 16 or 32.
    cols: u32,
    /// Output features of Q, K and V.
    n_q: u32,
    n_k: u32,
    n_v: u32,
    /// Bit j: weight j is word-major (16-byte word `w` of row `n` at word
    /// `w * N + n`; see `etwgpu_graph::layout`), else row-major.
    w_layout: u32,
    /// Row lengths of the three scales: N padded.
    pad_q: u32,
    pad_k: u32,
    pad_v: u32,
    /// The first workgroup of K's columns, and of V's.
    wg_k: u32,
    wg_v: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
    /// The norm's epsilon.
    norm_eps: f32,
    /// 1: normalize `a + b` and store it in `sum`; 0: normalize `a`.
    norm_add: u32,
    _pn0: u32,
    _pn1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<vec4<Elem>>;
@group(0) @binding(2) var<storage, read> b: array<vec4<Elem>>;
@group(0) @binding(3) var<storage, read> norm_w: array<vec4<Elem>>;
@group(0) @binding(4) var<storage, read> w_q: array<vec4<u32>>;
@group(0) @binding(5) var<storage, read> s_q: array<Elem>;
@group(0) @binding(6) var<storage, read> w_k: array<vec4<u32>>;
@group(0) @binding(7) var<storage, read> s_k: array<Elem>;
@group(0) @binding(8) var<storage, read> w_v: array<vec4<u32>>;
@group(0) @binding(9) var<storage, read> s_v: array<Elem>;
@group(0) @binding(10) var<storage, read_write> out_q: array<Elem>;
@group(0) @binding(11) var<storage, read_write> out_k: array<Elem>;
@group(0) @binding(12) var<storage, read_write> out_v: array<Elem>;
@group(0) @binding(13) var<storage, read_write> sum: array<vec4<Elem>>;

/// The normed rows of the input.
var<workgroup> x: array<vec4<f32>, XS>;
/// Per invocation, its slice's sums for the four rows.
var<workgroup> partial: array<vec4<f32>, WG>;

// include: q4_dot.wgsl
// include: rms_prologue.wgsl

/// Word `i` of projection `j`'s weight.
fn weight(j: u32, i: u32) -> vec4<u32> {
    if j == 0u {
        return w_q[i];
    }
    if j == 1u {
        return w_k[i];
    }
    return w_v[i];
}

/// Scale `i` of projection `j`.
fn scale(j: u32, i: u32) -> f32 {
    if j == 0u {
        return f32(s_q[i]);
    }
    if j == 1u {
        return f32(s_k[i]);
    }
    return f32(s_v[i]);
}

fn store(j: u32, i: u32, v: f32) {
    if j == 0u {
        out_q[i] = Elem(v);
    } else if j == 1u {
        out_k[i] = Elem(v);
    } else {
        out_v[i] = Elem(v);
    }
}

@compute @workgroup_size(WG)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let g = wid.y * groups.x + wid.x;
    rms_prologue(lid, g);
    // Which projection (uniform across the workgroup), and its sizes.
    var j = 0u;
    var first = 0u;
    var n = p.n_q;
    var n_pad = p.pad_q;
    if g >= p.wg_v {
        j = 2u;
        first = p.wg_v;
        n = p.n_v;
        n_pad = p.pad_v;
    } else if g >= p.wg_k {
        j = 1u;
        first = p.wg_k;
        n = p.n_k;
        n_pad = p.pad_k;
    }
    let cols = p.cols;
    let c = lid % cols;
    let slice = lid / cols;
    let slices = WG / cols;
    let target_col = (g - first) * cols + c;
    // Columns past N compute the last column (control flow stays uniform)
    // and store nothing.
    let col = min(target_col, n - 1u);
    let words = p.k / 32u;
    let x_row = p.k / 4u;
    // Word `w` of this column at `base + w * stride`.
    let at = column_words(col, words, n, ((p.w_layout >> j) & 1u) != 0u);
    let base = at.x;
    let stride = at.y;
    var acc = vec4<f32>();
    var w = slice;
    for (; w + slices < words; w += 2u * slices) {
        let q0 = weight(j, base + w * stride);
        let q1 = weight(j, base + (w + slices) * stride);
        let s0 = scale(j, (w * 32u / p.group_size) * n_pad + col);
        let s1 = scale(j, ((w + slices) * 32u / p.group_size) * n_pad + col);
        acc = rows4(acc, q0, w * 8u, x_row, p.m, s0);
        acc = rows4(acc, q1, (w + slices) * 8u, x_row, p.m, s1);
    }
    if w < words {
        let s = scale(j, (w * 32u / p.group_size) * n_pad + col);
        acc = rows4(acc, weight(j, base + w * stride), w * 8u, x_row, p.m, s);
    }
    // The norm's scale of each row, on its sums.
    acc *= rms_scale(lid);
    partial[lid] = acc;
    workgroupBarrier();
    for (var st = slices / 2u; st > 0u; st /= 2u) {
        if slice < st {
            partial[lid] += partial[lid + st * cols];
        }
        workgroupBarrier();
    }
    if slice == 0u && target_col < n {
        let v = partial[lid];
        for (var r = 0u; r < p.m; r++) {
            store(j, r * n + col, v[r]);
        }
    }
}
