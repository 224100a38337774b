//! Decode route of `et_vk.linear_q4gsw` (at most `MAX_ROWS` rows of x):
//! `out[m, n] = sum_k x[m, k] * (nibble(n, k) - 8) * scales[k / group, n] + bias[n]`.
//!
//! Bandwidth-bound: each weight byte is read once. A workgroup owns `cols`
//! adjacent output columns (the host picks 8, 16 or 32: more columns per
//! workgroup for wide layers, more workgroups for narrow ones); invocation
//! `i` computes column `i % cols` over K slice `i / cols`, the slices
//! interleaved by 16-byte words (32 nibbles, one scale group: the host
//! routes here only when `group % 32 == 0` and `K % 32 == 0`).
//!
//! Adjacent invocations are adjacent columns at the same word, so a
//! subgroup reads one address of x (a broadcast: x is read once per
//! `cols` columns, not once per column, which would cost 8 bytes of x per
//! byte of weight) and one contiguous run of scales; the slices of a
//! column read adjacent words of its row. Two words are loaded before
//! either is used. The slices meet in a workgroup-memory tree (no
//! subgroup operations: it runs in the browser too). Accumulation is f32.
//!
//! Bounds: `partial` is indexed by `lid` and by `lid + stride * cols`
//! with `slice < stride <= slices / 2`, below `WG` as `cols` divides `WG`
//! (8, 16 or 32: `q4_gemv_cols` in `ops/quant.rs`); the vector of row sums
//! by `r < m <= MAX_ROWS` (`q4_fast_dispatch` routes only `M <= 4` here).
// variants: f32 f16
// bounds: host-checked

alias Elem = f32;

/// Invocations per workgroup.
const WG: u32 = 256u;
/// Most rows of x (the host routes larger M to `q4_gemm.wgsl`).
const MAX_ROWS: u32 = 4u;

// include: q4_gemv_decl.wgsl

/// Per invocation, its slice's sums for the four rows.
var<workgroup> partial: array<vec4<f32>, WG>;

// include: q4_dot.wgsl

@compute @workgroup_size(WG)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let cols = p.cols;
    let c = lid % cols;
    let slice = lid / cols;
    let slices = WG / cols;
    let target_col = (wid.y * groups.x + wid.x) * cols + c;
    // Columns past N compute the last column (control flow stays uniform)
    // and store nothing.
    let col = min(target_col, p.n - 1u);
    let words = p.k / 32u;
    let x_row = p.k / 4u;
    // Word `w` of this column at `base + w * stride`.
    let at = column_words(col, words, p.n, (p.w_layout & 1u) != 0u);
    let base = at.x;
    let stride = at.y;
    var acc = vec4<f32>();
    var w = slice;
    for (; w + slices < words; w += 2u * slices) {
        let q0 = weights[base + w * stride];
        let q1 = weights[base + (w + slices) * stride];
        let s0 = f32(scales[(w * 32u / p.group_size) * p.n_pad + col]);
        let s1 = f32(scales[((w + slices) * 32u / p.group_size) * p.n_pad + col]);
        acc = rows4(acc, q0, w * 8u, x_row, p.m, s0);
        acc = rows4(acc, q1, (w + slices) * 8u, x_row, p.m, s1);
    }
    if w < words {
        let s = f32(scales[(w * 32u / p.group_size) * p.n_pad + col]);
        acc = rows4(acc, weights[base + w * stride], w * 8u, x_row, p.m, s);
    }
    partial[lid] = acc;
    workgroupBarrier();
    for (var stride = slices / 2u; stride > 0u; stride /= 2u) {
        if slice < stride {
            partial[lid] += partial[lid + stride * cols];
        }
        workgroupBarrier();
    }
    if slice == 0u && target_col < p.n {
        let v = partial[lid];
        var b = 0.0;
        if p.has_bias != 0u {
            b = f32(bias[col]);
        }
        for (var r = 0u; r < p.m; r++) {
            out[r * p.n + col] = Elem(v[r] + b);
        }
    }
}
