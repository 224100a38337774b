//! Decode route of the fused `etwgpu.linear_q4gsw_qkv` (at most `MAX_ROWS`
//! rows of x): the three 4-bit linears of one input (Q, K, V) in one
//! dispatch, `out_j[m, n] = sum_k x[m, k] * (nibble_j(n, k) - 8) *
//! scales_j[k / group, n]`.
//!
//! Each workgroup belongs to one projection (the host gives projection j
//! the workgroups from `first[j]` to `first[j + 1]`), and computes its
//! columns exactly as `q4_gemv.wgsl` does with that projection's own
//! `lanes[j]`: the same loads, the same order of sums, so the outputs are
//! bit for bit those of three `q4_gemv.wgsl` dispatches. The small K and V
//! projections then run beside Q instead of after it.
// variants: f32 f16

alias Elem = f32;

/// Invocations per workgroup.
const WG: u32 = 256u;
/// Output columns per invocation.
const COLS: u32 = 4u;
/// Most rows of x (the host routes larger M elsewhere).
const MAX_ROWS: u32 = 4u;

struct Params {
    /// Rows of x.
    m: u32,
    /// Input features (a multiple of 32).
    k: u32,
    /// Inputs per scale group (a multiple of 32).
    group_size: u32,
    _pad0: u32,
    /// Output features of each projection.
    n: vec4<u32>,
    /// Row length of each projection's scales.
    n_pad: vec4<u32>,
    /// Invocations that split one column's K, per projection: powers of
    /// two, at most `WG`.
    lanes: vec4<u32>,
    /// First workgroup of each projection; `first[3]` is the grid's size.
    first: vec4<u32>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<Elem>>;
@group(0) @binding(2) var<storage, read> weights0: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> scales0: array<Elem>;
@group(0) @binding(4) var<storage, read> weights1: array<vec4<u32>>;
@group(0) @binding(5) var<storage, read> scales1: array<Elem>;
@group(0) @binding(6) var<storage, read> weights2: array<vec4<u32>>;
@group(0) @binding(7) var<storage, read> scales2: array<Elem>;
@group(0) @binding(8) var<storage, read_write> out0: array<Elem>;
@group(0) @binding(9) var<storage, read_write> out1: array<Elem>;
@group(0) @binding(10) var<storage, read_write> out2: array<Elem>;

var<workgroup> partial: array<vec4<f32>, WG>;

/// Nibbles `4i .. 4i + 4` of `word`, as signed weights.
fn low4(word: u32) -> vec4<f32> {
    return vec4<f32>(vec4<u32>(word, word >> 4u, word >> 8u, word >> 12u) & vec4<u32>(15u)) - 8.0;
}

/// Four inputs of x dotted with the four nibbles from bit `shift` of each
/// column's `u32`.
fn plane(xv: vec4<f32>, a: u32, b: u32, c: u32, d: u32, shift: u32) -> vec4<f32> {
    return vec4<f32>(
        dot(xv, low4(a >> shift)),
        dot(xv, low4(b >> shift)),
        dot(xv, low4(c >> shift)),
        dot(xv, low4(d >> shift)),
    );
}

/// The 16-byte words of four columns (32 nibbles each) dotted with the 32
/// inputs of x from vec4 `b`. No private arrays: everything stays in
/// registers.
fn dots(q0: vec4<u32>, q1: vec4<u32>, q2: vec4<u32>, q3: vec4<u32>, b: u32) -> vec4<f32> {
    var d = plane(vec4<f32>(x[b]), q0.x, q1.x, q2.x, q3.x, 0u);
    d += plane(vec4<f32>(x[b + 1u]), q0.x, q1.x, q2.x, q3.x, 16u);
    d += plane(vec4<f32>(x[b + 2u]), q0.y, q1.y, q2.y, q3.y, 0u);
    d += plane(vec4<f32>(x[b + 3u]), q0.y, q1.y, q2.y, q3.y, 16u);
    d += plane(vec4<f32>(x[b + 4u]), q0.z, q1.z, q2.z, q3.z, 0u);
    d += plane(vec4<f32>(x[b + 5u]), q0.z, q1.z, q2.z, q3.z, 16u);
    d += plane(vec4<f32>(x[b + 6u]), q0.w, q1.w, q2.w, q3.w, 0u);
    d += plane(vec4<f32>(x[b + 7u]), q0.w, q1.w, q2.w, q3.w, 16u);
    return d;
}

/// `v` summed over the `lanes` lanes of each slot (a tree in workgroup
/// memory); every invocation gets its slot's sum when `lane == 0`. Call in
/// uniform control flow.
fn reduce(v: vec4<f32>, lid: u32, lane: u32, lanes: u32) -> vec4<f32> {
    partial[lid] = v;
    workgroupBarrier();
    for (var stride = lanes / 2u; stride > 0u; stride /= 2u) {
        if lane < stride {
            partial[lid] += partial[lid + stride];
        }
        workgroupBarrier();
    }
    let sum = partial[lid];
    workgroupBarrier();
    return sum;
}

/// Stores row `r` of projection `j`'s columns from `col0` (lane 0 of each
/// slot).
fn emit(r: u32, v: vec4<f32>, col0: u32, lane: u32, j: u32, n: u32) {
    if lane == 0u {
        for (var c = 0u; c < COLS; c++) {
            if col0 + c < n {
                store(j, r * n + col0 + c, v[c]);
            }
        }
    }
}

/// Word `idx` of projection `j`'s weights.
fn word(j: u32, idx: u32) -> vec4<u32> {
    switch j {
        case 0u: { return weights0[idx]; }
        case 1u: { return weights1[idx]; }
        default: { return weights2[idx]; }
    }
}

/// Scale `idx` of projection `j`.
fn scale(j: u32, idx: u32) -> f32 {
    switch j {
        case 0u: { return f32(scales0[idx]); }
        case 1u: { return f32(scales1[idx]); }
        default: { return f32(scales2[idx]); }
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
    let n = p.n[j];
    let n_pad = p.n_pad[j];
    let lanes = p.lanes[j];
    let lane = lid & (lanes - 1u);
    let slot = lid / lanes;
    let col0 = ((wg - p.first[j]) * (WG / lanes) + slot) * COLS;
    let words = p.k / 32u;
    let x_row = p.k / 4u;
    var acc0 = vec4<f32>();
    var acc1 = vec4<f32>();
    var acc2 = vec4<f32>();
    var acc3 = vec4<f32>();
    if col0 < n {
        let last = n - 1u;
        let c1 = min(col0 + 1u, last);
        let c2 = min(col0 + 2u, last);
        let c3 = min(col0 + 3u, last);
        for (var w = lane; w < words; w += lanes) {
            let q0 = word(j, col0 * words + w);
            let q1 = word(j, c1 * words + w);
            let q2 = word(j, c2 * words + w);
            let q3 = word(j, c3 * words + w);
            let at = (w * 32u / p.group_size) * n_pad;
            let s = vec4<f32>(scale(j, at + col0), scale(j, at + c1), scale(j, at + c2), scale(j, at + c3));
            let b = w * 8u;
            acc0 += dots(q0, q1, q2, q3, b) * s;
            if p.m > 1u {
                acc1 += dots(q0, q1, q2, q3, x_row + b) * s;
            }
            if p.m > 2u {
                acc2 += dots(q0, q1, q2, q3, 2u * x_row + b) * s;
            }
            if p.m > 3u {
                acc3 += dots(q0, q1, q2, q3, 3u * x_row + b) * s;
            }
        }
    }
    // Rows one at a time (the conditions are uniform), so that the
    // workgroup memory stays small.
    emit(0u, reduce(acc0, lid, lane, lanes), col0, lane, j, n);
    if p.m > 1u {
        emit(1u, reduce(acc1, lid, lane, lanes), col0, lane, j, n);
    }
    if p.m > 2u {
        emit(2u, reduce(acc2, lid, lane, lanes), col0, lane, j, n);
    }
    if p.m > 3u {
        emit(3u, reduce(acc3, lid, lane, lanes), col0, lane, j, n);
    }
}
