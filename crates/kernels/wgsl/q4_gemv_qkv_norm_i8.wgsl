//! Decode route of `etwgpu.rms_norm_linear_q4gsw_qkv` with int8
//! activations (opt-in: `DeviceCaps::int8_activations`), one row of x:
//! `q4_gemv_qkv_norm.wgsl` (the RMS norm of `a + b` or of `a` built in
//! each workgroup's memory, its row scale applied after the dots; the
//! Q, K and V projections side by side), with the normed row rounded to
//! int8 per 32-input block after the prologue (`q8_x.wgsl`) and each
//! 16-byte word's dot taken by `dot4I8Packed` (see `q4_gemv_i8.wgsl`).
//!
//! Bounds: `x` by `j < m * k / 4 <= XS` (`Q4_GEMV_NORM_MAX_ELEMS` in
//! `ops/fused/norm_linears.rs`); `partial` by `lid` and `lid + st * cols`
//! below `WG` (`cols` divides `WG`); `xq` and `omax` by octets below `K /
//! 8 <= XQ`, `xscale` and `xsum` by blocks below `XQ / 4` (`8 * XQ = 4 *
//! XS`).
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
/// Octets of the row held rounded (`K / 8` at most: `4 * XS / 8`).
const XQ: u32 = 384u;

// include: q4_gemv_qkv_norm_decl.wgsl
// include: q4_gemv_qkv_pick.wgsl

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
    round_x(lid, p.k);
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
        acc.x += dot_i8(q0, w) * s0 + dot_i8(q1, w + slices) * s1;
    }
    if w < words {
        let s = scale(j, (w * 32u / p.group_size) * n_pad + col);
        acc.x += dot_i8(weight(j, base + w * stride), w) * s;
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
        store(j, col, partial[lid].x);
    }
}
