//! The body of the normed SwiGLU GEMV (`q4_gemv_swiglu_norm.wgsl`) and its
//! int8 form (`q4_gemv_swiglu_norm_i8.wgsl`): the prologue's call, the
//! column each invocation takes, the gate and up word loop, the norm's
//! scale, the slices' tree (the up sums in `x`, free by then) and
//! `g * sigmoid(g) * u`. The including family declares, besides what
//! `q4_gemv_swiglu_norm_decl.wgsl`, `q4_dot.wgsl` and `rms_prologue.wgsl`
//! give, `fn prologue(lid: u32, g: u32)` (called by every invocation of
//! workgroup `g` in uniform control flow: the normed row into `x`, which
//! the int8 form also rounds) and `fn word_dot(acc: vec4<f32>, q:
//! vec4<u32>, w: u32, s: f32) -> vec4<f32>` (`acc` plus 16-byte word `w`'s
//! dot with the rows, times its scale `s`), as the QKV GEMVs' body
//! (`q4_gemv_qkv_body.wgsl`) names them.

@compute @workgroup_size(WG)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let g = wid.y * groups.x + wid.x;
    prologue(lid, g);
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
    var acc = vec4<f32>();
    var acc_up = vec4<f32>();
    for (var w = slice; w < words; w += slices) {
        let qg = w_gate[at_g.x + w * at_g.y];
        let qu = w_up[at_u.x + w * at_u.y];
        let at = (w * 32u / p.group_size) * p.n_pad + col;
        let sg = f32(s_gate[at]);
        let su = f32(s_up[at]);
        acc = word_dot(acc, qg, w, sg);
        acc_up = word_dot(acc_up, qu, w, su);
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
