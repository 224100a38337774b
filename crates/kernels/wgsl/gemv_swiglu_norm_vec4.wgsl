//! Decode route of `etwgpu.rms_norm_linear_swiglu` (float weights, at most
//! `MAX_ROWS` rows of x, K a multiple of 4): the RMS norm of `a + b` (or
//! of `a`) and the SwiGLU pair that reads it, one dispatch. Each
//! workgroup computes the normed rows itself into workgroup memory
//! (`rms_prologue.wgsl`) and workgroup 0 stores the residual sum; then,
//! as `gemv_swiglu_vec4.wgsl`, `out[m, n] = g * sigmoid(g) * u` with `g`
//! and `u` the gate's and up's linears of the normed rows (the norm's
//! scale applied to their sums once the loop is done). The up sums meet
//! in the workgroup memory of x once the loop is done with it (16 KiB of
//! workgroup memory in all).
//!
//! Bounds: `x` by `j < m * k / 4 <= XS` in the prologue and by
//! `r * k / 4 + j < m * k / 4` in the dots (`j < k / 4`, `r < m`), the
//! host taking this route only for `m * k <= Q4_GEMV_NORM_MAX_ELEMS = 4 *
//! XS` (`ops/fused/norm_linears.rs`) and `m <= MAX_ROWS`; the up sums
//! reuse `x` at `lid` and `lid + stride`, below `WG <= XS`.
// variants: f32 f16

alias Elem = f32;

// include: gemv_lanes.wgsl

struct Params {
    m: u32,
    n: u32,
    /// Input features (a multiple of 4).
    k: u32,
    /// Bit 0: the gate has a bias; bit 1: the up projection has one.
    has_bias: u32,
    /// Output columns a workgroup (8, 4 or 2).
    cols: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
    /// The norm's epsilon.
    norm_eps: f32,
    /// 1: normalize `a + b` and store it in `sum`; 0: normalize `a`.
    norm_add: u32,
    _pn0: u32,
    _pn1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<vec4<Elem>>;
@group(0) @binding(2) var<storage, read> b: array<vec4<Elem>>;
@group(0) @binding(3) var<storage, read> norm_w: array<vec4<Elem>>;
@group(0) @binding(4) var<storage, read> w_gate: array<vec4<Elem>>;
@group(0) @binding(5) var<storage, read> b_gate: array<Elem>;
@group(0) @binding(6) var<storage, read> w_up: array<vec4<Elem>>;
@group(0) @binding(7) var<storage, read> b_up: array<Elem>;
@group(0) @binding(8) var<storage, read_write> out: array<Elem>;
@group(0) @binding(9) var<storage, read_write> sum: array<vec4<Elem>>;

// include: rms_prologue.wgsl
// include: gemv_norm_hooks.wgsl

/// The up sums, in x's memory once the loop is done.
fn up_get(i: u32) -> vec4<f32> {
    return x[i];
}

fn up_set(i: u32, v: vec4<f32>) {
    x[i] = v;
}

// include: gemv_swiglu_vec4_body.wgsl
