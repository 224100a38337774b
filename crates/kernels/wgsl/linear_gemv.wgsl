//! Decode route of a dense `linear` (weight `[N, K]`, K contiguous; at most
//! `MAX_ROWS` rows of x): `out[m, n] = sum_k x[m, k] * w[n, k] + bias[n]`.
//!
//! Bandwidth-bound like `q4_gemv.wgsl`: a workgroup computes `p.cols`
//! output columns with `WG / p.cols` invocations each; a lane reads `vec4`s of its
//! column's weight row (adjacent lanes, adjacent words: coalesced), `UNROLL`
//! of them loaded before any is used, so each lane keeps that many loads in
//! flight (with one, a lane waited out a memory round trip per `vec4`), and
//! dots them with x for every row; the lanes' partial sums meet in shared
//! memory. The host routes here only when K is a multiple of 4. f32 math.
// variants: f32 f16

alias Elem = f32;

// include: gemv_lanes.wgsl
/// `vec4`s of the weight row a lane loads before using them.
const UNROLL: u32 = 4u;

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

var<workgroup> partial: array<f32, MAX_ROWS * WG>;

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
    var acc = array<f32, MAX_ROWS>(0.0, 0.0, 0.0, 0.0);
    if col < p.n {
        let row = col * k4;
        var j = lane;
        // Whole steps of `UNROLL * lanes` words: the loads first.
        for (; j + (UNROLL - 1u) * lanes < k4; j += UNROLL * lanes) {
            let w0 = vec4<f32>(w[row + j]);
            let w1 = vec4<f32>(w[row + j + lanes]);
            let w2 = vec4<f32>(w[row + j + 2u * lanes]);
            let w3 = vec4<f32>(w[row + j + 3u * lanes]);
            for (var r = 0u; r < p.m; r++) {
                let xr = r * k4 + j;
                acc[r] += dot(vec4<f32>(x[xr]), w0) + dot(vec4<f32>(x[xr + lanes]), w1)
                    + dot(vec4<f32>(x[xr + 2u * lanes]), w2) + dot(vec4<f32>(x[xr + 3u * lanes]), w3);
            }
        }
        // The rest, one word at a time.
        for (; j < k4; j += lanes) {
            let wv = vec4<f32>(w[row + j]);
            for (var r = 0u; r < p.m; r++) {
                acc[r] += dot(vec4<f32>(x[r * k4 + j]), wv);
            }
        }
    }
    for (var r = 0u; r < MAX_ROWS; r++) {
        partial[r * WG + lid] = acc[r];
    }
    workgroupBarrier();
    for (var stride = lanes / 2u; stride > 0u; stride /= 2u) {
        if lane < stride {
            for (var r = 0u; r < MAX_ROWS; r++) {
                partial[r * WG + lid] += partial[r * WG + lid + stride];
            }
        }
        workgroupBarrier();
    }
    if lane == 0u && col < p.n {
        for (var r = 0u; r < p.m; r++) {
            var v = partial[r * WG + lid];
            if p.has_bias != 0u {
                v += f32(bias[col]);
            }
            out[r * p.n + col] = Elem(v);
        }
    }
}
