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

// include: q4_gemv_qkv_norm_decl.wgsl
// include: q4_gemv_qkv_pick.wgsl
// include: q4_dot.wgsl
// include: rms_prologue.wgsl

@compute @workgroup_size(WG)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let g = wid.y * groups.x + wid.x;
    rms_prologue(lid, g);
    // Which projection (uniform across the workgroup), and its sizes.
    let which = projection(g);
    let j = which.x;
    let first = which.y;
    let n = which.z;
    let n_pad = which.w;
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
