//! Decode route of a dense `linear` (weight `[N, K]`, K contiguous; at most
//! `MAX_ROWS` rows of x): `out[m, n] = sum_k x[m, k] * w[n, k] + bias[n]`.
//!
//! Bandwidth-bound, with `q4_gemv.wgsl`'s work split: an invocation owns
//! `COLS` adjacent output columns and one of `lanes` slices of K (a power
//! of two the host picks from N and K); per step it loads one `vec4` of each
//! of its columns' weight rows before using any (adjacent lanes, adjacent
//! words: coalesced), reads x once for all of them and accumulates in f32.
//! Lanes meet in a workgroup-memory tree reduction. The host routes here
//! only when K is a multiple of 4. Columns past N read the last column and
//! are not stored.
// variants: f32 f16

alias Elem = f32;

/// Invocations per workgroup.
const WG: u32 = 256u;
/// Output columns per invocation.
const COLS: u32 = 4u;
/// Most rows of x.
const MAX_ROWS: u32 = 4u;

struct Params {
    /// Rows of x.
    m: u32,
    /// Output features.
    n: u32,
    /// Input features (a multiple of 4).
    k: u32,
    has_bias: u32,
    /// Invocations that split one column's K: a power of two, at most `WG`.
    lanes: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<Elem>>;
@group(0) @binding(2) var<storage, read> w: array<vec4<Elem>>;
@group(0) @binding(3) var<storage, read> bias: array<Elem>;
@group(0) @binding(4) var<storage, read_write> out: array<Elem>;

var<workgroup> partial: array<vec4<f32>, WG>;

/// `xv` dotted with four columns' `vec4`s.
fn dots4(xv: vec4<f32>, a: vec4<f32>, b: vec4<f32>, c: vec4<f32>, d: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(dot(xv, a), dot(xv, b), dot(xv, c), dot(xv, d));
}

/// `v` summed over the `lanes` lanes of each slot (a tree in workgroup
/// memory), stored with the bias as row `r` by lane 0 of each slot. Call
/// in uniform control flow.
fn finish(r: u32, v: vec4<f32>, col0: u32, lid: u32, lane: u32, lanes: u32) {
    partial[lid] = v;
    workgroupBarrier();
    for (var stride = lanes / 2u; stride > 0u; stride /= 2u) {
        if lane < stride {
            partial[lid] += partial[lid + stride];
        }
        workgroupBarrier();
    }
    if lane == 0u {
        let sum = partial[lid];
        for (var c = 0u; c < COLS; c++) {
            let col = col0 + c;
            if col < p.n {
                var y = sum[c];
                if p.has_bias != 0u {
                    y += f32(bias[col]);
                }
                out[r * p.n + col] = Elem(y);
            }
        }
    }
    workgroupBarrier();
}

@compute @workgroup_size(WG)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let lanes = p.lanes;
    let lane = lid & (lanes - 1u);
    let slot = lid / lanes;
    let col0 = ((wid.y * groups.x + wid.x) * (WG / lanes) + slot) * COLS;
    let k4 = p.k / 4u;
    var acc0 = vec4<f32>();
    var acc1 = vec4<f32>();
    var acc2 = vec4<f32>();
    var acc3 = vec4<f32>();
    if col0 < p.n {
        let last = p.n - 1u;
        let c1 = min(col0 + 1u, last);
        let c2 = min(col0 + 2u, last);
        let c3 = min(col0 + 3u, last);
        for (var j = lane; j < k4; j += lanes) {
            let w0 = vec4<f32>(w[col0 * k4 + j]);
            let w1 = vec4<f32>(w[c1 * k4 + j]);
            let w2 = vec4<f32>(w[c2 * k4 + j]);
            let w3 = vec4<f32>(w[c3 * k4 + j]);
            acc0 += dots4(vec4<f32>(x[j]), w0, w1, w2, w3);
            if p.m > 1u {
                acc1 += dots4(vec4<f32>(x[k4 + j]), w0, w1, w2, w3);
            }
            if p.m > 2u {
                acc2 += dots4(vec4<f32>(x[2u * k4 + j]), w0, w1, w2, w3);
            }
            if p.m > 3u {
                acc3 += dots4(vec4<f32>(x[3u * k4 + j]), w0, w1, w2, w3);
            }
        }
    }
    // Rows one at a time (the conditions are uniform), so that the
    // workgroup memory stays small.
    finish(0u, acc0, col0, lid, lane, lanes);
    if p.m > 1u {
        finish(1u, acc1, col0, lid, lane, lanes);
    }
    if p.m > 2u {
        finish(2u, acc2, col0, lid, lane, lanes);
    }
    if p.m > 3u {
        finish(3u, acc3, col0, lid, lane, lanes);
    }
}
