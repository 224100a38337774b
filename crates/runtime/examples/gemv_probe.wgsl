//! Probe of the 4-bit decode GEMV (`q4_gemv.wgsl`'s layout and grid: word-
//! major weights, `COLS` adjacent columns per workgroup, K sliced across
//! it), with parts of the work taken out by `MODE` to see which part
//! limits it: 0 the whole kernel, 1 x staged in workgroup memory, 2 no
//! dequantization (one dot of the word's bits with one vec4 of x), 3 the
//! weights alone (no x, no math beyond a xor), 4 the whole kernel with four
//! words in flight per invocation instead of two, 5 the whole kernel with a
//! cheaper dequantization: nibble `q` as the float `1 + q / 16` (a shift and
//! one mask-and-or into the mantissa's top bits, no subtraction), the dot
//! corrected once per word by the sum of its 32 inputs of x
//! (`sum x (q - 8) = 16 sum x (1 + q / 16) - 24 sum x`). One row of x; no
//! bias. 6 and 7: the whole kernel, each invocation taking 2 or 4 columns
//! (`R`) `COLS` apart, so each vec4 of x loaded serves `R` columns (the
//! workgroup covers `R * COLS` columns). `COLS` (column lanes per
//! workgroup) is set by the host. 10: x rounded to int8 per 32-input block
//! in a prologue (each invocation one block: scale `max|x| / 127`, the
//! block's sum of rounded values), held packed in workgroup memory, and the
//! dot of each 16-byte word taken in integers by `dot4I8Packed` (eight per
//! word, the nibbles masked out of each u32 two bytes at a time), less 8
//! times the block's sum; one float multiply-add per word. 11: mode 10
//! without the prologue (the packed x read from storage, as if another
//! dispatch had rounded it).

const MODE: u32 = 0u;
const R: u32 = 1u;
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
/// Mode 11: x already rounded (`xq`'s layout) and its blocks' `(scale, sum)`.
@group(0) @binding(5) var<storage, read> xq_g: array<vec4<u32>>;
@group(0) @binding(6) var<storage, read> xd_g: array<vec2<f32>>;

/// Bytes `i`, `i + 2`, `i + 4`, `i + 6` of the rounded block `v`.
fn pack_every_other(v: array<i32, 32>, i: u32) -> u32 {
    return pack4xI8(vec4<i32>(v[i], v[i + 2u], v[i + 4u], v[i + 6u]));
}

/// Mode 10's prologue: invocation `b` rounds block `b` of x.
fn round_x(lid: u32) {
    let blocks = p.k / 32u;
    for (var blk = lid; blk < blocks; blk += WG) {
        var v: array<f32, 32>;
        var amax = 0.0;
        for (var i = 0u; i < 8u; i++) {
            let f = x[blk * 8u + i];
            v[4u * i] = f.x;
            v[4u * i + 1u] = f.y;
            v[4u * i + 2u] = f.z;
            v[4u * i + 3u] = f.w;
            amax = max(amax, max(max(abs(f.x), abs(f.y)), max(abs(f.z), abs(f.w))));
        }
        let inv = select(0.0, 127.0 / amax, amax > 0.0);
        var r: array<i32, 32>;
        var total = 0;
        for (var i = 0u; i < 32u; i++) {
            r[i] = i32(round(v[i] * inv));
            total += r[i];
        }
        xq[2u * blk] = vec4<u32>(pack_every_other(r, 0u), pack_every_other(r, 1u), pack_every_other(r, 8u), pack_every_other(r, 9u));
        xq[2u * blk + 1u] = vec4<u32>(pack_every_other(r, 16u), pack_every_other(r, 17u), pack_every_other(r, 24u), pack_every_other(r, 25u));
        xd[blk] = vec2<f32>(amax / 127.0, f32(total));
    }
}

/// One word's dot with rounded block `w` of x, in integers, scaled.
fn word_i8(q: vec4<u32>, w: u32, s: f32) -> f32 {
    var a: vec4<u32>;
    var b: vec4<u32>;
    var d: vec2<f32>;
    if MODE == 11u {
        a = xq_g[2u * w];
        b = xq_g[2u * w + 1u];
        d = xd_g[w];
    } else {
        a = xq[2u * w];
        b = xq[2u * w + 1u];
        d = xd[w];
    }
    let m = 0x0F0F0F0Fu;
    var i = dot4I8Packed(q.x & m, a.x) + dot4I8Packed((q.x >> 4u) & m, a.y);
    i += dot4I8Packed(q.y & m, a.z) + dot4I8Packed((q.y >> 4u) & m, a.w);
    i += dot4I8Packed(q.z & m, b.x) + dot4I8Packed((q.z >> 4u) & m, b.y);
    i += dot4I8Packed(q.w & m, b.z) + dot4I8Packed((q.w >> 4u) & m, b.w);
    return (f32(i) - 8.0 * d.y) * (d.x * s);
}

