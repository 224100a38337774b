//! Decode route of `etwgpu.rms_norm_linear_q4gsw_swiglu` with int8
//! activations (opt-in: `DeviceCaps::int8_activations`), one row of x:
//! `q4_gemv_swiglu_norm.wgsl` (the RMS norm of `a + b` or of `a` built in
//! each workgroup's memory, its row scale applied after the dots; the
//! gate and up linears; `g * sigmoid(g) * u`), with the normed row rounded
//! to int8 per 32-input block after the prologue (`q8_x.wgsl`) and each
//! 16-byte word's dot taken by `dot4I8Packed` (see `q4_gemv_i8.wgsl`).
//! The rounding sees the row before the norm's scale, which is one number
//! a row, so it rounds the same inputs as the normed row would give.
//!
//! Bounds: `x` by `j < m * k / 4 <= XS` (`Q4_GEMV_NORM_MAX_ELEMS` in
//! `ops/fused/norm_linears.rs`) and by `lid < WG`; `partial` by `lid` and
//! `lid + stride * cols` below `WG` (`cols` divides `WG`); `xq` and `omax`
//! by octets below `K / 8 <= XQ`, `xscale` and `xsum` by blocks below
//! `XQ / 4` (the same bound: `8 * XQ = 4 * XS`).
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
/// Octets of the row held rounded (`K / 8` at most: `4 * XS / 8`).
const XQ: u32 = 384u;

// include: q4_gemv_swiglu_norm_decl.wgsl

/// vec4 `i` of the row as the prologue left it (`q8_x.wgsl`).
fn x_at(i: u32) -> vec4<f32> {
    return x[i];
}

// include: q4_dot.wgsl
// include: rms_prologue.wgsl
// include: q8_x.wgsl

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
    // Word `w` of this column at `at.x + w * at.y` (gate, up).
    let at_g = column_words(col, words, p.n, (p.w_layout & 1u) != 0u);
    let at_u = column_words(col, words, p.n, (p.w_layout & 2u) != 0u);
    round_x(lid, p.k);
    var acc = vec4<f32>();
    var acc_up = vec4<f32>();
    for (var w = slice; w < words; w += slices) {
        let qg = w_gate[at_g.x + w * at_g.y];
        let qu = w_up[at_u.x + w * at_u.y];
        let at = (w * 32u / p.group_size) * p.n_pad + col;
        let sg = f32(s_gate[at]);
        let su = f32(s_up[at]);
        acc.x += dot_i8(qg, w) * sg;
        acc_up.x += dot_i8(qu, w) * su;
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
        out[col] = Elem(gs.x / (1.0 + exp(-gs.x)) * u.x);
    }
}
