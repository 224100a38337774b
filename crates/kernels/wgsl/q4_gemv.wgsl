//! Decode route of `et_vk.linear_q4gsw` (at most `MAX_ROWS` rows of x):
//! `out[m, n] = sum_k x[m, k] * (nibble(n, k) - 8) * scales[k / group, n] + bias[n]`.
//!
//! Bandwidth-bound: each weight byte is read once. An invocation owns
//! `COLS` adjacent output columns and one of `lanes` slices of K (the host
//! picks `lanes`, a power of two up to `WG`: few for long rows and many
//! columns, many where N is small, so that small projections still fill
//! the GPU). Per step it loads one 16-byte word (32 nibbles: one scale
//! group, since the host routes here only when `group % 32 == 0` and
//! `K % 32 == 0`) of each of its columns and their scales before using any,
//! reads the 32 inputs of x once for all its columns, and accumulates in
//! f32. The lanes of a column are adjacent invocations reading adjacent
//! words (coalesced); the columns of a workgroup are adjacent, so the scale
//! reads of one group row are contiguous. Lanes meet in a workgroup-memory
//! tree reduction (no subgroups: it runs in the browser too). Columns past
//! N read the last column and are not stored.
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
    /// Row length of the scales (and bias): N padded.
    n_pad: u32,
    /// Inputs per scale group (a multiple of 32).
    group_size: u32,
    has_bias: u32,
    /// Invocations that split one column's K: a power of two, at most `WG`.
    lanes: u32,
    _pad0: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<Elem>>;
@group(0) @binding(2) var<storage, read> weights: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> scales: array<Elem>;
@group(0) @binding(4) var<storage, read> bias: array<Elem>;
@group(0) @binding(5) var<storage, read_write> out: array<Elem>;

var<workgroup> partial: array<vec4<f32>, WG>;

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
    if col0 < p.n {
        let last = p.n - 1u;
        let c1 = min(col0 + 1u, last);
        let c2 = min(col0 + 2u, last);
        let c3 = min(col0 + 3u, last);
        for (var w = lane; w < words; w += lanes) {
            let q0 = weights[col0 * words + w];
            let q1 = weights[c1 * words + w];
            let q2 = weights[c2 * words + w];
            let q3 = weights[c3 * words + w];
            let at = (w * 32u / p.group_size) * p.n_pad;
            let s = vec4<f32>(
                f32(scales[at + col0]),
                f32(scales[at + c1]),
                f32(scales[at + c2]),
                f32(scales[at + c3]),
            );
            for (var r = 0u; r < MAX_ROWS; r++) {
                if r < p.m {
                    let b = r * x_row + w * 8u;
                    var xs: array<vec4<f32>, 8>;
                    for (var i = 0u; i < 8u; i++) {
                        xs[i] = vec4<f32>(x[b + i]);
                    }
                    let d = vec4<f32>(dot32(q0, xs), dot32(q1, xs), dot32(q2, xs), dot32(q3, xs));
                    acc[r] += d * s;
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
            if lane == 0u && col0 < p.n {
                let v = partial[lid];
                for (var c = 0u; c < COLS; c++) {
                    let col = col0 + c;
                    if col < p.n {
                        var y = v[c];
                        if p.has_bias != 0u {
                            y += f32(bias[col]);
                        }
                        out[r * p.n + col] = Elem(y);
                    }
                }
            }
            workgroupBarrier();
        }
    }
}
