//! Three linears of one input in one dispatch, matrix-vector route for
//! few rows (`etwgpu.linear_qkv` at decode): `out_j[m, n] = sum_k x[m, k]
//! * w_j[n, k] + b_j[n]` for j = 0, 1, 2 (Q, K, V).
//!
//! Each workgroup belongs to one projection (the host gives projection j
//! the workgroups from `first[j]` to `first[j + 1]`) and computes its
//! columns as `linear_gemv.wgsl` does, with that projection's own
//! `lanes[j]`: 4 columns per invocation, their `vec4`s loaded before use,
//! f32 accumulation, a workgroup-memory tree reduction per row. The host
//! routes here only when K is a multiple of 4. Columns past N read the
//! last column and are not stored.
// variants: f32 f16

alias Elem = f32;

/// Invocations per workgroup.
const WG: u32 = 256u;
/// Output columns per invocation.
const COLS: u32 = 4u;
/// Most rows of x.
const MAX_ROWS: u32 = 4u;

struct Params {
    m: u32,
    /// Input features (a multiple of 4).
    k: u32,
    /// Output features of each projection.
    n0: u32,
    n1: u32,
    n2: u32,
    /// Bit j set: projection j has a bias.
    has_bias: u32,
    _pad0: u32,
    _pad1: u32,
    /// Invocations that split one column's K, per projection: powers of
    /// two, at most `WG`.
    lanes: vec4<u32>,
    /// First workgroup of each projection; `first[3]` is the grid's size.
    first: vec4<u32>,
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

var<workgroup> partial: array<vec4<f32>, WG>;

fn weight(j: u32, idx: u32) -> vec4<f32> {
    switch j {
        case 0u: { return vec4<f32>(w0[idx]); }
        case 1u: { return vec4<f32>(w1[idx]); }
        default: { return vec4<f32>(w2[idx]); }
    }
}

fn bias(j: u32, n: u32) -> f32 {
    if (p.has_bias & (1u << j)) == 0u {
        return 0.0;
    }
    switch j {
        case 0u: { return f32(b0[n]); }
        case 1u: { return f32(b1[n]); }
        default: { return f32(b2[n]); }
    }
}

fn store(j: u32, idx: u32, v: f32) {
    switch j {
        case 0u: { out0[idx] = Elem(v); }
        case 1u: { out1[idx] = Elem(v); }
        default: { out2[idx] = Elem(v); }
    }
}

@compute @workgroup_size(WG)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let wg = wid.y * groups.x + wid.x;
    // Workgroup-uniform: either every invocation of a group returns or none.
    if wg >= p.first[3] {
        return;
    }
    var j = 0u;
    if wg >= p.first[2] {
        j = 2u;
    } else if wg >= p.first[1] {
        j = 1u;
    }
    let n = array<u32, 3>(p.n0, p.n1, p.n2)[j];
    let lanes = p.lanes[j];
    let lane = lid & (lanes - 1u);
    let slot = lid / lanes;
    let col0 = ((wg - p.first[j]) * (WG / lanes) + slot) * COLS;
    let k4 = p.k / 4u;
    var acc = array<vec4<f32>, MAX_ROWS>();
    if col0 < n {
        let last = n - 1u;
        let c1 = min(col0 + 1u, last);
        let c2 = min(col0 + 2u, last);
        let c3 = min(col0 + 3u, last);
        for (var i = lane; i < k4; i += lanes) {
            let v0 = weight(j, col0 * k4 + i);
            let v1 = weight(j, c1 * k4 + i);
            let v2 = weight(j, c2 * k4 + i);
            let v3 = weight(j, c3 * k4 + i);
            for (var r = 0u; r < MAX_ROWS; r++) {
                if r < p.m {
                    let xv = vec4<f32>(x[r * k4 + i]);
                    acc[r] += vec4<f32>(dot(xv, v0), dot(xv, v1), dot(xv, v2), dot(xv, v3));
                }
            }
        }
    }
    // One row at a time (the condition is uniform), so that the workgroup
    // memory stays small.
    for (var r = 0u; r < MAX_ROWS; r++) {
        if r < p.m {
            partial[lid] = acc[r];
            workgroupBarrier();
            for (var stride = lanes / 2u; stride > 0u; stride /= 2u) {
                if lane < stride {
                    partial[lid] += partial[lid + stride];
                }
                workgroupBarrier();
            }
            if lane == 0u && col0 < n {
                let v = partial[lid];
                for (var c = 0u; c < COLS; c++) {
                    let col = col0 + c;
                    if col < n {
                        store(j, r * n + col, v[c] + bias(j, col));
                    }
                }
            }
            workgroupBarrier();
        }
    }
}
