//! Probe of the 4-bit decode GEMV (`q4_gemv.wgsl`'s layout and grid: word-
//! major weights, `COLS` adjacent columns per workgroup, K sliced across
//! it), with parts of the work taken out by `MODE` to see which part
//! limits it: 0 the whole kernel, 1 x staged in workgroup memory, 2 no
//! dequantization (one dot of the word's bits with one vec4 of x), 3 the
//! weights alone (no x, no math beyond a xor), 4 the whole kernel with four
//! words in flight per invocation instead of two. One row of x; no bias.

const MODE: u32 = 0u;
const WG: u32 = 256u;
const COLS: u32 = 32u;
const SLICES: u32 = WG / COLS;

struct Params {
    n: u32,
    k: u32,
    group_size: u32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> weights: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> scales: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

var<workgroup> partial: array<f32, WG>;
var<workgroup> xs: array<vec4<f32>, 512>;

fn low4(word: u32) -> vec4<f32> {
    let q = vec4<u32>(word, word >> 4u, word >> 8u, word >> 12u) & vec4<u32>(15u);
    return bitcast<vec4<f32>>(q | vec4<u32>(0x4B000000u)) - 8388616.0;
}

fn xv(i: u32) -> vec4<f32> {
    if MODE == 1u {
        return xs[i];
    }
    return x[i];
}

fn dot32(q: vec4<u32>, b: u32) -> f32 {
    var d = dot(xv(b), low4(q.x)) + dot(xv(b + 1u), low4(q.x >> 16u));
    d += dot(xv(b + 2u), low4(q.y)) + dot(xv(b + 3u), low4(q.y >> 16u));
    d += dot(xv(b + 4u), low4(q.z)) + dot(xv(b + 5u), low4(q.z >> 16u));
    d += dot(xv(b + 6u), low4(q.w)) + dot(xv(b + 7u), low4(q.w >> 16u));
    return d;
}

fn word(q: vec4<u32>, b: u32, s: f32) -> f32 {
    if MODE == 2u {
        return dot(bitcast<vec4<f32>>(q & vec4<u32>(0x3F7FFFFFu)), x[b]) * s;
    }
    if MODE == 3u {
        return f32((q.x ^ q.y ^ q.z ^ q.w) & 1u);
    }
    return dot32(q, b) * s;
}

@compute @workgroup_size(WG)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    if MODE == 1u {
        for (var i = lid; i < p.k / 4u; i += WG) {
            xs[i] = x[i];
        }
        workgroupBarrier();
    }
    let c = lid % COLS;
    let slice = lid / COLS;
    let target_col = (wid.y * groups.x + wid.x) * COLS + c;
    let col = min(target_col, p.n - 1u);
    let words = p.k / 32u;
    var acc = 0.0;
    var w = slice;
    if MODE == 4u {
        for (; w + 3u * SLICES < words; w += 4u * SLICES) {
            let q0 = weights[w * p.n + col];
            let q1 = weights[(w + SLICES) * p.n + col];
            let q2 = weights[(w + 2u * SLICES) * p.n + col];
            let q3 = weights[(w + 3u * SLICES) * p.n + col];
            let s0 = scales[(w * 32u / p.group_size) * p.n + col];
            let s1 = scales[((w + SLICES) * 32u / p.group_size) * p.n + col];
            let s2 = scales[((w + 2u * SLICES) * 32u / p.group_size) * p.n + col];
            let s3 = scales[((w + 3u * SLICES) * 32u / p.group_size) * p.n + col];
            acc += word(q0, w * 8u, s0) + word(q1, (w + SLICES) * 8u, s1);
            acc += word(q2, (w + 2u * SLICES) * 8u, s2) + word(q3, (w + 3u * SLICES) * 8u, s3);
        }
    }
    for (; w + SLICES < words; w += 2u * SLICES) {
        let q0 = weights[w * p.n + col];
        let q1 = weights[(w + SLICES) * p.n + col];
        let s0 = scales[(w * 32u / p.group_size) * p.n + col];
        let s1 = scales[((w + SLICES) * 32u / p.group_size) * p.n + col];
        acc += word(q0, w * 8u, s0) + word(q1, (w + SLICES) * 8u, s1);
    }
    if w < words {
        acc += word(weights[w * p.n + col], w * 8u, scales[(w * 32u / p.group_size) * p.n + col]);
    }
    partial[lid] = acc;
    workgroupBarrier();
    for (var st = SLICES / 2u; st > 0u; st /= 2u) {
        if slice < st {
            partial[lid] += partial[lid + st * COLS];
        }
        workgroupBarrier();
    }
    if slice == 0u && target_col < p.n {
        out[col] = partial[lid];
    }
}
