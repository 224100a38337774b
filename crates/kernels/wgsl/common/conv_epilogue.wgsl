//! The convolutions' epilogue once the bias is in the sum: the optional
//! output clamp, then the activation. The direct kernel (`conv.wgsl`), the
//! implicit GEMMs (`store_out` of `conv_patch.wgsl`) and the split-K
//! combine (`conv_gemm_combine.wgsl`) end with it. The including source's
//! uniforms `p` have `has_min`, `has_max`, `out_min`, `out_max`, `act`,
//! `act_p0` and `act_p1`, and it includes `act.wgsl`.

/// `sum` clamped to `[out_min, out_max]` where those bounds are on, then
/// through the activation `p.act`.
fn clamp_act(sum: f32) -> f32 {
    var v = sum;
    if p.has_min != 0u {
        v = max(v, p.out_min);
    }
    if p.has_max != 0u {
        v = min(v, p.out_max);
    }
    return act(p.act, v, p.act_p0, p.act_p1);
}
