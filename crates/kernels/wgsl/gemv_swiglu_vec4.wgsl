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

@compute @workgroup_size(WG)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let lanes = WG / p.cols;
    let lane = lid % lanes;
    let c = lid / lanes;
    let col = (wid.y * groups.x + wid.x) * p.cols + c;
    let k4 = p.k / 4u;
    var acc_g = vec4<f32>();
    var acc_u = vec4<f32>();
    if col < p.n {
        let row = col * k4;
        var j = lane;
        // Whole steps of two words a row: the four loads first.
        for (; j + lanes < k4; j += 2u * lanes) {
            let g0 = vec4<f32>(w_gate[row + j]);
            let g1 = vec4<f32>(w_gate[row + j + lanes]);
            let u0 = vec4<f32>(w_up[row + j]);
            let u1 = vec4<f32>(w_up[row + j + lanes]);
            for (var r = 0u; r < p.m; r++) {
                let x0 = vec4<f32>(x[r * k4 + j]);
                let x1 = vec4<f32>(x[r * k4 + j + lanes]);
                acc_g[r] += dot(x0, g0) + dot(x1, g1);
                acc_u[r] += dot(x0, u0) + dot(x1, u1);
            }
        }
        if j < k4 {
            let g0 = vec4<f32>(w_gate[row + j]);
            let u0 = vec4<f32>(w_up[row + j]);
            for (var r = 0u; r < p.m; r++) {
                let x0 = vec4<f32>(x[r * k4 + j]);
                acc_g[r] += dot(x0, g0);
                acc_u[r] += dot(x0, u0);
            }
        }
    }
    partial[lid] = acc_g;
    partial[WG + lid] = acc_u;
    workgroupBarrier();
    for (var stride = lanes / 2u; stride > 0u; stride /= 2u) {
        if lane < stride {
            partial[lid] += partial[lid + stride];
            partial[WG + lid] += partial[WG + lid + stride];
        }
        workgroupBarrier();
    }
    if lane == 0u && col < p.n {
        var bg = 0.0;
        var bu = 0.0;
        if (p.has_bias & 1u) != 0u {
            bg = f32(b_gate[col]);
        }
        if (p.has_bias & 2u) != 0u {
            bu = f32(b_up[col]);
        }
        let sg = partial[lid];
        let su = partial[WG + lid];
        for (var r = 0u; r < p.m; r++) {
            let g = sg[r] + bg;
            let u = su[r] + bu;
            out[r * p.n + col] = Elem(g * (1.0 / (1.0 + exp(-g))) * u);
        }
    }
}
