//! Decode route of the fused `etwgpu.linear_q4gsw_swiglu` (at most
//! `MAX_ROWS` rows of x): with `g` and `u` the 4-bit linears of the gate
//! and up weights (as `q4_gemv.wgsl` computes them),
//! `out[m, n] = g * sigmoid(g) * u`.
//!
//! As `q4_gemv.wgsl`, with both weight rows of a column read by the same
//! lanes; each weight byte is read once. A workgroup computes
//! `COLS` output columns with `LANES` invocations each; a lane reads one
//! 16-byte word of its column's packed row at a time (32 nibbles: one scale
//! group, since the host routes here only when `group % 32 == 0` and
//! `K % 32 == 0`), dequantizes in registers, and dots it with x for every
//! row. The lanes of a column are adjacent, so their reads are coalesced;
//! their partial sums meet in shared memory. Accumulation is f32.
// variants: f32 f16

alias Elem = f32;

/// Invocations per column.
const LANES: u32 = 32u;
/// Columns per workgroup (`LANES * COLS` = 256 invocations).
const COLS: u32 = 8u;
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
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<Elem>>;
@group(0) @binding(2) var<storage, read> w_gate: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> s_gate: array<Elem>;
@group(0) @binding(4) var<storage, read> w_up: array<vec4<u32>>;
@group(0) @binding(5) var<storage, read> s_up: array<Elem>;
@group(0) @binding(6) var<storage, read_write> out: array<Elem>;

var<workgroup> partial: array<f32, 1024>;
var<workgroup> partial_up: array<f32, 1024>;

/// The 16-byte word `q` (32 nibbles) dotted with x from vec4 `b`.
fn dot32(q: vec4<u32>, b: u32) -> f32 {
    var d = dot(vec4<f32>(x[b]), low4(q.x)) + dot(vec4<f32>(x[b + 1u]), high4(q.x));
    d += dot(vec4<f32>(x[b + 2u]), low4(q.y)) + dot(vec4<f32>(x[b + 3u]), high4(q.y));
    d += dot(vec4<f32>(x[b + 4u]), low4(q.z)) + dot(vec4<f32>(x[b + 5u]), high4(q.z));
    d += dot(vec4<f32>(x[b + 6u]), low4(q.w)) + dot(vec4<f32>(x[b + 7u]), high4(q.w));
    return d;
}

/// Nibbles `4i .. 4i + 4` of `word`, as signed weights.
fn low4(word: u32) -> vec4<f32> {
    return vec4<f32>(vec4<u32>(word, word >> 4u, word >> 8u, word >> 12u) & vec4<u32>(15u)) - 8.0;
}

fn high4(word: u32) -> vec4<f32> {
    return low4(word >> 16u);
}

@compute @workgroup_size(256)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let lane = lid % LANES;
    let c = lid / LANES;
    let col = (wid.y * groups.x + wid.x) * COLS + c;
    let words = p.k / 32u;
    let x_row = p.k / 4u;
    var acc = array<f32, MAX_ROWS>(0.0, 0.0, 0.0, 0.0);
    var acc_up = array<f32, MAX_ROWS>(0.0, 0.0, 0.0, 0.0);
    if col < p.n {
        for (var w = lane; w < words; w += LANES) {
            let qg = w_gate[col * words + w];
            let qu = w_up[col * words + w];
            let at = (w * 32u / p.group_size) * p.n_pad + col;
            let sg = f32(s_gate[at]);
            let su = f32(s_up[at]);
            for (var r = 0u; r < p.m; r++) {
                let b = r * x_row + w * 8u;
                acc[r] += dot32(qg, b) * sg;
                acc_up[r] += dot32(qu, b) * su;
            }
        }
    }
    for (var r = 0u; r < MAX_ROWS; r++) {
        partial[r * 256u + lid] = acc[r];
        partial_up[r * 256u + lid] = acc_up[r];
    }
    workgroupBarrier();
    for (var stride = LANES / 2u; stride > 0u; stride /= 2u) {
        if lane < stride {
            for (var r = 0u; r < MAX_ROWS; r++) {
                partial[r * 256u + lid] += partial[r * 256u + lid + stride];
                partial_up[r * 256u + lid] += partial_up[r * 256u + lid + stride];
            }
        }
        workgroupBarrier();
    }
    if lane == 0u && col < p.n {
        for (var r = 0u; r < p.m; r++) {
            let g = partial[r * 256u + lid];
            out[r * p.n + col] = Elem(g / (1.0 + exp(-g)) * partial_up[r * 256u + lid]);
        }
    }
}
