//! The RMS-norm prologue of the normed 4-bit GEMVs (`q4_gemv_norm.wgsl`,
//! `q4_gemv_qkv_norm.wgsl`, `q4_gemv_swiglu_norm.wgsl`): each workgroup
//! computes the GEMV's input itself, `x = v / sqrt(mean(v^2) + eps) * norm_w`
//! per row of `v = a + b` (residual add and RMS norm, `norm_add` set) or
//! `v = a` (RMS norm alone), into workgroup memory, so that the norm costs
//! no dispatch of its own. Rounded as `add_rms_norm.wgsl` and
//! `rms_norm.wgsl` round: `v` to the tensor's dtype after the add, `x`
//! after the scaling. The kernel that includes this declares `WG`, `p.m`
//! (rows), `p.k` (a multiple of 4), `p.norm_eps`, `p.norm_add`, storage
//! `a`, `b`, `norm_w` (`array<vec4<Elem>>`) and `sum` (read-write), and
//! workgroup `x: array<vec4<f32>, _>` (at least `m * k / 4`) and
//! `partial: array<vec4<f32>, WG>`.

/// Fills `x` with the normed rows (row `r` from vec4 `r * k / 4`);
/// workgroup `g` 0 also stores the sum `a + b` (with `norm_add`), the one
/// copy later ops read. Ends with a barrier, so `x` is ready.
fn rms_prologue(lid: u32, g: u32) {
    let x_row = p.k / 4u;
    let n = p.m * x_row;
    let add = p.norm_add != 0u;
    let store = add && g == 0u;
    var sq = vec4<f32>();
    for (var j = lid; j < n; j += WG) {
        let r = j / x_row;
        let v_in = vec4<f32>(a[j]);
        let v = select(v_in, vec4<f32>(vec4<Elem>(v_in + vec4<f32>(b[j]))), add);
        if store {
            sum[j] = vec4<Elem>(v);
        }
        x[j] = v;
        sq += select(vec4<f32>(), vec4<f32>(dot(v, v)), vec4<u32>(r) == vec4<u32>(0u, 1u, 2u, 3u));
    }
    partial[lid] = sq;
    workgroupBarrier();
    for (var st = WG / 2u; st > 0u; st /= 2u) {
        if lid < st {
            partial[lid] += partial[lid + st];
        }
        workgroupBarrier();
    }
    // Every invocation reads the sums before the barrier below; `partial`
    // is written again only after it.
    let rstd = inverseSqrt(partial[0] / f32(p.k) + p.norm_eps);
    // Each invocation scales the elements it wrote.
    for (var j = lid; j < n; j += WG) {
        x[j] = vec4<f32>(vec4<Elem>(x[j] * rstd[j / x_row] * vec4<f32>(norm_w[j % x_row])));
    }
    workgroupBarrier();
}
