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

/// The normed row into `x` (`rms_prologue.wgsl`), then rounded to int8
/// per 32-input block (`q8_x.wgsl`).
fn prologue(lid: u32, g: u32) {
    rms_prologue(lid, g);
    round_x(lid, p.k);
}

/// Word `w`'s contribution to the one row's sum, in integers.
fn word_dot(acc: vec4<f32>, q: vec4<u32>, w: u32, s: f32) -> vec4<f32> {
    return acc + vec4<f32>(dot_i8(q, w) * s, 0.0, 0.0, 0.0);
}

// include: q4_gemv_swiglu_norm_body.wgsl
