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

/// Stores row `r` of the columns from `col0` (lane 0 of each slot).
fn emit(r: u32, v: vec4<f32>, col0: u32, lane: u32) {
    if lane == 0u {
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
    var acc0 = vec4<f32>();
    var acc1 = vec4<f32>();
    var acc2 = vec4<f32>();
    var acc3 = vec4<f32>();
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
            let s = vec4<f32>(f32(scales[at + col0]), f32(scales[at + c1]), f32(scales[at + c2]), f32(scales[at + c3]));
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
    emit(0u, reduce(acc0, lid, lane, lanes), col0, lane);
    if p.m > 1u {
        emit(1u, reduce(acc1, lid, lane, lanes), col0, lane);
    }
    if p.m > 2u {
        emit(2u, reduce(acc2, lid, lane, lanes), col0, lane);
    }
    if p.m > 3u {
        emit(3u, reduce(acc3, lid, lane, lanes), col0, lane);
    }
}
