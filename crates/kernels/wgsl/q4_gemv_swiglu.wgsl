//! Decode route of the fused `etwgpu.linear_q4gsw_swiglu` (at most
//! `MAX_ROWS` rows of x): with `g` and `u` the 4-bit linears of the gate
//! and up weights (as `q4_gemv.wgsl` computes them),
//! `out[m, n] = g * sigmoid(g) * u`.
//!
//! The work split is `q4_gemv.wgsl`'s: an invocation owns `COLS` adjacent
//! columns and one of `lanes` slices of K (picked by the host), loads one
//! 16-byte word of each column of both weights and their scales before
//! using any (2 * `COLS` words in flight), reads x once for all of them and
//! accumulates in f32; each weight byte is read once. Lanes meet in a
//! workgroup-memory tree reduction. Columns past N read the last column and
//! are not stored.
// variants: f32 f16

alias Elem = f32;

/// Invocations per workgroup.
const WG: u32 = 256u;
/// Output columns per invocation.
const COLS: u32 = 4u;
/// Most rows of x (the host routes larger M to `q4_gemm.wgsl`).
const MAX_ROWS: u32 = 4u;

struct Params {
    /// Rows of x.
    m: u32,
    /// Output features.
    n: u32,
    /// Input features (a multiple of 32).
    k: u32,
    /// Row length of the scales: N padded.
    n_pad: u32,
    /// Inputs per scale group (a multiple of 32).
    group_size: u32,
    _pad0: u32,
    /// Invocations that split one column's K: a power of two, at most `WG`.
    lanes: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<Elem>>;
@group(0) @binding(2) var<storage, read> w_gate: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> s_gate: array<Elem>;
@group(0) @binding(4) var<storage, read> w_up: array<vec4<u32>>;
@group(0) @binding(5) var<storage, read> s_up: array<Elem>;
@group(0) @binding(6) var<storage, read_write> out: array<Elem>;

var<workgroup> partial: array<vec4<f32>, WG>;
var<workgroup> partial_up: array<vec4<f32>, WG>;

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

/// `v` and `u` summed over the `lanes` lanes of each slot (trees in
/// workgroup memory), stored as `silu(v) * u` for row `r` by lane 0 of each
/// slot. Call in uniform control flow.
fn finish(r: u32, v: vec4<f32>, u: vec4<f32>, col0: u32, lid: u32, lane: u32, lanes: u32) {
    partial[lid] = v;
    partial_up[lid] = u;
    workgroupBarrier();
    for (var stride = lanes / 2u; stride > 0u; stride /= 2u) {
        if lane < stride {
            partial[lid] += partial[lid + stride];
            partial_up[lid] += partial_up[lid + stride];
        }
        workgroupBarrier();
    }
    if lane == 0u {
        let g = partial[lid];
        let up = partial_up[lid];
        for (var c = 0u; c < COLS; c++) {
            if col0 + c < p.n {
                out[r * p.n + col0 + c] = Elem(g[c] / (1.0 + exp(-g[c])) * up[c]);
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
    let words = p.k / 32u;
    let x_row = p.k / 4u;
    var g0 = vec4<f32>();
    var g1 = vec4<f32>();
    var g2 = vec4<f32>();
    var g3 = vec4<f32>();
    var u0 = vec4<f32>();
    var u1 = vec4<f32>();
    var u2 = vec4<f32>();
    var u3 = vec4<f32>();
    if col0 < p.n {
        let last = p.n - 1u;
        let c1 = min(col0 + 1u, last);
        let c2 = min(col0 + 2u, last);
        let c3 = min(col0 + 3u, last);
        for (var w = lane; w < words; w += lanes) {
            let qg0 = w_gate[col0 * words + w];
            let qg1 = w_gate[c1 * words + w];
            let qg2 = w_gate[c2 * words + w];
            let qg3 = w_gate[c3 * words + w];
            let qu0 = w_up[col0 * words + w];
            let qu1 = w_up[c1 * words + w];
            let qu2 = w_up[c2 * words + w];
            let qu3 = w_up[c3 * words + w];
            let at = (w * 32u / p.group_size) * p.n_pad;
            let sg = vec4<f32>(f32(s_gate[at + col0]), f32(s_gate[at + c1]), f32(s_gate[at + c2]), f32(s_gate[at + c3]));
            let su = vec4<f32>(f32(s_up[at + col0]), f32(s_up[at + c1]), f32(s_up[at + c2]), f32(s_up[at + c3]));
            let b = w * 8u;
            g0 += dots(qg0, qg1, qg2, qg3, b) * sg;
            u0 += dots(qu0, qu1, qu2, qu3, b) * su;
            if p.m > 1u {
                g1 += dots(qg0, qg1, qg2, qg3, x_row + b) * sg;
                u1 += dots(qu0, qu1, qu2, qu3, x_row + b) * su;
            }
            if p.m > 2u {
                g2 += dots(qg0, qg1, qg2, qg3, 2u * x_row + b) * sg;
                u2 += dots(qu0, qu1, qu2, qu3, 2u * x_row + b) * su;
            }
            if p.m > 3u {
                g3 += dots(qg0, qg1, qg2, qg3, 3u * x_row + b) * sg;
                u3 += dots(qu0, qu1, qu2, qu3, 3u * x_row + b) * su;
            }
        }
    }
    // Rows one at a time (the conditions are uniform), so that the
    // workgroup memory stays small.
    finish(0u, g0, u0, col0, lid, lane, lanes);
    if p.m > 1u {
        finish(1u, g1, u1, col0, lid, lane, lanes);
    }
    if p.m > 2u {
        finish(2u, g2, u2, col0, lid, lane, lanes);
    }
    if p.m > 3u {
        finish(3u, g3, u3, col0, lid, lane, lanes);
    }
}
