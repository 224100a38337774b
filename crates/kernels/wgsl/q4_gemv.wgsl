//! Decode route of `et_vk.linear_q4gsw` (at most `MAX_ROWS` rows of x):
//! `out[m, n] = sum_k x[m, k] * (nibble(n, k) - 8) * scales[k / group, n] + bias[n]`.
//!
//! Bandwidth-bound: each weight byte is read once. A workgroup computes
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
    /// Row length of the scales (and bias): N padded.
    n_pad: u32,
    /// Inputs per scale group (a multiple of 32).
    group_size: u32,
    has_bias: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<Elem>>;
@group(0) @binding(2) var<storage, read> weights: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> scales: array<Elem>;
@group(0) @binding(4) var<storage, read> bias: array<Elem>;
@group(0) @binding(5) var<storage, read_write> out: array<Elem>;

var<workgroup> partial: array<f32, 1024>;

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
    if col < p.n {
        for (var w = lane; w < words; w += LANES) {
            let q = weights[col * words + w];
            let s = f32(scales[(w * 32u / p.group_size) * p.n_pad + col]);
            let w0 = low4(q.x);
            let w1 = high4(q.x);
            let w2 = low4(q.y);
            let w3 = high4(q.y);
            let w4 = low4(q.z);
            let w5 = high4(q.z);
            let w6 = low4(q.w);
            let w7 = high4(q.w);
            for (var r = 0u; r < p.m; r++) {
                let b = r * x_row + w * 8u;
                var d = dot(vec4<f32>(x[b]), w0) + dot(vec4<f32>(x[b + 1u]), w1);
                d += dot(vec4<f32>(x[b + 2u]), w2) + dot(vec4<f32>(x[b + 3u]), w3);
                d += dot(vec4<f32>(x[b + 4u]), w4) + dot(vec4<f32>(x[b + 5u]), w5);
                d += dot(vec4<f32>(x[b + 6u]), w6) + dot(vec4<f32>(x[b + 7u]), w7);
                acc[r] += d * s;
            }
        }
    }
    for (var r = 0u; r < MAX_ROWS; r++) {
        partial[r * 256u + lid] = acc[r];
    }
    workgroupBarrier();
    for (var stride = LANES / 2u; stride > 0u; stride /= 2u) {
        if lane < stride {
            for (var r = 0u; r < MAX_ROWS; r++) {
                partial[r * 256u + lid] += partial[r * 256u + lid + stride];
            }
        }
        workgroupBarrier();
    }
    if lane == 0u && col < p.n {
        for (var r = 0u; r < p.m; r++) {
            var v = partial[r * 256u + lid];
            if p.has_bias != 0u {
                v += f32(bias[col]);
            }
            out[r * p.n + col] = Elem(v);
        }
    }
}
