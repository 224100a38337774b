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

fn high4(word: u32) -> vec4<f32> {
    return low4(word >> 16u);
}

/// The 16-byte word `q` (32 nibbles) dotted with the 32 inputs `xs`.
fn dot32(q: vec4<u32>, xs: array<vec4<f32>, 8>) -> f32 {
    var d = dot(xs[0], low4(q.x)) + dot(xs[1], high4(q.x));
    d += dot(xs[2], low4(q.y)) + dot(xs[3], high4(q.y));
    d += dot(xs[4], low4(q.z)) + dot(xs[5], high4(q.z));
    d += dot(xs[6], low4(q.w)) + dot(xs[7], high4(q.w));
    return d;
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
    var acc = array<vec4<f32>, MAX_ROWS>();
    var acc_up = array<vec4<f32>, MAX_ROWS>();
    if col0 < p.n {
        let last = p.n - 1u;
        let c1 = min(col0 + 1u, last);
        let c2 = min(col0 + 2u, last);
        let c3 = min(col0 + 3u, last);
        for (var w = lane; w < words; w += lanes) {
            let g0 = w_gate[col0 * words + w];
            let g1 = w_gate[c1 * words + w];
            let g2 = w_gate[c2 * words + w];
            let g3 = w_gate[c3 * words + w];
            let u0 = w_up[col0 * words + w];
            let u1 = w_up[c1 * words + w];
            let u2 = w_up[c2 * words + w];
            let u3 = w_up[c3 * words + w];
            let at = (w * 32u / p.group_size) * p.n_pad;
            let sg = vec4<f32>(f32(s_gate[at + col0]), f32(s_gate[at + c1]), f32(s_gate[at + c2]), f32(s_gate[at + c3]));
            let su = vec4<f32>(f32(s_up[at + col0]), f32(s_up[at + c1]), f32(s_up[at + c2]), f32(s_up[at + c3]));
            for (var r = 0u; r < MAX_ROWS; r++) {
                if r < p.m {
                    let b = r * x_row + w * 8u;
                    var xs: array<vec4<f32>, 8>;
                    for (var i = 0u; i < 8u; i++) {
                        xs[i] = vec4<f32>(x[b + i]);
                    }
                    acc[r] += vec4<f32>(dot32(g0, xs), dot32(g1, xs), dot32(g2, xs), dot32(g3, xs)) * sg;
                    acc_up[r] += vec4<f32>(dot32(u0, xs), dot32(u1, xs), dot32(u2, xs), dot32(u3, xs)) * su;
                }
            }
        }
    }
    // One row at a time (the condition is uniform), so that the workgroup
    // memory stays small.
    for (var r = 0u; r < MAX_ROWS; r++) {
        if r < p.m {
            partial[lid] = acc[r];
            partial_up[lid] = acc_up[r];
            workgroupBarrier();
            for (var stride = lanes / 2u; stride > 0u; stride /= 2u) {
                if lane < stride {
                    partial[lid] += partial[lid + stride];
                    partial_up[lid] += partial_up[lid + stride];
                }
                workgroupBarrier();
            }
            if lane == 0u && col0 < p.n {
                let g = partial[lid];
                let u = partial_up[lid];
                for (var c = 0u; c < COLS; c++) {
                    if col0 + c < p.n {
                        out[r * p.n + col0 + c] = Elem(g[c] / (1.0 + exp(-g[c])) * u[c]);
                    }
                }
            }
            workgroupBarrier();
        }
    }
}
