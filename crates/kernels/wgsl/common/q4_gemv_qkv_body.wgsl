//! The body of the one-dispatch QKV GEMVs: `q4_gemv_qkv.wgsl`, its normed
//! form `q4_gemv_qkv_norm.wgsl` and that one's int8 form
//! `q4_gemv_qkv_norm_i8.wgsl`. It holds the prologue's call, which
//! projection and column each invocation takes, the word loop (two words
//! in flight), the rows' scale, the slices' tree and the stores. The
//! including family declares, besides `p`, `WG`, `partial` and what
//! `q4_gemv_qkv_pick.wgsl` and `q4_dot.wgsl` give:
//! - `fn prologue(lid: u32, g: u32)`, called by every invocation of
//!   workgroup `g` in uniform control flow before any word is read (the
//!   normed forms build the normed row in `x` there, the int8 form rounds
//!   it too; the plain form reads `x` from storage and does nothing);
//! - `fn word_dot(acc: vec4<f32>, q: vec4<u32>, w: u32, s: f32) ->
//!   vec4<f32>`: `acc` plus 16-byte word `w`'s dot with the rows, times
//!   its scale `s`;
//! - `fn row_scale(lid: u32) -> vec4<f32>`: what each row's sums are
//!   multiplied by before the tree (the norm's scale; ones without a norm).

@compute @workgroup_size(WG)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let g = wid.y * groups.x + wid.x;
    prologue(lid, g);
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
        acc = word_dot(acc, q0, w, s0);
        acc = word_dot(acc, q1, w + slices, s1);
    }
    if w < words {
        let s = scale(j, (w * 32u / p.group_size) * n_pad + col);
        acc = word_dot(acc, weight(j, base + w * stride), w, s);
    }
    // The rows' scale (the norm's), on their sums.
    acc *= row_scale(lid);
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
