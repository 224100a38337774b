//! Three linears of one input in one dispatch, matrix-vector route for
//! few rows (`etwgpu.linear_qkv` at decode, K a multiple of 4):
//! `out_j[m, n] = sum_k x[m, k] * w_j[n, k] + b_j[n]` for j = 0, 1, 2 (Q,
//! K, V).
//!
//! Streams the weights as `linear_gemv.wgsl` does: the three projections'
//! output columns taken in order (`N0 + N1 + N2`), a workgroup computes
//! `p.cols` of them with `WG / p.cols` invocations each; a lane reads `vec4`s of
//! its column's weight row (adjacent lanes, adjacent words: coalesced),
//! four loaded before any is used, and dots them with x for every row; the
//! lanes' partial sums meet in shared memory. A column's lanes all read
//! one projection. `gemv_qkv.wgsl` (one workgroup an output element, one
//! scalar load in flight an invocation) takes the other K. f32 math.
// variants: f32 f16

alias Elem = f32;

// include: gemv_lanes.wgsl

struct Params {
    m: u32,
    /// Input features (a multiple of 4).
    k: u32,
    n0: u32,
    n1: u32,
    n2: u32,
    /// Bit j set: projection j has a bias.
    has_bias: u32,
    /// Output columns a workgroup (8, 4 or 2).
    cols: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<Elem>>;
@group(0) @binding(2) var<storage, read> w0: array<vec4<Elem>>;
@group(0) @binding(3) var<storage, read> w1: array<vec4<Elem>>;
@group(0) @binding(4) var<storage, read> w2: array<vec4<Elem>>;
@group(0) @binding(5) var<storage, read> b0: array<Elem>;
@group(0) @binding(6) var<storage, read> b1: array<Elem>;
@group(0) @binding(7) var<storage, read> b2: array<Elem>;
@group(0) @binding(8) var<storage, read_write> out0: array<Elem>;
@group(0) @binding(9) var<storage, read_write> out1: array<Elem>;
@group(0) @binding(10) var<storage, read_write> out2: array<Elem>;

/// Per invocation, its sums for the four rows.
var<workgroup> partial: array<vec4<f32>, WG>;

// include: qkv_out.wgsl

/// Nothing before the loop: x is read from storage.
fn prologue(lid: u32, g: u32) {}

fn x_at(i: u32) -> vec4<f32> {
    return vec4<f32>(x[i]);
}

fn row_scale(lid: u32) -> vec4<f32> {
    return vec4<f32>(1.0);
}

// include: gemv_qkv_vec4_body.wgsl
