//! Decode route of `etwgpu.rms_norm_linear_q4gsw_swiglu` (at most
//! `MAX_ROWS` rows of x): the RMS norm of `a + b` (or of `a`) and the
//! SwiGLU pair that reads it, one dispatch. Each workgroup computes the
//! normed rows itself into workgroup memory (`rms_prologue.wgsl`) and
//! workgroup 0 stores the residual sum; then, as `q4_gemv_swiglu.wgsl`,
//! `out[m, n] = g * sigmoid(g) * u` with `g` and `u` the 4-bit linears of
//! the gate and up weights. The up sums meet in the workgroup memory of x
//! once the loop is done with it (16 KiB of workgroup memory in all).
//!
//! Bounds: `x` by `j < m * k / 4 <= XS` in the prologue and by `r * k / 4
//! + 8w + i < m * k / 4` in the dots (`w < k / 32`, `i < 8`, `r < m`), the
//! host taking this route only for `m * k <= Q4_GEMV_NORM_MAX_ELEMS = 4 *
//! XS` (`ops/fused/norm_linears.rs`) and `m <= MAX_ROWS`
//! (`Q4_GEMV_MAX_ROWS`); `partial` by `lid` and `lid + stride * cols`
//! below `WG` (`cols` divides `WG`: 8, 16 or 32, `q4_gemv_cols` in
//! `ops/quant.rs`); the vectors of row sums by `r < m <= 4`. The up
//! sums reuse `x` at `lid` and `lid + stride * cols`, below `WG <= XS`.
// variants: f32 f16
// bounds: host-checked

alias Elem = f32;

/// Invocations per workgroup.
const WG: u32 = 256u;
/// Most rows of x (the host routes larger M to the norm and the GEMM).
const MAX_ROWS: u32 = 4u;
/// vec4s of normed input held in workgroup memory: `m * k` at most
/// `4 * XS` (the host checks).
const XS: u32 = 768u;

// include: q4_gemv_swiglu_norm_decl.wgsl
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
    let cols = p.cols;
    let c = lid % cols;
    let slice = lid / cols;
    let slices = WG / cols;
    let target_col = g * cols + c;
    // Columns past N compute the last column and store nothing.
    let col = min(target_col, p.n - 1u);
    let words = p.k / 32u;
    let x_row = p.k / 4u;
    // Word `w` of this column at `at.x + w * at.y` (gate, up).
    let at_g = column_words(col, words, p.n, (p.w_layout & 1u) != 0u);
    let at_u = column_words(col, words, p.n, (p.w_layout & 2u) != 0u);
    var acc = vec4<f32>();
    var acc_up = vec4<f32>();
    for (var w = slice; w < words; w += slices) {
        let qg = w_gate[at_g.x + w * at_g.y];
        let qu = w_up[at_u.x + w * at_u.y];
        let at = (w * 32u / p.group_size) * p.n_pad + col;
        let sg = f32(s_gate[at]);
        let su = f32(s_up[at]);
        acc = rows4(acc, qg, w * 8u, x_row, p.m, sg);
        acc_up = rows4(acc_up, qu, w * 8u, x_row, p.m, su);
    }
    // The norm's scale of each row, on both sums; its closing barrier
    // also means every invocation is done reading x before it holds the up
    // sums.
    let rstd = rms_scale(lid);
    acc *= rstd;
    acc_up *= rstd;
    partial[lid] = acc;
    x[lid] = acc_up;
    workgroupBarrier();
    for (var stride = slices / 2u; stride > 0u; stride /= 2u) {
        if slice < stride {
            partial[lid] += partial[lid + stride * cols];
            x[lid] += x[lid + stride * cols];
        }
        workgroupBarrier();
    }
    if slice == 0u && target_col < p.n {
        let gs = partial[lid];
        let u = x[lid];
        for (var r = 0u; r < p.m; r++) {
            out[r * p.n + col] = Elem(gs[r] / (1.0 + exp(-gs[r])) * u[r]);
        }
    }
}