var<workgroup> partial: array<f32, WG>;
var<workgroup> xs: array<vec4<f32>, 512>;
/// Mode 10: x rounded, two `vec4<u32>` a 32-input block (`[even0, odd0,
/// even1, odd1]`, `[even2, odd2, even3, odd3]`: bytes of the inputs that
/// the low and the high nibbles of weight u32 `j` multiply), each block's
/// scale and sum of its rounded inputs.
var<workgroup> xq: array<vec4<u32>, 512>;
var<workgroup> xd: array<vec2<f32>, 256>;

fn low4(word: u32) -> vec4<f32> {
    let q = vec4<u32>(word, word >> 4u, word >> 8u, word >> 12u) & vec4<u32>(15u);
    return bitcast<vec4<f32>>(q | vec4<u32>(0x4B000000u)) - 8388616.0;
}

/// Nibbles `4i .. 4i + 4` of `word` (at bits 0, 4, 8, 12) as `1 + q / 16`.
fn unit4(word: u32) -> vec4<f32> {
    let v = vec4<u32>(word << 19u, word << 15u, word << 11u, word << 7u);
    return bitcast<vec4<f32>>((v & vec4<u32>(0x00780000u)) | vec4<u32>(0x3F800000u));
}

/// `sum x (q - 8)` of one word by `unit4`: 16 times the dot with
/// `1 + q / 16`, less 24 times the sum of x.
fn dot32_unit(q: vec4<u32>, b: u32) -> f32 {
    let x0 = x[b];
    let x1 = x[b + 1u];
    let x2 = x[b + 2u];
    let x3 = x[b + 3u];
    let x4 = x[b + 4u];
    let x5 = x[b + 5u];
    let x6 = x[b + 6u];
    let x7 = x[b + 7u];
    var d = dot(x0, unit4(q.x)) + dot(x1, unit4(q.x >> 16u));
    d += dot(x2, unit4(q.y)) + dot(x3, unit4(q.y >> 16u));
    d += dot(x4, unit4(q.z)) + dot(x5, unit4(q.z >> 16u));
    d += dot(x6, unit4(q.w)) + dot(x7, unit4(q.w >> 16u));
    let sx = dot(x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7, vec4<f32>(1.0));
    return 16.0 * d - 24.0 * sx;
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
    if MODE == 5u {
        return dot32_unit(q, b) * s;
    }
    if MODE == 10u || MODE == 11u {
        return word_i8(q, b / 8u, s);
    }
    return dot32(q, b) * s;
}

/// Modes 6 and 7: `R` columns per invocation.
fn multi(lid: u32, wg: u32) {
    let c = lid % COLS;
    let slice = lid / COLS;
    let words = p.k / 32u;
    var cols: array<u32, R>;
    var acc: array<f32, R>;
    for (var r = 0u; r < R; r++) {
        cols[r] = min(wg * R * COLS + r * COLS + c, p.n - 1u);
    }
    for (var w = slice; w < words; w += SLICES) {
        let b = w * 8u;
        var xr: array<vec4<f32>, 8>;
        for (var i = 0u; i < 8u; i++) {
            xr[i] = x[b + i];
        }
        var q: array<vec4<u32>, R>;
        var sc: array<f32, R>;
        for (var r = 0u; r < R; r++) {
            q[r] = weights[w * p.n + cols[r]];
            sc[r] = scales[(w * 32u / p.group_size) * p.n + cols[r]];
        }
        for (var r = 0u; r < R; r++) {
            var d = dot(xr[0], low4(q[r].x)) + dot(xr[1], low4(q[r].x >> 16u));
            d += dot(xr[2], low4(q[r].y)) + dot(xr[3], low4(q[r].y >> 16u));
            d += dot(xr[4], low4(q[r].z)) + dot(xr[5], low4(q[r].z >> 16u));
            d += dot(xr[6], low4(q[r].w)) + dot(xr[7], low4(q[r].w >> 16u));
            acc[r] += d * sc[r];
        }
    }
    for (var r = 0u; r < R; r++) {
        partial[lid] = acc[r];
        workgroupBarrier();
        for (var st = SLICES / 2u; st > 0u; st /= 2u) {
            if slice < st {
                partial[lid] += partial[lid + st * COLS];
            }
            workgroupBarrier();
        }
        let col = wg * R * COLS + r * COLS + c;
        if slice == 0u && col < p.n {
            out[col] = partial[lid];
        }
        workgroupBarrier();
    }
}

@compute @workgroup_size(WG)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    // Never true (the host writes 0): keeps mode 11's bindings in every
    // mode's layout.
    if p._pad == 0xFFFFFFFFu {
        out[0] = f32(xq_g[0].x) + xd_g[0].x;
    }
    if MODE == 6u || MODE == 7u {
        multi(lid, wid.y * groups.x + wid.x);
        return;
    }
    if MODE == 1u {
        for (var i = lid; i < p.k / 4u; i += WG) {
            xs[i] = x[i];
        }
        workgroupBarrier();
    }
    if MODE == 10u {
        round_x(lid);
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
