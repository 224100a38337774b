//! SwiGLU of two linears of one input in one dispatch, matrix-vector
//! route for few rows (`etwgpu.linear_swiglu` at decode, K a multiple of
//! 4): with `g = x @ w_gate^T + b_gate` and `u = x @ w_up^T + b_up`,
//! `out[m, n] = g * sigmoid(g) * u`.
//!
//! Streams the weights as `linear_gemv.wgsl` does: a workgroup computes
//! `p.cols` output columns with `WG / p.cols` invocations each; a lane reads
//! `vec4`s of its column's gate and up rows (adjacent lanes, adjacent
//! words: coalesced), two of each loaded before any is used, and dots
//! them with x for every row; the lanes' partial sums meet in shared
//! memory. `gemv_swiglu.wgsl` (one workgroup an output element, one
//! scalar load in flight an invocation) takes the other K. f32 math.
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
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<Elem>>;
@group(0) @binding(2) var<storage, read> w_gate: array<vec4<Elem>>;
@group(0) @binding(3) var<storage, read> b_gate: array<Elem>;
@group(0) @binding(4) var<storage, read> w_up: array<vec4<Elem>>;
@group(0) @binding(5) var<storage, read> b_up: array<Elem>;
@group(0) @binding(6) var<storage, read_write> out: array<Elem>;

/// Per invocation, its gate (then up) sums for the four rows.
var<workgroup> partial: array<vec4<f32>, 2u * WG>;

/// Nothing before the loop: x is read from storage.
fn prologue(lid: u32, g: u32) {}

fn x_at(i: u32) -> vec4<f32> {
    return vec4<f32>(x[i]);
}

fn row_scale(lid: u32) -> vec4<f32> {
    return vec4<f32>(1.0);
}

/// The up sums after the gate's.
fn up_get(i: u32) -> vec4<f32> {
    return partial[WG + i];
}

fn up_set(i: u32, v: vec4<f32>) {
    partial[WG + i] = v;
}

// include: gemv_swiglu_vec4_body.wgsl
