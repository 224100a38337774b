//! The RMS-norm prologue of the normed 4-bit GEMVs (`q4_gemv_norm.wgsl`,
//! `q4_gemv_qkv_norm.wgsl`, `q4_gemv_swiglu_norm.wgsl`): each workgroup
//! builds the GEMV's input itself, so that the norm costs no dispatch of
//! its own. For a row `v = a + b` (residual add and RMS norm, `norm_add`
//! set) or `v = a` (RMS norm alone) the normed row is
//! `v * rstd * norm_w` with the row's scalar `rstd = 1 / sqrt(mean(v^2) +
//! eps)`; since `rstd` is one number a row, it multiplies the GEMV's sums
//! instead: [`rms_prologue`] writes `v * norm_w` into workgroup memory and
//! leaves the sums of squares unreduced, the weight loop starts after one
//! barrier, and [`rms_scale`] reduces the squares after it. (Reduced
//! first, the sums' tree stood between every workgroup's start and its
//! first weight load: run an measured that prologue as the cost of more
//! workgroups.) `v` is rounded to the tensor's dtype after the add, as
//! `add_rms_norm.wgsl` rounds it; the normed input stays f32 (the unfused
//! path stores it in the tensor's dtype). The kernel that includes this
//! declares `WG`, `p.m` (rows), `p.k` (a multiple of 4), `p.norm_eps`,
//! `p.norm_add`, storage `a`, `b`, `norm_w` (`array<vec4<Elem>>`) and
//! `sum` (read-write), and workgroup `x: array<vec4<f32>, _>` (at least
//! `m * k / 4`) and `partial: array<vec4<f32>, WG>`.

/// Fills `x` with the rows times the norm weight (row `r` from vec4
/// `r * k / 4`) and `partial` with each invocation's sums of squares (row
/// `r` in component `r`); workgroup `g` 0 also stores the sum `a + b`, the
/// one copy later ops read. Ends with a barrier, so `x` is ready.
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
        x[j] = v * vec4<f32>(norm_w[j % x_row]);
        sq += select(vec4<f32>(), vec4<f32>(dot(v, v)), vec4<u32>(r) == vec4<u32>(0u, 1u, 2u, 3u));
    }
    partial[lid] = sq;
    workgroupBarrier();
}

/// Each row's `rstd` (row `r` in component `r`), from the sums of squares
/// [`rms_prologue`] left in `partial`. Every invocation calls it, in
/// uniform control flow, after its last read of `x`; it ends with a
/// barrier, after which `partial` (and `x`) may be written again.
fn rms_scale(lid: u32) -> vec4<f32> {
    for (var st = WG / 2u; st > 0u; st /= 2u) {
        if lid < st {
            partial[lid] += partial[lid + st];
        }
        workgroupBarrier();
    }
    let rstd = inverseSqrt(partial[0] / f32(p.k) + p.norm_eps);
    workgroupBarrier();
    return rstd;
}
