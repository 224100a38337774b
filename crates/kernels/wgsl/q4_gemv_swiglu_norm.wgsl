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

/// The normed rows into `x` (`rms_prologue.wgsl`).
fn prologue(lid: u32, g: u32) {
    rms_prologue(lid, g);
}

/// Word `w`'s contribution to the (up to four) rows' sums.
fn word_dot(acc: vec4<f32>, q: vec4<u32>, w: u32, s: f32) -> vec4<f32> {
    return rows4(acc, q, w * 8u, p.k / 4u, p.m, s);
}

// include: q4_gemv_swiglu_norm_body.wgsl
