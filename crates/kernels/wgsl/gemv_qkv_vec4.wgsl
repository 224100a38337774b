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

/// Word `idx` of projection `j`'s weights.
fn word(j: u32, idx: u32) -> vec4<f32> {
    switch j {
        case 0u: { return vec4<f32>(w0[idx]); }
        case 1u: { return vec4<f32>(w1[idx]); }
        default: { return vec4<f32>(w2[idx]); }
    }
}

// include: qkv_out.wgsl

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
    let total = p.n0 + p.n1 + p.n2;
    // The projection of this column and its column there.
    var j = 0u;
    var n = p.n0;
    var at = col;
    if col >= p.n0 + p.n1 {
        j = 2u;
        n = p.n2;
        at = col - p.n0 - p.n1;
    } else if col >= p.n0 {
        j = 1u;
        n = p.n1;
        at = col - p.n0;
    }
    let k4 = p.k / 4u;
    var acc = vec4<f32>();
    if col < total {
        let row = at * k4;
        var i = lane;
        // Whole steps of four words: the loads first.
        for (; i + 3u * lanes < k4; i += 4u * lanes) {
            let v0 = word(j, row + i);
            let v1 = word(j, row + i + lanes);
            let v2 = word(j, row + i + 2u * lanes);
            let v3 = word(j, row + i + 3u * lanes);
            for (var r = 0u; r < p.m; r++) {
                let xr = r * k4 + i;
                acc[r] += dot(vec4<f32>(x[xr]), v0) + dot(vec4<f32>(x[xr + lanes]), v1)
                    + dot(vec4<f32>(x[xr + 2u * lanes]), v2) + dot(vec4<f32>(x[xr + 3u * lanes]), v3);
            }
        }
        // The rest, one word at a time.
        for (; i < k4; i += lanes) {
            let v = word(j, row + i);
            for (var r = 0u; r < p.m; r++) {
                acc[r] += dot(vec4<f32>(x[r * k4 + i]), v);
            }
        }
    }
    partial[lid] = acc;
    workgroupBarrier();
    for (var stride = lanes / 2u; stride > 0u; stride /= 2u) {
        if lane < stride {
            partial[lid] += partial[lid + stride];
        }
        workgroupBarrier();
    }
    if lane == 0u && col < total {
        let s = partial[lid];
        let b = bias(j, at);
        for (var r = 0u; r < p.m; r++) {
            store(j, r * n + at, s[r] + b);
        }
    }
}
