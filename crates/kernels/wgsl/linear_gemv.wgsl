//! Decode route of a dense `linear` (weight `[N, K]`, K contiguous; at most
//! `MAX_ROWS` rows of x): `out[m, n] = sum_k x[m, k] * w[n, k] + bias[n]`.
//!
//! Bandwidth-bound like `q4_gemv.wgsl`: a workgroup computes `p.cols`
//! output columns with `WG / p.cols` invocations each; a lane reads `vec4`s of its
//! column's weight row (adjacent lanes, adjacent words: coalesced), four
//! of them loaded before any is used, so each lane keeps that many loads in
//! flight (with one, a lane waited out a memory round trip per `vec4`), and
//! dots them with x for every row; the lanes' partial sums meet in shared
//! memory. The host routes here only when K is a multiple of 4. f32 math.
// variants: f32 f16

alias Elem = f32;

// include: gemv_lanes.wgsl

struct Params {
    /// Rows of x.
    m: u32,
    /// Output features.
    n: u32,
    /// Input features (a multiple of 4).
    k: u32,
    has_bias: u32,
    /// Output columns a workgroup (8, 4 or 2).
    cols: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<Elem>>;
@group(0) @binding(2) var<storage, read> w: array<vec4<Elem>>;
@group(0) @binding(3) var<storage, read> bias: array<Elem>;
@group(0) @binding(4) var<storage, read_write> out: array<Elem>;

/// Per invocation, its sums for the four rows.
var<workgroup> partial: array<vec4<f32>, WG>;

/// Nothing before the loop: x is read from storage.
fn prologue(lid: u32) {}

fn x_at(i: u32) -> vec4<f32> {
    return vec4<f32>(x[i]);
}

// include: linear_gemv_body.wgsl
